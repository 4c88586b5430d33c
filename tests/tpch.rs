//! The TPC-H and SSB correctness suites: all 22 TPC-H and 13 SSB queries at
//! scale factor 0.01 through the MySQL protocol, every answer checked against
//! DuckDB on the same generated data (row count, values with a 1e-6 relative
//! tolerance, order where the query orders). Runs `benches/run --no-report`
//! with this build's binary; data comes from tpchgen-cli (SSB derived from it
//! by `benches/ssb/generate.py`); `.ci/run` installs tpchgen-cli, DuckDB and
//! PyMySQL.

use std::path::Path;

fn check(bench: &str, queries: usize) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new("python3")
        .arg(root.join("benches/run"))
        .args([
            "--bench",
            bench,
            "--sf",
            "0.01",
            "--runs",
            "0",
            "--no-report",
            "--engines",
            "tethys,duckdb",
            "--tethys-bin",
            env!("CARGO_BIN_EXE_tethys"),
        ])
        .output()
        .expect("python3 must be installed");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_eq!(
        stdout.matches("check=ok").count(),
        queries,
        "every query answered and checked:\n{stdout}"
    );
}

/// One test: SSB data is derived from the TPC-H files, so the two must not
/// generate into the same directory at once.
#[test]
fn tpch_and_ssb_sf001_answers_match_duckdb() {
    check("tpch", 22);
    check("ssb", 13);
}
