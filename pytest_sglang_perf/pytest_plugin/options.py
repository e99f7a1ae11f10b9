"""The plugin's command-line options and their ini twins, resolved once into RunOptions.

Precedence: command line > environment variable > ini / [tool.pytest.ini_options] > default.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_sglang_perf.config.run_options import RunOptions

_ENV_PREFIX = "SGLANG_PERF_"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


_OPTIONS: tuple[tuple[str, str, str], ...] = (
    # (name, kind, help)
    ("config", "path", "perf configuration file: a sglang-perf.toml, or a pyproject.toml with "
     "[tool.sglang_perf] (default: sglang-perf.toml, then pyproject.toml, in the rootdir)"),
    ("simulate", "bool", "run every variant on the plugin's SGLang simulator instead of SGLang "
     "(no GPU needed; every report says SIMULATED)"),
    ("variants", "list", "comma-separated variant names to run (default: all variants of the matrix)"),
    ("update-baselines", "update", "record the measured values as the new baselines instead of gating on them "
     "(test paths may follow: the flag takes no value)"),
    ("results", "path", "write the session's results (metrics, verdicts, environment) as JSON to this path"),
    ("markdown", "path", "write the session's report as Markdown to this path (it is also appended to "
     "$GITHUB_STEP_SUMMARY when that is set, as in a GitHub Actions job)"),
    ("plots", "path", "draw the session's plots (PNG) into this folder: the variants side by side with confidence "
     "intervals, each server's boot timeline (needs matplotlib: pip install 'pytest-sglang-perf[plots]')"),
    ("benchmark", "bool", "hand every measured cell to pytest-benchmark (its table, --benchmark-* outputs) even when "
     "no --benchmark-json/-autosave/-save/-compare/-histogram/-verbose option asks for it"),
    ("log-dir", "path", "directory for the servers' log files (default: a folder per run under pytest's cache "
     "dir, .pytest_cache/d/sglang-perf/logs/, where the last 10 runs are kept)"),
    ("require-real", "bool", "a gate run: when the perf tests cannot run on SGLang (it is not installed), the session "
     "fails with the cause and the fix instead of skipping them (for CI; `sglang-perf run --real` sets it)"),
    ("require-baselines", "bool", "a gate: fail cells that have no comparable baseline (new, or stale: recorded "
     "for another request, server args, model or GPUs); default: they pass, and the summary says so"),
    ("fail-inconclusive", "bool", "fail cells whose metric got worse beyond its tolerance without statistical "
     "evidence, or whose regression did not hold when re-measured; default: reported as inconclusive, passing"),
    ("boots", "int", "N server boots a variant (default 1). With --sglang-update-baselines: the baselines are "
     "recorded over N boots (the tests' requests re-measured on N-1 fresh ones), so the gate knows the boot-to-boot "
     "spread. Otherwise: after the tests, every variant is booted N-1 more times, in turns (A B, B A, ...), and the "
     "A/B section calls a difference significant only when it holds across boots (the verdicts are unchanged)"),
    ("ignore-conditions", "bool", "record each measurement's conditions (how busy the host was, the client's lag) but "
     "use none of them: a regression measured on a busy host fails as regressed instead of passing as inconclusive, "
     "and a baseline measured there is recorded instead of refused"),
    ("strict-flags", "bool", "fail every test of a variant whose server did not run what it requested (a flag "
     "SGLang overrode, a default optimization it switched off); default: a warning"),
    ("no-probe", "bool", "skip the GPU probe (a read-bandwidth measurement of ~2 s per GPU model, run once before the "
     "first real boot): the bandwidth ceilings then use the GPU table's datasheet figures, labelled so"),
    ("url", "url", "measure the SGLang server already running at this base URL (e.g. http://10.0.0.5:30000) instead "
     "of booting one: no boot, no stop; its /server_info is still checked against the variant's args; select the "
     "one variant it runs with --sglang-variants; its API key comes from SGLANG_PERF_API_KEY"),
    ("remote-gpu", "text", "the GPU model of the server at --sglang-url (nvidia-smi's name, e.g. 'NVIDIA H100 80GB "
     "HBM3'): its baselines are keyed by it (default: 'remote')"),
    ("gpu-lock-dir", "path", "the folder every pytest process of this host shares for its GPU claims (a lock file per "
     "GPU; each server gets CUDA_VISIBLE_DEVICES set to GPUs no other server holds, so pytest-xdist workers never "
     "share one); default: <tmp>/pytest-sglang-perf-gpus"),
    ("reuse", "bool", "keep each server this run boots after pytest ends, and attach to a kept server instead of "
     "booting when one runs exactly what the variant asks (same args, environment, model, SGLang version, GPUs): "
     "the second run of an unchanged matrix boots nothing. A kept server stops after --sglang-reuse-idle without "
     "a run, or on `sglang-perf stop`; `sglang-perf servers` lists them (docs/reuse.md)"),
    ("reuse-idle", "idle", "with --sglang-reuse: seconds a kept server waits for its next run before it stops "
     "(default 900)"),
    ("reuse-shared", "bool", "with --sglang-reuse: measure on a kept server even while another run measures on it "
     "(default: wait for that run; the two would disturb each other's numbers)"),
    ("heartbeat", "seconds", "while a server boots, say which step it is in after this many seconds without a line "
     "(default 15; 0: never)"),  # server/progress.py HEARTBEAT_SECONDS (test_options.py holds them together)
)


_METAVARS = {"list": "NAMES", "int": "N", "seconds": "SECONDS", "idle": "SECONDS", "url": "URL", "text": "NAME"}


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("sglang-perf", "SGLang performance regression tests")
    for name, kind, help_text in _OPTIONS:
        dest = "sglang_" + name.replace("-", "_")
        if kind == "bool":
            group.addoption(f"--sglang-{name}", action="store_true", default=None, dest=dest, help=help_text)
            parser.addini(dest, help_text, type="bool", default=False)
        elif kind == "update":
            _add_update_options(group, dest, help_text)
            parser.addini(dest, help_text + " (ini: true, false or new)", default=None)
        else:
            metavar = _METAVARS.get(kind, "PATH")
            group.addoption(f"--sglang-{name}", action="store", default=None, dest=dest, metavar=metavar,
                            help=help_text)
            parser.addini(dest, help_text, default=None)


def _raw(config: pytest.Config, name: str) -> object:
    dest = "sglang_" + name.replace("-", "_")
    value = config.getoption(dest)
    if value is not None:
        return value
    env = os.environ.get(_ENV_PREFIX + name.replace("-", "_").upper())
    if env is not None:
        return _env_value(name, env)
    return config.getini(dest)


UPDATE_ALL = "all"
UPDATE_NEW = "new"
UPDATE_FLAG = "--sglang-update-baselines"
UPDATE_NEW_FLAG = f"{UPDATE_FLAG}={UPDATE_NEW}"
"""The `new` mode's spelling: an option of its own, matched whole, so it never takes the word after it as a value."""


