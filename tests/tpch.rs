//! The TPC-H and SSB correctness suites: all 22 TPC-H and 13 SSB queries at
//! scale factor 0.1 through the MySQL protocol, every answer checked against
//! DuckDB on the same generated data (row count, values with a 1e-6 relative
//! tolerance, order where the query orders). Runs `benches/run --no-report`
//! with this build's binary; data comes from tpchgen-cli (SSB derived from it
//! by `benches/ssb/generate.py`); `.ci/run` installs tpchgen-cli, DuckDB and
//! PyMySQL.
//!
//! SF0.1, not SF0.01: at SF0.01 DuckDB answers SSB q2.3, q3.3 and q3.4 with
//! no rows and TPC-H q17 with one all-NULL row, so an engine answering
//! nothing would pass those checks. The runner fails a query whose
//! reference answer is empty or all NULL, and the tests below show both
//! guards fail as they should.

use std::path::Path;
use std::process::Output;
use std::sync::Mutex;

/// The runs share `benches/data/` (generated on first use): one at a time.
static DATA: Mutex<()> = Mutex::new(());

fn bench_run(args: &[&str]) -> (Output, String) {
    let _data = DATA.lock().unwrap_or_else(|e| e.into_inner());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new("python3")
        .arg(root.join("benches/run"))
        .args(["--runs", "0", "--no-report", "--tethys-bin"])
        .arg(env!("CARGO_BIN_EXE_tethys"))
        .args(args)
        .output()
        .expect("python3 must be installed");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out, text)
}

fn check(bench: &str, queries: usize, extra: &[&str]) {
    let mut args = vec![
        "--bench",
        bench,
        "--sf",
        "0.1",
        "--engines",
        "tethys,duckdb",
    ];
    args.extend(extra);
    let (out, text) = bench_run(&args);
    assert!(out.status.success(), "{text}");
    assert_eq!(
        text.matches("check=ok").count(),
        queries,
        "every query answered and checked:\n{text}"
    );
    assert!(
        !text.contains("rows=0 "),
        "a reference answer is empty:\n{text}"
    );
}

/// One test: SSB data is derived from the TPC-H files, so the two must not
/// generate into the same directory at once.
#[test]
fn tpch_and_ssb_sf01_answers_match_duckdb() {
    check("tpch", 22, &[]);
    check("ssb", 13, &[]);
}

/// The same on an FE and three BEs as separate processes, one replica of
/// each tablet: every query runs over the backends (MPP), stages exchanging
/// rows, and answers as DuckDB does.
#[test]
fn tpch_and_ssb_on_three_backends_match_duckdb() {
    check("tpch", 22, &["--backends", "3"]);
    check("ssb", 13, &["--backends", "3"]);
}

/// The check can fail: one query's Tethys answer replaced by no rows fails
/// the run, naming that query.
#[test]
fn an_empty_answer_fails_the_check() {
    let (out, text) = bench_run(&[
        "--bench",
        "tpch",
        "--sf",
        "0.1",
        "--engines",
        "tethys,duckdb",
        "--queries",
        "6,17",
        "--inject-empty",
        "q17",
    ]);
    assert!(!out.status.success(), "{text}");
    assert_eq!(text.matches("check=ok").count(), 1, "q06 passes:\n{text}");
    assert!(
        text.contains("q17.sql: MISMATCH: 0 rows, expected 1"),
        "{text}"
    );
    assert!(text.contains("1 queries failed"), "{text}");
}

/// A reference answer that could not tell a wrong engine from a right one
/// (TPC-H q17 is one all-NULL row at SF0.01) fails the run.
#[test]
fn an_empty_reference_answer_fails_the_run() {
    let (out, text) = bench_run(&[
        "--bench",
        "tpch",
        "--sf",
        "0.01",
        "--engines",
        "duckdb",
        "--queries",
        "17",
    ]);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("q17.sql: REFERENCE EMPTY: DuckDB's answer has no rows or only NULLs"),
        "{text}"
    );
}
