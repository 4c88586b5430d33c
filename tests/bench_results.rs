//! `scripts/check-results` (run by `scripts/test`) keeps benchmark results
//! write-once: in a scratch git repository holding the check and
//! `benches/index`, adding result files and editing notes passes; changing,
//! renaming or deleting a committed result file, or leaving INDEX.md stale,
//! fails.

use std::path::{Path, PathBuf};
use std::process::Command;

struct Repo {
    dir: PathBuf,
}

impl Repo {
    fn new() -> Repo {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let dir = std::env::temp_dir().join(format!(
            "tethys-check-results-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        for sub in ["scripts", "benches/results"] {
            std::fs::create_dir_all(dir.join(sub)).expect(sub);
        }
        for file in ["scripts/check-results", "benches/index"] {
            std::fs::copy(root.join(file), dir.join(file)).expect(file);
        }
        let repo = Repo { dir };
        repo.git(&["init", "-q"]);
        repo.write(
            "benches/results/tpch-sf1-2026-12-04-101010.md",
            "Headline: a\n",
        );
        repo.commit("first results and the check");
        repo
    }

    fn git(&self, args: &[&str]) {
        let ok = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(&self.dir)
            .status()
            .expect("git must be installed")
            .success();
        assert!(ok, "git {args:?}");
    }

    fn write(&self, path: &str, text: &str) {
        std::fs::write(self.dir.join(path), text).expect(path);
    }

    fn index(&self) {
        let ok = Command::new(self.dir.join("benches/index"))
            .status()
            .expect("python3 runs benches/index")
            .success();
        assert!(ok);
    }

    fn commit(&self, message: &str) {
        self.index();
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", message]);
    }

    /// (passed, output) of the check.
    fn check(&self) -> (bool, String) {
        let out = Command::new(self.dir.join("scripts/check-results"))
            .current_dir(&self.dir)
            .output()
            .expect("bash runs scripts/check-results");
        let text = String::from_utf8_lossy(&out.stdout).to_string()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.success(), text)
    }
}

impl Drop for Repo {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

const FIRST: &str = "benches/results/tpch-sf1-2026-12-04-101010.md";

#[test]
fn new_results_and_notes_pass() {
    let repo = Repo::new();
    assert!(repo.check().0, "{}", repo.check().1);
    repo.write(
        "benches/results/tpch-sf1-2026-12-04-111111.md",
        "Headline: b\n",
    );
    repo.write(
        "benches/results/tpch-sf1-2026-12-04-101010-notes.md",
        "why\n",
    );
    repo.commit("a re-run and notes");
    repo.write(
        "benches/results/tpch-sf1-2026-12-04-101010-notes.md",
        "why, later\n",
    );
    repo.commit("notes edited");
    let (ok, out) = repo.check();
    assert!(ok, "{out}");
}

#[test]
fn a_changed_result_file_fails() {
    let repo = Repo::new();
    repo.write(FIRST, "Headline: better\n");
    let (ok, out) = repo.check();
    assert!(!ok && out.contains(FIRST), "uncommitted change: {out}");
    repo.commit("overwrite a result");
    let (ok, out) = repo.check();
    assert!(!ok && out.contains(FIRST), "committed change: {out}");
}

#[test]
fn a_renamed_or_deleted_result_file_fails() {
    {
        let repo = Repo::new();
        repo.git(&["mv", FIRST, "benches/results/tpch-sf1-2026-12-04-999999.md"]);
        repo.commit("rename a result");
        let (ok, out) = repo.check();
        assert!(!ok && out.contains(FIRST), "rename: {out}");
    }
    let repo = Repo::new();
    std::fs::remove_file(repo.dir.join(FIRST)).unwrap();
    repo.commit("delete a result");
    let (ok, out) = repo.check();
    assert!(!ok && out.contains(FIRST), "delete: {out}");
}

#[test]
fn a_stale_index_fails() {
    let repo = Repo::new();
    repo.write(
        "benches/results/ssb-sf1-2026-12-04-121212.md",
        "Headline: c\n",
    );
    let (ok, out) = repo.check();
    assert!(!ok && out.contains("INDEX.md is out of date"), "{out}");
}
