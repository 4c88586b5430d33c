"""Result files of the benchmarks: each run writes new files, never an old one.

Every bench script names its files `<bench>-<YYYY-MM-DD>-<HHMMSS>.<ext>`
(the run's start, local time) and opens them with mode "x", so a second run,
even within the same second, can never replace a first: it fails instead.
Diagnoses and later remarks go in `<stem>-notes.md` beside the result,
written by hand, never into the script's file. `INDEX.md` is generated from
the files by `benches/index` (called by every script after it writes).

    import resultfile
    run = resultfile.Run("tpch-sf1")          # the stem, fixed at the start
    run.write(".md", text)                    # benches/results/<stem>.md
    run.write(".png", data, binary=True)
"""

import datetime
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benches", "results")


def build_id():
    """The commit the benchmarked tree is at, with `+dirty` when the tree
    differs from it (a figure from an uncommitted build says so)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--",
                                ".", ":!benches/results"],
                               cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return head + ("+dirty" if dirty else "")


class Run:
    """One benchmark run's result files: a stem fixed when the run starts."""

    def __init__(self, name, now=None):
        self.started = now or datetime.datetime.now()
        self.stem = f"{name}-{self.started:%Y-%m-%d-%H%M%S}"
        self.build = build_id()

    def path(self, ext):
        return os.path.join(RESULTS, self.stem + ext)

    def write(self, ext, data, binary=False):
        """Creates benches/results/<stem><ext>; fails if it exists."""
        os.makedirs(RESULTS, exist_ok=True)
        with open(self.path(ext), "xb" if binary else "x") as f:
            f.write(data)
        return self.path(ext)

    def finish(self):
        """Regenerates INDEX.md after this run's files are written."""
        subprocess.run([os.path.join(ROOT, "benches", "index")], check=True)
