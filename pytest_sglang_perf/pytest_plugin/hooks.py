"""The pytest face's hooks: parametrization by variant, test ordering, the fixture's body and reports.

The entry point (pytest_sglang_perf/plugin.py) registers this module when the project may have a perf
configuration. Each hook calls into the session (session/facade.py), which knows nothing of pytest; when the
configuration turns out to have no [tool.sglang_perf] table, the session is None and every hook does nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import warnings
from collections.abc import Generator
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import pytest

from pytest_sglang_perf.config.settings import ConfigError, Variant, load_settings
from pytest_sglang_perf.errors import SGLangPerfError
from pytest_sglang_perf.pytest_plugin.options import resolve_options
from pytest_sglang_perf.server.logdirs import KEEP_RUNS, shown_path

if TYPE_CHECKING:
    from pytest_sglang_perf.pytest_plugin.handle import SGLangPerf
    from pytest_sglang_perf.report.workers import WorkerPart
    from pytest_sglang_perf.session.facade import PerfSession

VARIANT_FIXTURE = "sglang_variant"
SESSION = pytest.StashKey["PerfSession | None"]()
_PREVIOUS_SIGTERM = pytest.StashKey[object]()
_HELD = pytest.StashKey["list[str] | None"]()
"""What the session said during a test's phase, to be said when it is over (_lines_held)."""
_WORKER_PARTS = pytest.StashKey[dict[str, "WorkerPart"]]()
"""pytest-xdist's controller: each worker's part by worker id (a worker interrupted reports its end twice)."""


def configure(config: pytest.Config) -> None:
    """The entry point (pytest_sglang_perf/plugin.py) calls this once it has registered this module: the project
    may have a perf configuration. Named apart from pytest's hook, which this module, registered late, would get
    called again."""
    options = resolve_options(config)
    try:
        settings = load_settings(config.rootpath, options.config_path)
        session = None
        if settings is not None:
            from pytest_sglang_perf.session.facade import PerfSession

            session = PerfSession(settings, replace(options, log_root=_log_root(config)),
                                  lambda message: _say(config, message))
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[SESSION] = session
    config.stash[_WORKER_PARTS] = {}
    if session is not None and _option(config, "dist") == "each":
        raise pytest.UsageError("sglang-perf: --dist each runs every test on every pytest-xdist worker: every variant "
                                "would boot on each worker and each cell be measured once per worker; use -n N alone "
                                "(the plugin keeps a variant's tests on one worker)")
    if session is not None:
        _install_sigterm_handler(config)


def _option(config: pytest.Config, name: str) -> object:
    """An option another plugin (pytest-xdist) may or may not have added."""
    return getattr(config.option, name, None)


def _log_root(config: pytest.Config) -> Path | None:
    """Where run folders of server logs go: pytest's cache dir (.pytest_cache/d/sglang-perf/logs); None (a temp
    folder, server/logdirs.py) when the cache provider is disabled or its folder cannot be made."""
    cache: pytest.Cache | None = getattr(config, "cache", None)
    if cache is None:
        return None
    try:
        return cache.mkdir("sglang-perf") / "logs"
    except OSError:
        return None


def _say(config: pytest.Config, message: str) -> None:
    held = config.stash.get(_HELD, None)
    if held is not None:
        held.append(message)
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"sglang-perf: {message}")


@contextlib.contextmanager
def _lines_held(config: pytest.Config) -> Generator[None, None, None]:
    """While a test's phase runs, pytest captures what reaches the terminal and shows it only when the test fails;
    what the session says meanwhile (the pre-measurement check, a re-measure's wait) is held and said when the
    phase is over. Not with -s, where nothing is captured."""
    if config.getoption("capture", "no") == "no":  # -p no:capture: nothing is captured
        yield
        return
    config.stash[_HELD] = []
    try:
        yield
    finally:
        held, config.stash[_HELD] = config.stash[_HELD], None
        for message in held or ():
            _say(config, message)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, object, object]:
    with _lines_held(item.config):
        return (yield)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, object, object]:
    with _lines_held(item.config):
        return (yield)


def _install_sigterm_handler(config: pytest.Config) -> None:
    """Turn SIGTERM into KeyboardInterrupt so pytest unwinds and every server is stopped."""
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    with contextlib.suppress(ValueError):  # not the main thread: leave signals alone
        config.stash[_PREVIOUS_SIGTERM] = signal.signal(signal.SIGTERM, on_sigterm)


def pytest_unconfigure(config: pytest.Config) -> None:
    session = config.stash.get(SESSION, None)
    if session is not None:
        session.stop_all()
    previous = config.stash.get(_PREVIOUS_SIGTERM, None)
    if previous is not None:
        signal.signal(signal.SIGTERM, previous)  # type: ignore[arg-type]


