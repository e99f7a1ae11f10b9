"""The plugin's command-line options and their ini twins, resolved once into RunOptions.

Precedence: command line > environment variable > ini / [tool.pytest.ini_options] > default.
"""

from __future__ import annotations

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
    ("update-baselines", "update", "record the measured values as the new baselines instead of gating on them; "
     "=new: record only the cells that have no baseline entry yet (the others are gated as usual)"),
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
    ("boots", "int", "with --sglang-update-baselines: record each variant's baselines over N server boots (its "
     "tests' requests are re-measured on N-1 fresh boots), so the gate knows the boot-to-boot spread (default 1)"),
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
    ("heartbeat", "seconds", "while a server boots, say which step it is in after this many seconds without a line "
     "(default 15; 0: never)"),  # server/progress.py HEARTBEAT_SECONDS (test_options.py holds them together)
)


_METAVARS = {"list": "NAMES", "int": "N", "seconds": "SECONDS", "url": "URL", "text": "NAME"}


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("sglang-perf", "SGLang performance regression tests")
    for name, kind, help_text in _OPTIONS:
        dest = "sglang_" + name.replace("-", "_")
        if kind == "bool":
            group.addoption(f"--sglang-{name}", action="store_true", default=None, dest=dest, help=help_text)
            parser.addini(dest, help_text, type="bool", default=False)
        elif kind == "update":
            group.addoption(f"--sglang-{name}", action="store", nargs="?", const=UPDATE_ALL, default=None, dest=dest,
                            type=_update_mode, metavar="new", help=help_text)
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


def _update_mode(raw: str) -> str:
    """--sglang-update-baselines[=new]: `all` (record every measured cell) or `new` (only cells without a baseline).

    argparse takes the word after the flag as its value, so a test path written right after it lands here."""
    import argparse

    value = raw.strip().lower()
    if value in (UPDATE_ALL, UPDATE_NEW):
        return value
    raise argparse.ArgumentTypeError(
        f"{raw!r} is not a mode: write --sglang-update-baselines (record every measured cell) or "
        "--sglang-update-baselines=new (only cells without a baseline); put test paths before the flag")


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


def _seconds(value: object) -> float:
    from pytest_sglang_perf.server.progress import HEARTBEAT_SECONDS

    if value in (None, ""):
        return HEARTBEAT_SECONDS
    try:
        seconds = float(str(value))
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        raise pytest.UsageError(f"--sglang-heartbeat: expected seconds >= 0 (0 turns it off), got {value!r}")
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

    return RunOptions(
        config_path=_path(config, _raw(config, "config")),
        simulate=bool(_raw(config, "simulate")),
        update_baselines=(update := _update(_raw(config, "update-baselines"))) is not None,
        update_new_only=update == UPDATE_NEW,
        results_path=_path(config, _raw(config, "results")),
        markdown_path=_path(config, _raw(config, "markdown")),
        plots_dir=_path(config, _raw(config, "plots")),
        benchmark=bool(_raw(config, "benchmark")),
        variants=_names(_raw(config, "variants")),
        log_dir=_path(config, _raw(config, "log-dir")),
        strict_flags=bool(_raw(config, "strict-flags")),
        require_real=bool(_raw(config, "require-real")),
        require_baselines=bool(_raw(config, "require-baselines")),
        fail_inconclusive=bool(_raw(config, "fail-inconclusive")),
        boots=_count(_raw(config, "boots")),
        verbosity=config.get_verbosity(),
        heartbeat=_seconds(_raw(config, "heartbeat")),
        probe=not _raw(config, "no-probe"),
        gpu_lock_dir=_path(config, _raw(config, "gpu-lock-dir")),
        ignore_conditions=bool(_raw(config, "ignore-conditions")),
        url=_url(_raw(config, "url")),
        remote_gpu=str(_raw(config, "remote-gpu") or "") or None,
    )


def _url(value: object) -> str | None:
    from pytest_sglang_perf.config.settings import server_url

    if value in (None, ""):
        return None
    try:
        return server_url(value)
    except ValueError as exc:
        raise pytest.UsageError(f"--sglang-url: {exc}") from None
