"""`sglang-perf baseline diff --git REV [NEW]`: the OLD side read from git (`git show REV:path`) for the baseline
file or folder NEW names in the working tree, so a reviewer diffs a branch's baselines without a second checkout."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from pytest_sglang_perf.cli.baseline.diff import Side, read_side
from pytest_sglang_perf.cli.baseline.project import ToolError

_TIMEOUT = 60


def git_side(revision: str, new: Path) -> Side:
    """The baseline files NEW names (a file, or the `*.json` of a folder), as they are at `revision`; a file or
    folder that did not exist then gives no files. Raises ToolError when git cannot answer."""
    folder = new if new.is_dir() else new.parent
    if not folder.is_dir():
        raise ToolError(f"{new}: no such file or directory; with --git REV, NEW is a baseline file or folder of "
                        "this checkout")
    if new.is_dir():
        listed = _git(folder, revision, "ls-tree", "--name-only", revision, "--", ".")
        names = [name for name in listed.splitlines() if name.endswith(".json")]
    else:
        listed = _git(folder, revision, "ls-tree", "--name-only", revision, "--", new.name)
        names = [new.name] if listed.strip() else []
    label = f"{revision}:{new}"
    with tempfile.TemporaryDirectory(prefix="sglang-perf-diff-") as tmp:
        copy = Path(tmp) / (new.name if new.is_dir() else "files")
        copy.mkdir()
        for name in names:
            (copy / name).write_text(_git(folder, revision, "show", f"{revision}:./{name}"), encoding="utf-8")
        try:
            side = read_side(copy, label)
        except ToolError as exc:
            raise ToolError(str(exc).replace(str(copy), label)) from None
    return Side(label, side.files, single=not new.is_dir())


def _git(cwd: Path, revision: str, *args: str) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=_TIMEOUT)
    except (OSError, subprocess.SubprocessError) as exc:
        raise ToolError(f"--git {revision}: cannot run git ({exc}); install git, or pass OLD as a file or folder "
                        "(e.g. one written by: git show REV:PATH > old.json)") from None
    if done.returncode != 0:
        raise ToolError(f"--git {revision}: git {' '.join(args[:1])} failed in {cwd}: {done.stderr.strip()}; check "
                        "the revision and that NEW is inside a git checkout")
    return done.stdout
