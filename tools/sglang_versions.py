"""SGLang versions as data: each release's flag table read from its wheel, and how the command line changed.

    python tools/sglang_versions.py tables WHEEL [WHEEL ...] [--python PY]
        For each wheel (`pip download --no-deps sglang==0.5.19 -d DIR`), its `sglang/` package is unpacked into a
        temporary folder and SGLang's own parser is dumped by tools/extract_sglang_flags.py, run by PY with that
        folder first on its path: the wheel's `sglang.srt.server_args` is imported, with the dependencies of PY's
        environment (default: the `sglang-cpu` tox environment's python, torch's CPU build: no GPU, no CUDA code
        runs). Writes pytest_sglang_perf/sglang_facts/data/sglang-<version>-flags.json, one option a line.
    python tools/sglang_versions.py history
        Writes data/sglang-flag-history.json from every flag table there (sglang_facts/flag_history.py).
    python tools/sglang_versions.py diff OLD NEW
        Prints what changed from one covered version's table to another's: flags added, removed, defaults and
        choices changed, newly deprecated (and what each names instead).
    python tools/sglang_versions.py run VERSION -- COMMAND ...
        Runs COMMAND with SGLang VERSION in place of the environment's own: the release's wheel (its `sglang/`
        and its metadata) and its transformers/tokenizers pins, unpacked once into the overlay cache, first on
        PYTHONPATH; SGLANG_PERF_OLDER_SGLANG=VERSION tells the tests (tests/sglang_cpu). CI's older-release lane:
        `tox -e sglang-cpu -- python tools/sglang_versions.py run 0.5.13 -- pytest tests/sglang_cpu/...`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from pytest_sglang_perf.sglang_facts.flag_history import HISTORY, diff_tables, history_of  # noqa: E402
from pytest_sglang_perf.sglang_facts.flags import FlagTable, load_flag_table  # noqa: E402

DATA = ROOT / "pytest_sglang_perf" / "sglang_facts" / "data"
TOX_PYTHON = Path.home() / ".cache" / "pytest-sglang-perf" / "tox" / "sglang-cpu" / "bin" / "python"


def table_path(version: str) -> Path:
    return DATA / f"sglang-{version}-flags.json"


def covered() -> list[FlagTable]:
    """Every flag table in the package's data."""
    return [load_flag_table(path) for path in sorted(DATA.glob("sglang-*-flags.json"))]


def dump(table: dict[str, Any]) -> str:
    """One option a line: a reviewable diff between two versions' files."""
    head = {key: value for key, value in table.items() if key != "options"}
    lines = [json.dumps(option, sort_keys=True) for option in table["options"]]
    return (json.dumps(head, sort_keys=True)[:-1] + ', "options": [\n' + ",\n".join(lines) + "\n]}\n")


def wheel_version(wheel: Path) -> str:
    match = re.match(r"sglang-([^-]+)-", wheel.name)
    if match is None:
        raise SystemExit(f"{wheel}: not an SGLang wheel (expected sglang-<version>-...whl)")
    return match.group(1)


OVERLAYS = Path.home() / ".cache" / "pytest-sglang-perf" / "overlays"
OVERLAID = ("transformers", "tokenizers")
"""Packages an older SGLang's import depends on the version of (0.5.12-0.5.18 register a `qwen3_asr` config that
transformers 5.19 already has; transformers 5.12 refuses tokenizers 0.23): the release's own pins are put ahead of
PY's environment."""


def _requires(metadata: str, name: str) -> str | None:
    """The version specifier of `Requires-Dist: <name>...` (no extras, no markers), or None."""
    match = re.search(rf"^Requires-Dist: {name}\s*\(?([=<>!~][^;\n)]*)\)?\s*$", metadata, re.M)
    return None if match is None else match.group(1).replace(" ", "")


def _wheel_metadata(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return archive.read(name).decode()


def _installed(python: Path, name: str) -> str | None:
    done = subprocess.run([str(python), "-c", f"import importlib.metadata as m; print(m.version({name!r}))"],
                          capture_output=True, text=True, timeout=60)
    return done.stdout.strip() if done.returncode == 0 else None


def _overlay(requirement: str) -> Path:
    """`pkg==1.2` (or a range) unpacked once, --no-deps, into the overlay cache; its folder."""
    folder = OVERLAYS / re.sub(r"[^A-Za-z0-9_.=<>-]", "_", requirement)
    if not folder.is_dir():
        with tempfile.TemporaryDirectory() as download:
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", requirement, "-d", download],
                           check=True, timeout=600)
            [got] = Path(download).glob("*.whl")
            with zipfile.ZipFile(got) as archive:
                archive.extractall(folder)
    return folder


def overlays(wheel: Path, python: Path) -> list[Path]:
    """The release's own transformers/tokenizers pins, where PY's environment has other versions."""
    return _overlays_for(_wheel_metadata(wheel), python)


def _overlays_for(metadata: str, python: Path) -> list[Path]:
    pins = {name: _requires(metadata, name) for name in OVERLAID}
    out = []
    transformers = pins["transformers"]
    if transformers is not None and transformers.startswith("==") and _installed(python, "transformers") != \
            transformers[2:]:
        folder = _overlay(f"transformers{transformers}")
        out.append(folder)
        metadata = next(folder.glob("*.dist-info/METADATA")).read_text()
        pins["tokenizers"] = pins["tokenizers"] or _requires(metadata, "tokenizers")
    tokenizers = pins["tokenizers"]
    if out and tokenizers is not None and _installed(python, "tokenizers") != tokenizers.removeprefix("=="):
        out.append(_overlay(f"tokenizers{tokenizers}"))
    return out


