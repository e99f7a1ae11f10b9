"""pytest adapter: options, parametrization by variant, test ordering, server lifetimes and reports.

Everything below this module is plain Python; this is the only place that knows pytest's hooks.
"""

from __future__ import annotations

import contextlib
import importlib.util
import signal
from collections.abc import Generator
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING

import pytest

from pytest_sglang_perf.config.settings import ConfigError, Settings, Variant, load_settings
from pytest_sglang_perf.options import RunOptions, add_options, resolve_options

if TYPE_CHECKING:
    from pytest_sglang_perf.handle import SGLangPerf
    from pytest_sglang_perf.session import PerfSession

VARIANT_FIXTURE = "sglang_variant"


@dataclass
class PluginState:
    options: RunOptions
    settings: Settings | None
    config: pytest.Config
    variant_of: dict[str, str] = field(default_factory=dict)
    last_test: dict[str, str] = field(default_factory=dict)
    preflight_errors: dict[str, list[str]] = field(default_factory=dict)
    _session: PerfSession | None = None
    _previous_sigterm: object = None

    @property
    def session(self) -> PerfSession:
        if self._session is None:
            from pytest_sglang_perf.session import PerfSession

            assert self.settings is not None
            log_dir = self.options.log_dir or self.settings.log_dir
            self._session = PerfSession(self.settings, self.options, log_dir, self.say)
        return self._session

    @property
    def variants(self) -> tuple[Variant, ...]:
        """The variants this run uses, in matrix order (--sglang-variants selects)."""
        assert self.settings is not None
        if self.options.variants is None:
            return self.settings.variants
        return tuple(self.settings.variant(name) for name in self.options.variants)

    @property
    def started(self) -> bool:
        return self._session is not None

    def say(self, message: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"sglang-perf: {message}")

    def skip_reason(self) -> str | None:
        if self.options.simulate or self.settings is None or self.settings.server_command is not None:
            return None
        if importlib.util.find_spec("sglang") is None:
            return ("SGLang is not installed (pip install 'pytest-sglang-perf[sglang]'); "
                    "run with --sglang-simulate to use the simulator instead")
        return None


STATE = pytest.StashKey[PluginState]()


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    options = resolve_options(config)
    try:
        settings = load_settings(config.rootpath, options.config_path)
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    if settings is not None and options.variants is not None:
        _check_selected(settings, options.variants)
    state = PluginState(options, settings, config)
    config.stash[STATE] = state
    if settings is not None:
        _install_sigterm_handler(state)


def _check_selected(settings: Settings, names: tuple[str, ...]) -> None:
    known = [v.name for v in settings.variants]
    for name in names:
        if name not in known:
            raise pytest.UsageError(
                f"--sglang-variants: unknown variant {name!r}; variants in {settings.source}: {', '.join(known)}"
            )


def _install_sigterm_handler(state: PluginState) -> None:
    """Turn SIGTERM into KeyboardInterrupt so pytest unwinds and every server is stopped."""
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    with contextlib.suppress(ValueError):  # not the main thread: leave signals alone
        state._previous_sigterm = signal.signal(signal.SIGTERM, on_sigterm)


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    if state is None:
        return
    if state.started:
        state.session.pool.stop_all()
    if state._previous_sigterm is not None:
        signal.signal(signal.SIGTERM, state._previous_sigterm)  # type: ignore[arg-type]


def pytest_report_header(config: pytest.Config) -> list[str]:
    state = config.stash[STATE]
    if state.settings is None:
        return []
    names = ", ".join(v.name for v in state.variants)
    mode = "SIMULATED (the plugin's simulator, not SGLang)" if state.options.simulate else "SGLang"
    lines = [f"sglang-perf: {state.settings.source}; model {state.settings.model}; variants: {names}; {mode}",
             f"sglang-perf: baselines: {state.session.store.path}"]
    if state.options.update_baselines:
        lines.append("sglang-perf: recording new baselines (--sglang-update-baselines)")
    return lines


