//! Runs every `sql-tests/**/*.slt` file against a freshly started Tethys
//! (one server per file) through the MySQL protocol. Column type letters are
//! checked strictly against the result's MySQL column types
//! (`sql-tests/src/column_type.rs`).
//!
//! `cargo test --test sqllogic -- [FILTER] --complete-types` rewrites the
//! type letters of the query records whose values already match, and
//! nothing else: review the diff.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tethys_sql_tests::sqllogictest::{
    default_normalizer, default_validator, strict_column_validator,
};
use tethys_sql_tests::{MySqlDb, TethysServer};
use tokio::sync::Mutex;

fn slt_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            slt_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "slt") {
            out.push(p);
        }
    }
}

async fn run_file(binary: &Path, file: &Path, complete_types: bool) -> Result<(), String> {
    let server = TethysServer::start(binary)
        .await
        .map_err(|e| e.to_string())?;
    let server = Arc::new(Mutex::new(server));
    let mut runner = tethys_sql_tests::sqllogictest::Runner::new(move || {
        let server = server.clone();
        async move { MySqlDb::connect(server).await }
    });
    runner.with_column_validator(strict_column_validator);
    if complete_types {
        return runner
            .update_test_file(
                file,
                " ",
                default_validator,
                default_normalizer,
                strict_column_validator,
            )
            .await
            .map_err(|e| e.to_string());
    }
    runner
        .run_file_async(file)
        .await
        .map_err(|e| e.display(true).to_string())
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("sql-tests");
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let complete_types = std::env::args().any(|a| a == "--complete-types");
    let mut files = vec![];
    slt_files(&root, &mut files);
    files.sort();
    if let Some(f) = &filter {
        files.retain(|p| p.to_string_lossy().contains(f.as_str()));
    }
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_tethys"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let (mut passed, mut failed) = (0, 0);
    for f in &files {
        let name = f.strip_prefix(&root).unwrap_or(f).display().to_string();
        let start = std::time::Instant::now();
        match rt.block_on(run_file(&binary, f, complete_types)) {
            Ok(()) => {
                passed += 1;
                println!("ok     {name} ({:.1}s)", start.elapsed().as_secs_f64());
            }
            Err(e) => {
                failed += 1;
                println!("FAILED {name}\n{e}");
            }
        }
    }
    println!("sqllogictest: {passed} passed, {failed} failed");
    if failed > 0 || passed == 0 {
        std::process::exit(1);
    }
}