def pytest_report_header(config: pytest.Config) -> list[str]:
    session = config.stash[SESSION]
    if session is None:
        return []
    names = ", ".join(v.name for v in session.variants)
    mode = "SIMULATED (the plugin's simulator, not SGLang)" if session.options.simulate else "SGLang"
    lines = [*_wrapped(f"sglang-perf: {session.settings.source}; model {session.settings.model}; variants: {names}; "
                       f"{mode}"),
             *_wrapped(f"sglang-perf: baselines: {session.settings.baseline_dir}/ (a file per GPU model x GPUs a "
                       "server uses x model)")]
    if session.unavailable is None:
        kept = f" (the last {KEEP_RUNS} runs are kept)" if session.logs.managed else ""
        lines.append(f"sglang-perf: server logs: {shown_path(session.logs.path, Path.cwd())}/{kept}")
    lines += _played_release(session)
    if session.options.update_new_only:
        lines.append("sglang-perf: recording baselines of the cells that have none (--sglang-update-baselines=new)")
    elif session.options.update_baselines:
        lines.append("sglang-perf: recording new baselines (--sglang-update-baselines)")
    return lines


def _played_release(session: PerfSession) -> list[str]:
    """The release the simulator plays (`--sim-sglang-version`), and whose facts judge it when they are another's."""
    if not session.options.simulate:
        return []
    import os

    from pytest_sglang_perf.server.sim_knobs import simulated_version
    from pytest_sglang_perf.sglang_facts.rules import rules_note

    played = simulated_version(session.settings.simulate.args, {**os.environ, **session.settings.env})
    if played is None:
        return []
    note = rules_note(played)
    return _wrapped(f"sglang-perf: the simulator plays SGLang {played} (its command line from that release's flag "
                    f"table){'; ' + note if note else ''}")


def _wrapped(line: str) -> list[str]:
    """A header line wrapped at 120 characters; each continuation starts with `sglang-perf:` too."""
    from pytest_sglang_perf.wrapping import wrap_lines

    width = 120 - len("sglang-perf: ")
    return [f"sglang-perf: {text}" for text in wrap_lines([line.removeprefix("sglang-perf: ")], width=width)]


@pytest.hookimpl(trylast=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    session = metafunc.config.stash[SESSION]
    if "sglang_perf" not in metafunc.fixturenames or session is None:
        return
    metafunc.parametrize(VARIANT_FIXTURE, session.variants, ids=[v.name for v in session.variants], indirect=True,
                         scope="session")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Group tests by variant (matrix order, stable within a variant) so each server boots once."""
    session = config.stash[SESSION]
    if session is None:
        return
    order = {v.name: i for i, v in enumerate(session.variants)}
    items.sort(key=lambda item: order.get(_variant_of(item) or "", -1))
    perf_items = [(item, name) for item in items if (name := _variant_of(item)) is not None]
    if perf_items:  # the bridge (and what it imports) only where there are cells to hand over
        from pytest_sglang_perf.pytest_plugin.benchmark_bridge import mark_items

        mark_items(config, perf_items, session.options.benchmark)


def collected_nodeid(item: pytest.Item) -> str:
    """The item's node id as collected: before pytest 9.2, pytest-xdist's loadgroup appends `@<group>` to the ids of
    tests with an `xdist_group` mark on its workers."""
    parent = item.parent
    return item.nodeid if parent is None else f"{parent.nodeid}::{item.name}"


def _variant_of(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    variant = callspec.params.get(VARIANT_FIXTURE) if callspec is not None else None
    return variant.name if isinstance(variant, Variant) else None


def pytest_collection_finish(session: pytest.Session) -> None:
    """The tests that will run (after deselection), each with its variant: the session plans and checks them."""
    perf = session.config.stash[SESSION]
    if perf is None:
        return
    tests = [(collected_nodeid(item), name) for item in session.items if (name := _variant_of(item)) is not None]
    try:
        perf.collected(tests)
    except SGLangPerfError as exc:  # a bad configuration, or a gate run that cannot measure anything here
        raise pytest.UsageError(str(exc)) from None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    session, name = item.config.stash[SESSION], _variant_of(item)
    if session is None or name is None:
        return (yield)
    session.begin(name, skipped=item.get_closest_marker("skip") is not None)
    try:
        return (yield)
    finally:
        session.end(collected_nodeid(item), name)


def perf_handle(request: pytest.FixtureRequest, variant: Variant) -> Generator[SGLangPerf, None, None]:
    """The `sglang_perf` fixture's body (the fixture is the entry point's): this variant's handle."""
    from pytest_sglang_perf.pytest_plugin.handle import SGLangPerf
    from pytest_sglang_perf.session.facade import VariantUnavailable

    session = request.config.stash[SESSION]
    assert session is not None  # sglang_variant failed the test otherwise
    if session.skip_reason is not None:
        pytest.skip(session.skip_reason)
    try:
        run = session.ready(variant.name)
    except VariantUnavailable as exc:
        failure = str(exc)
    else:
        _warn_about_config(session, variant.name)
        node = request.node
        nodeid = collected_nodeid(node) if isinstance(node, pytest.Item) else node.nodeid
        handle = SGLangPerf(session, run, request, nodeid)
        yield handle
        handle.close()
        return
    pytest.fail(failure, pytrace=False)  # outside the except block: no "during handling" chain in the report


