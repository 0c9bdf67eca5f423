"""Run a benchmark for the working tree and a git revision at the same time.

On this shared 2-core machine, runs minutes apart differ by ±10–25 %: too much to tell
whether a change helped. A benchmark with a ``--worker SRC OUT`` mode (measure with
tether imported from ``SRC``, write JSON to ``OUT``) is run here for both sources at
once, each pinned to its own core, then again with the cores swapped (they differ by up
to 10 %). The revision is checked out in a temporary git worktree; a first short pass
fills that worktree's cache of compiled (numba) code, which the working tree has.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def revision_tree(rev: str) -> Iterator[Path]:
    """A temporary worktree of ``rev`` (removed afterwards)."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "base"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), rev],
                       check=True, capture_output=True)
        try:
            yield tree
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                            str(tree)], capture_output=True)


def start_worker(script: str, args: list[str], core: int, src: Path, out: Path
           ) -> subprocess.Popen:
    """``script`` (a benchmark path) in worker mode on ``core``, tether from ``src``."""
    return subprocess.Popen(["taskset", "-c", str(core), sys.executable, script, *args,
                             "--worker", str(src / "src"), str(out)],
                            stderr=subprocess.DEVNULL)


def side_by_side(script: str, args: list[str], rev: str, warm_args: list[str],
                 report: Callable[[int, int, Any, Any], None]) -> None:
    """Run ``script`` for ``rev`` and the working tree at once, twice (cores swapped);
    call ``report(base_core, new_core, base_result, new_result)`` after each."""
    with revision_tree(rev) as tree, tempfile.TemporaryDirectory() as tmp:
        outs = [Path(tmp) / "base.json", Path(tmp) / "new.json"]
        if start_worker(script, warm_args, 0, tree, Path(tmp) / "warm.json").wait():
            raise SystemExit("the revision's worker failed")
        for base_core, new_core in ((0, 1), (1, 0)):
            runs = [start_worker(script, args, base_core, tree, outs[0]),
                    start_worker(script, args, new_core, ROOT, outs[1])]
            if any(r.wait() for r in runs):
                raise SystemExit("a worker failed")
            report(base_core, new_core, *(json.loads(out.read_text()) for out in outs))


def import_from(src: str) -> None:
    """Make ``import tether`` load the package under ``src`` (checked)."""
    sys.path.insert(0, src)
    import tether

    assert Path(tether.__file__).is_relative_to(src), tether.__file__