def extract(wheel: Path, python: Path) -> dict[str, Any]:
    """The wheel's own parser, dumped by PY with the wheel's package (and its transformers pins) first on the
    path. PYTHONHASHSEED=0: some choice lists are sets, whose order is then the same on every run."""
    extra = overlays(wheel, python)
    with tempfile.TemporaryDirectory() as folder:
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(folder, [name for name in archive.namelist() if name.startswith("sglang/")])
        path = os.pathsep.join([folder, *map(str, extra)])
        env = {**os.environ, "PYTHONPATH": path, "HF_HUB_OFFLINE": "1", "PYTHONHASHSEED": "0"}
        done = subprocess.run([str(python), str(ROOT / "tools" / "extract_sglang_flags.py")], env=env,
                              capture_output=True, text=True, timeout=600, cwd=folder)
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-6:])
        raise RuntimeError(f"{wheel.name}: SGLang's parser did not import with {python}:\n{tail}")
    table: dict[str, Any] = json.loads(done.stdout)
    if table.get("sglang_version") != wheel_version(wheel):
        raise RuntimeError(f"{wheel.name}: the dumped parser says version {table.get('sglang_version')!r}: the "
                           "installed SGLang was imported instead of the wheel's")
    return table


def tables(wheels: list[Path], python: Path) -> int:
    failed = 0
    for wheel in wheels:
        try:
            table = extract(wheel, python)
        except RuntimeError as exc:
            print(exc, file=sys.stderr)
            failed += 1
            continue
        path = table_path(table["sglang_version"])
        path.write_text(dump(table), encoding="utf-8")
        print(f"{path.relative_to(ROOT)}: {len(table['options'])} options")
    return 1 if failed else 0


def history() -> int:
    found = history_of(covered())
    HISTORY.write_text(json.dumps(found.to_dict(), indent=0, sort_keys=False) + "\n", encoding="utf-8")
    print(f"{HISTORY.relative_to(ROOT)}: {len(found.flags)} flags over {', '.join(found.versions)}")
    return 0


def diff(old: str, new: str) -> int:
    for version in (old, new):
        if not table_path(version).is_file():
            names = ", ".join(table.sglang_version for table in covered())
            raise SystemExit(f"no flag table for SGLang {version} (covered: {names}); "
                             f"make it with: python tools/sglang_versions.py tables sglang-{version}-*.whl")
    print("\n".join(diff_tables(load_flag_table(table_path(old)), load_flag_table(table_path(new))).lines()))
    return 0


OLDER_VAR = "SGLANG_PERF_OLDER_SGLANG"


def release_overlay(version: str) -> Path:
    """SGLang VERSION's wheel unpacked whole (package and dist-info, so importlib.metadata names it) into the cache."""
    folder = OVERLAYS / f"sglang=={version}"
    if not folder.is_dir():
        with tempfile.TemporaryDirectory() as download:
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", f"sglang=={version}", "-d",
                            download], check=True, timeout=900)
            [wheel] = Path(download).glob("sglang-*.whl")
            partial = folder.with_name(folder.name + ".partial")
            with zipfile.ZipFile(wheel) as archive:
                archive.extractall(partial)
            partial.rename(folder)
    return folder


def run(version: str, command: list[str]) -> int:
    folder = release_overlay(version)
    extra = _pins_overlays(folder, Path(sys.executable))
    path = os.pathsep.join([str(folder), *map(str, extra), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env = {**os.environ, "PYTHONPATH": path, OLDER_VAR: version}
    print(f"sglang_versions: SGLang {version} from {folder}, with {', '.join(p.name for p in extra) or 'no pins'}",
          flush=True)
    return subprocess.run(command, env=env, check=False).returncode


def _pins_overlays(folder: Path, python: Path) -> list[Path]:
    """overlays() for an unpacked release (its METADATA read from the dist-info folder)."""
    metadata = next(folder.glob("sglang-*.dist-info/METADATA")).read_text()
    return _overlays_for(metadata, python)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/sglang_versions.py", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("tables", help="write each wheel's flag table")
    make.add_argument("wheels", nargs="+", type=Path)
    make.add_argument("--python", type=Path, default=TOX_PYTHON,
                      help="the interpreter whose environment imports SGLang's parser (default: %(default)s)")
    commands.add_parser("history", help="write data/sglang-flag-history.json")
    compare = commands.add_parser("diff", help="what changed between two covered versions")
    compare.add_argument("old")
    compare.add_argument("new")
    older = commands.add_parser("run", help="run a command with another SGLang release in place")
    older.add_argument("version")
    older.add_argument("argv", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args(argv)
    if args.command == "run":
        command = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
        if not command:
            parser.error("run: give the command after --, e.g. run 0.5.13 -- pytest tests/sglang_cpu")
        return run(args.version, command)
    if args.command == "tables":
        return tables(args.wheels, args.python)
    if args.command == "history":
        return history()
    return diff(args.old, args.new)


if __name__ == "__main__":
    raise SystemExit(main())