def _add_update_options(group: pytest.OptionGroup, dest: str, help_text: str) -> None:
    """--sglang-update-baselines and --sglang-update-baselines=new: flags of one destination, neither taking a value,
    so a test path written after either stays a test path. argparse matches an option string whole before it splits
    `--flag=value`, so `=new` (and the older `=all`, not shown) is a flag's whole name; another `=VALUE` is
    argparse's error ("ignored explicit argument")."""
    group.addoption(UPDATE_FLAG, action="store_const", const=UPDATE_ALL, default=None, dest=dest, help=help_text)
    group.addoption(UPDATE_NEW_FLAG, action="store_const", const=UPDATE_NEW, default=None, dest=dest,
                    help="record only the cells that have no baseline entry yet (the others are gated as usual)")
    group.addoption(f"{UPDATE_FLAG}={UPDATE_ALL}", action="store_const", const=UPDATE_ALL, default=None, dest=dest,
                    help=argparse.SUPPRESS)


def _check_update_word(config: pytest.Config) -> None:
    """`--sglang-update-baselines new` (a space, not `=`): the flag takes no value, so `new` is a test path; when no
    such path exists, name the spelling that was meant rather than leave pytest's `file or directory not found`."""
    args = list(config.invocation_params.args)
    words = {args[i + 1] for i, arg in enumerate(args[:-1]) if arg == UPDATE_FLAG}
    for word in sorted(words & {UPDATE_NEW, UPDATE_ALL}):
        if not (Path(config.invocation_params.dir) / word).exists():
            raise pytest.UsageError(
                f"{UPDATE_FLAG} {word}: the flag takes no value, so {word!r} is read as a test path, and there is "
                f"none; write {UPDATE_NEW_FLAG} (no space) to record only the cells without a baseline, or "
                f"{UPDATE_FLAG} alone to record every measured cell")


def _update(value: object) -> str | None:
    """The recording mode from the option, its environment variable or ini value; None: not recording."""
    if value in (None, ""):
        return None
    text = str(value).strip().lower()
    if text in _FALSE:
        return None
    if text in _TRUE:
        return UPDATE_ALL
    if text in (UPDATE_ALL, UPDATE_NEW):
        return text
    raise pytest.UsageError(f"sglang_update_baselines / SGLANG_PERF_UPDATE_BASELINES = {value!r}: expected true, "
                            "false or new")


def _env_value(name: str, raw: str) -> object:
    kind = next(k for n, k, _ in _OPTIONS if n == name)
    if kind != "bool":
        return raw
    if raw.strip().lower() in _TRUE:
        return True
    if raw.strip().lower() in _FALSE:
        return False
    var = _ENV_PREFIX + name.replace("-", "_").upper()
    raise pytest.UsageError(f"{var}={raw!r}: expected 1/0, true/false, yes/no or on/off")