@pytest.hookimpl(trylast=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "sglang_perf" not in metafunc.fixturenames:
        return
    state = metafunc.config.stash[STATE]
    if state.settings is None:
        return
    variants = state.variants
    metafunc.parametrize(VARIANT_FIXTURE, variants, ids=[v.name for v in variants], indirect=True,
                         scope="session")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Group tests by variant (matrix order, stable within a variant) so each server boots once."""
    state = config.stash[STATE]
    if state.settings is None:
        return
    order = {v.name: i for i, v in enumerate(state.variants)}
    for item in items:
        name = _item_variant(item)
        if name is not None:
            state.variant_of[item.nodeid] = name
    items.sort(key=lambda item: order.get(state.variant_of.get(item.nodeid, ""), -1))


def _item_variant(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    variant = callspec.params.get(VARIANT_FIXTURE) if callspec is not None else None
    return variant.name if isinstance(variant, Variant) else None


def pytest_collection_finish(session: pytest.Session) -> None:
    """Remember each variant's last test (after deselection), then check the used variants' flags."""
    state = session.config.stash[STATE]
    for item in session.items:
        name = state.variant_of.get(item.nodeid)
        if name is not None:
            state.last_test[name] = item.nodeid
    if state.last_test and state.skip_reason() is None:
        _preflight(state, [v for v in state.variants if v.name in state.last_test])


def _preflight(state: PluginState, variants: list[Variant]) -> None:
    """Unknown, ambiguous, repeated or incompatible flags: reported before any server starts."""
    from pytest_sglang_perf.server.preflight import Level

    try:
        findings = state.session.preflight(variants)
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None
    for finding in findings:
        state.say(f"pre-flight {finding}")
        if finding.level is Level.ERROR:
            state.preflight_errors.setdefault(finding.variant, []).append(finding.message)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    state = item.config.stash[STATE]
    name = state.variant_of.get(item.nodeid)
    if _should_boot(state, item, name):
        _boot_outside_capture(state, name)  # type: ignore[arg-type]
    try:
        return (yield)
    finally:
        if name is not None and state.started and state.last_test.get(name) == item.nodeid:
            state.session.pool.stop(name)


def _should_boot(state: PluginState, item: pytest.Item, name: str | None) -> bool:
    return (name is not None and name not in state.preflight_errors and state.skip_reason() is None
            and item.get_closest_marker("skip") is None)


def _boot_outside_capture(state: PluginState, name: str) -> None:
    """Boot here, before the test's setup, so that boot progress reaches the terminal live."""
    from pytest_sglang_perf.server.launcher import BootError

    with contextlib.suppress(BootError):  # remembered by the pool; the fixture errors the variant's tests
        state.session.server(state.settings.variant(name))  # type: ignore[union-attr]


@pytest.fixture(scope="session")
def sglang_variant(request: pytest.FixtureRequest) -> Variant:
    """The flag-matrix variant of the current test (tests using `sglang_perf` run once per variant)."""
    variant = getattr(request, "param", None)
    if not isinstance(variant, Variant):
        pytest.fail("sglang-perf: no configuration found: add a [tool.sglang_perf] table to pyproject.toml, "
                    "a sglang-perf.toml in the rootdir, or pass --sglang-config PATH", pytrace=False)
    return variant


@pytest.fixture
def sglang_perf(request: pytest.FixtureRequest, sglang_variant: Variant) -> SGLangPerf:
    """This variant's running server, with `measure()`, `check()` and an `openai` client."""
    from pytest_sglang_perf.handle import SGLangPerf
    from pytest_sglang_perf.server.launcher import BootError

    state = request.config.stash[STATE]
    reason = state.skip_reason()
    if reason is not None:
        pytest.skip(reason)
    errors = state.preflight_errors.get(sglang_variant.name)
    if errors:
        pytest.fail(f"sglang-perf: variant {sglang_variant.name!r} failed the pre-flight check; no server was "
                    "started:\n  " + "\n  ".join(errors), pytrace=False)
    try:
        server = state.session.server(sglang_variant)
    except BootError as exc:
        failure = state.session.boot_report(exc)
    else:
        _warn_about_config(state, sglang_variant.name)
        return SGLangPerf(state.session, sglang_variant, server, request.node.nodeid)
    pytest.fail(failure, pytrace=False)  # outside the except block: no "during handling" chain in the report


def _warn_about_config(state: PluginState, name: str) -> None:
    """Every test of a variant whose server ran something else than asked carries the warning."""
    import warnings

    from pytest_sglang_perf import SGLangConfigWarning
    from pytest_sglang_perf.config.settings import variant_line
    from pytest_sglang_perf.server.describe import warning_text

    config = state.session.configs.get(name)
    if config is None or not config.warnings or (state.options.strict_flags and config.problems):
        return
    message = SGLangConfigWarning(warning_text(name, config))
    path = state.settings.path if state.settings is not None else None
    line = variant_line(path, name) if path is not None else None
    if path is None or line is None:
        warnings.warn(message, stacklevel=1)
    else:  # points at the variant's definition in the configuration file
        warnings.warn_explicit(message, SGLangConfigWarning, str(path), line)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """--sglang-strict-flags: a test of a variant whose server did not run what was asked fails unrun."""
    state = item.config.stash[STATE]
    name = state.variant_of.get(item.nodeid)
    if state.options.strict_flags and name is not None and state.started:
        config = state.session.configs.get(name)
        if config is not None and config.problems:
            from pytest_sglang_perf.server.describe import strict_failure

            pytest.fail(strict_failure(name, config), pytrace=False)
    return (yield)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    state = terminalreporter.config.stash.get(STATE, None)
    if state is None or not state.started:
        return
    _server_summary(terminalreporter, state)
    if not state.session.cells:
        return
    from pytest_sglang_perf.gate.terminal import summary_lines

    terminalreporter.section("sglang-perf")
    for line in summary_lines(state.session.cells):
        terminalreporter.write_line(line)


def _server_summary(terminalreporter: pytest.TerminalReporter, state: PluginState) -> None:
    from pytest_sglang_perf.server.describe import server_summary_lines

    perf = state.session
    uses = {name: use for name in perf.configs if (use := perf.graph_use(name)) is not None}
    lines = server_summary_lines(perf.configs, perf.startup, perf.boot_seconds, state.options.simulate, uses)
    if lines:
        terminalreporter.section("sglang-perf servers")
        for line in lines:
            terminalreporter.write_line(line)


def pytest_sessionfinish(session: pytest.Session) -> None:
    state = session.config.stash.get(STATE, None)
    if state is None or not state.started:
        return
    state.session.pool.stop_all()
    if state.options.results_path is not None:
        from pytest_sglang_perf.gate.results_file import write_results

        perf = state.session
        write_results(state.options.results_path, perf.cells, perf.results, perf.environment.facts,
                      perf.server_records())