def _warn_about_config(session: PerfSession, name: str) -> None:
    """Every test of a variant whose server ran something else than asked carries the warning."""
    from pytest_sglang_perf import SGLangConfigWarning

    found = session.config_warning(name)
    if found is None:
        return
    message = SGLangConfigWarning(found.message)
    if found.path is None or found.line is None:
        warnings.warn(message, stacklevel=1)
    else:  # points at the variant's definition in the configuration file
        warnings.warn_explicit(message, SGLangConfigWarning, str(found.path), found.line)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """--sglang-strict-flags: a test of a variant whose server did not run what was asked fails unrun."""
    session, name = item.config.stash[SESSION], _variant_of(item)
    failure = None if session is None or name is None else session.strict_failure(name)
    if failure is not None:
        pytest.fail(failure, pytrace=False)
    with _lines_held(item.config):
        return (yield)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    session = terminalreporter.config.stash.get(SESSION, None)
    if session is None:
        return
    parts = list(terminalreporter.config.stash[_WORKER_PARTS].values())
    if session.runs or parts:  # a run that collected no perf test has no section (nor loads the report wing)
        from pytest_sglang_perf.report.sections import summary_sections
        from pytest_sglang_perf.report.workers import worker_sections

        record = session.record()
        for title, lines in worker_sections(record, parts) if parts else summary_sections(record):
            terminalreporter.section(title)
            for line in lines:
                terminalreporter.write_line(line)
    if session.written:
        for line in _wrapped(f"sglang-perf: wrote {'; '.join(session.written)}"):
            terminalreporter.write_line(line)
    nothing = _nothing_measured(session)
    if nothing is not None:
        terminalreporter.write_line(nothing, yellow=True, bold=True)
    for error in session.errors:
        terminalreporter.write_line(f"sglang-perf: ERROR: {error}", red=True, bold=True)


def _nothing_measured(session: PerfSession) -> str | None:
    """The closing line of a run whose perf tests all skipped. Not in a gate on real SGLang: its usage error said
    why and the fix already, and the line's way out (--sglang-simulate) is one the gate refuses."""
    return None if session.options.require_real else session.nothing_measured()


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """pytest-xdist's controller: a variant's tests go to one worker (xdist_scheduling.py), so each variant boots once;
    the other tests are scheduled as their `--dist` mode says."""
    session = config.stash.get(SESSION, None)
    from pytest_sglang_perf.pytest_plugin.xdist_scheduling import DISTRIBUTIONS, variant_scheduler

    dist = config.getvalue("dist")
    if session is None or dist not in DISTRIBUTIONS:
        return None
    return variant_scheduler(config, log, [v.name for v in session.variants], dist)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object) -> None:
    """pytest-xdist's controller: a worker ended; keep what its session handed over (report/workers.py)."""
    from pytest_sglang_perf.report.workers import OUTPUT_KEY, read_part

    config: pytest.Config | None = getattr(node, "config", None)
    output = getattr(node, "workeroutput", {})
    if config is None or not isinstance(output, dict):
        return
    part = read_part(str(getattr(node, "workerinput", {}).get("workerid", "?")), output.get(OUTPUT_KEY))
    if part is not None:
        config.stash[_WORKER_PARTS][part.worker] = part


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    perf = session.config.stash.get(SESSION, None)
    if perf is None:
        return
    workeroutput = getattr(session.config, "workeroutput", None)
    if isinstance(workeroutput, dict):  # a pytest-xdist worker: the controller reports and writes the files
        from pytest_sglang_perf.report.workers import OUTPUT_KEY, worker_output

        perf.finish(rounds=False)
        workeroutput[OUTPUT_KEY] = worker_output(perf.document_record(), _nothing_measured(perf), perf.errors)
        return
    # no minutes of A/B boots after Ctrl-C, a SIGTERM (a cancelled CI job), -x or --maxfail
    stopped = bool(session.shouldstop or session.shouldfail)
    perf.finish(rounds=exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) and not stopped)
    _write_outputs(session.config, perf)
    if perf.errors and exitstatus == pytest.ExitCode.OK:  # a failure outside any test (a baseline boot) is not green
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _write_outputs(config: pytest.Config, perf: PerfSession) -> None:
    """The files the run asked for besides the terminal (the report wing writes them from the session's records);
    an xdist controller's, from its workers' documents."""
    if config.pluginmanager.hasplugin("dsession"):  # pytest-xdist's controller: its workers measured
        from pytest_sglang_perf.report.workers import finish_controller

        outputs = finish_controller(perf.options, list(config.stash[_WORKER_PARTS].values()))
    else:
        from pytest_sglang_perf.outputs.writers import outputs_wanted

        if not outputs_wanted(perf.options, os.environ, measured=bool(perf.runs)):
            return  # nothing asked for: the report wing is not loaded
        from pytest_sglang_perf.report.sections import write_files

        outputs = write_files(perf.document_record, perf.options, measured=bool(perf.runs))
    perf.wrote(outputs.written, outputs.errors)