def _path(config: pytest.Config, value: object) -> Path | None:
    if value in (None, ""):
        return None
    path = Path(str(value))
    return path if path.is_absolute() else Path(config.invocation_params.dir) / path


def _names(value: object) -> tuple[str, ...] | None:
    if value in (None, ""):
        return None
    names = tuple(n.strip() for n in str(value).split(",") if n.strip())
    if not names:
        raise pytest.UsageError("--sglang-variants: give at least one variant name, e.g. --sglang-variants default")
    return names


def _count(value: object) -> int:
    if value in (None, ""):
        return 1
    try:
        count = int(str(value))
    except ValueError:
        count = 0
    if count < 1:
        raise pytest.UsageError(f"--sglang-boots: expected a whole number >= 1, got {value!r}")
    return count


def _heartbeat(value: object) -> float:
    from pytest_sglang_perf.server.progress import HEARTBEAT_SECONDS

    return _seconds(value, "--sglang-heartbeat", HEARTBEAT_SECONDS, zero="0 turns it off")


def _idle(value: object) -> float:
    from pytest_sglang_perf.server.kept import DEFAULT_IDLE_SECONDS

    return _seconds(value, "--sglang-reuse-idle", DEFAULT_IDLE_SECONDS, zero=None)


def _seconds(value: object, option: str, default: float, *, zero: str | None) -> float:
    """A finite number of seconds, `default` when unset; 0 only when `zero` says what it means."""
    if value in (None, ""):
        return default
    try:
        seconds = float(str(value))
    except ValueError:
        seconds = -1.0
    if not (seconds >= 0 if zero else seconds > 0) or seconds == float("inf"):
        wanted = f">= 0 ({zero})" if zero else "> 0"
        raise pytest.UsageError(f"{option}: expected seconds {wanted}, got {value!r}")
    return seconds


def may_have_configuration(config: pytest.Config) -> bool:
    """Whether the run may have a perf configuration, told without reading TOML (config/settings.py `find_config`
    decides): a --sglang-config path (or its ini and environment twins), a sglang-perf.toml in the rootdir, or a
    pyproject.toml there that mentions `sglang_perf`. A run without one loads nothing more of the plugin."""
    if _raw(config, "config") not in (None, ""):
        return True
    root = config.rootpath
    if (root / "sglang-perf.toml").is_file():
        return True
    try:
        return "sglang_perf" in (root / "pyproject.toml").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def resolve_options(config: pytest.Config) -> RunOptions:
    from pytest_sglang_perf.config.run_options import RunOptions

    _check_update_word(config)
    simulate = bool(_raw(config, "simulate"))
    run_command = _run_command(simulate)
    return RunOptions(
        config_path=_path(config, _raw(config, "config")),
        simulate=simulate,
        update_baselines=(update := _update(_raw(config, "update-baselines"))) is not None,
        update_new_only=update == UPDATE_NEW,
        results_path=_path(config, _raw(config, "results")),
        markdown_path=_path(config, _raw(config, "markdown")),
        plots_dir=_path(config, _raw(config, "plots")),
        benchmark=bool(_raw(config, "benchmark")),
        variants=_names(_raw(config, "variants")),
        log_dir=_path(config, _raw(config, "log-dir")),
        strict_flags=bool(_raw(config, "strict-flags")),
        require_real=bool(_raw(config, "require-real")) or run_command is not None,
        run_command=run_command,
        require_baselines=bool(_raw(config, "require-baselines")),
        fail_inconclusive=bool(_raw(config, "fail-inconclusive")),
        boots=_count(_raw(config, "boots")),
        verbosity=config.get_verbosity(),
        heartbeat=_heartbeat(_raw(config, "heartbeat")),
        probe=not _raw(config, "no-probe"),
        gpu_lock_dir=_path(config, _raw(config, "gpu-lock-dir")),
        ignore_conditions=bool(_raw(config, "ignore-conditions")),
        reuse=bool(_raw(config, "reuse")),
        reuse_idle=_idle(_raw(config, "reuse-idle")),
        reuse_shared=bool(_raw(config, "reuse-shared")),
        url=_url(_raw(config, "url")),
        remote_gpu=str(_raw(config, "remote-gpu") or "") or None,
    )


def _run_command(simulate: bool) -> str | None:
    """How `sglang-perf run` requires real SGLang of this run (config/run_options.py RUN_COMMAND_ENV): with --real,
    always; on a host with GPUs, unless the run simulates after all. None: not started by it, or not required."""
    from pytest_sglang_perf.config.run_options import RUN_COMMAND_ENV, RUN_GPU_HOST, RUN_REAL

    value = os.environ.get(RUN_COMMAND_ENV)
    if value == RUN_REAL or (value == RUN_GPU_HOST and not simulate):
        return value
    return None


def _url(value: object) -> str | None:
    from pytest_sglang_perf.config.settings import server_url

    if value in (None, ""):
        return None
    try:
        return server_url(value)
    except ValueError as exc:
        raise pytest.UsageError(f"--sglang-url: {exc}") from None
