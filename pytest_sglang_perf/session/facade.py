"""The session's facade: it sequences a run, and its rooms (session/*.py) decide.

Plain Python (no pytest). The pytest face (pytest_plugin/hooks.py) creates one PerfSession per pytest session and
keeps it in `config.stash`; its hooks and fixtures only call into it: `collected()` once the tests are known,
`begin()` and `end()` around each test, `ready()` for the fixture, `measure()` and `check()` for the handle, and
`finish()` at the end, then `record()` / `document_record()` for the report wing. The rooms: plans and pre-flight
(plans.py), boots, inspection, placing and stops (boots.py, identity.py), GPU claims (gpus.py), conditions
(conditions.py), baselines (baselines.py), checked cells (cells.py), bandwidth ceilings (roofline.py), live lines
(live.py); one VariantRun record per variant (variant_run.py) is what they share.

Each room is made, and its module imported, when first needed: a run that collects no perf test imports none of
them (tests/unit/pytest_plugin/test_import_cost.py).
"""

from __future__ import annotations

import contextlib
import importlib.util
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_sglang_perf.config.run_options import RunOptions
from pytest_sglang_perf.config.selection import remote_variants
from pytest_sglang_perf.config.settings import ConfigError, Settings, variant_line
from pytest_sglang_perf.errors import SGLangPerfError
from pytest_sglang_perf.server.logdirs import RunLogs
from pytest_sglang_perf.session import INSTALL

if TYPE_CHECKING:
    from pytest_sglang_perf.gate.environment import Environment
    from pytest_sglang_perf.gate.results_file import CellRecord
    from pytest_sglang_perf.gate.statistics import BootSpread
    from pytest_sglang_perf.measurement.request import RequestParams
    from pytest_sglang_perf.measurement.result import BootFacts, Result
    from pytest_sglang_perf.session.baselines import SessionBaselines
    from pytest_sglang_perf.session.boots import SessionBoots
    from pytest_sglang_perf.session.cells import SessionCells
    from pytest_sglang_perf.session.conditions import SessionConditions
    from pytest_sglang_perf.session.gpus import SessionGpus
    from pytest_sglang_perf.session.kept import SessionKept
    from pytest_sglang_perf.session.live import Live
    from pytest_sglang_perf.session.plans import SessionPlans
    from pytest_sglang_perf.session.roofline import SessionRoofline
    from pytest_sglang_perf.session.run_record import DocumentRecord, RunRecord
    from pytest_sglang_perf.session.variant_run import VariantRun



class VariantUnavailable(SGLangPerfError):
    """A variant's tests cannot run: it failed the pre-flight check or its server failed to boot."""


@dataclass(frozen=True)
class ConfigWarning:
    """The warning every test of a variant carries when its server did not run what was asked."""

    message: str
    path: Path | None
    """The configuration file, to point the warning at the variant's definition."""
    line: int | None


class PerfSession:
    def __init__(self, settings: Settings, options: RunOptions, say: Callable[[str], None]) -> None:
        if options.require_real and options.simulate:
            raise ConfigError("--sglang-require-real and --sglang-simulate contradict each other: a gate on real "
                              "SGLang cannot measure the simulator; drop one of them")
        from pytest_sglang_perf.outputs.writers import missing_requirement

        missing = missing_requirement(options)
        if missing is not None:
            raise ConfigError(missing)
        self.settings = settings
        self.options = options
        self.variants = remote_variants(settings.select(options.variants), options)
        """The variants this run uses, in matrix order (--sglang-variants selects; --sglang-url points one at a
        running server)."""
        self.written: list[str] = []
        """What the end of the session wrote besides the terminal (results file, Markdown, plots), in words."""
        self.errors: list[str] = []
        """Session-level failures outside any test (a baseline boot that failed): the run exits non-zero."""
        self.logs = RunLogs(options.log_dir or settings.log_dir, options.log_root)
        """The servers' log folder (server/logdirs.py): created when the first server boots."""
        self.runs: dict[str, VariantRun] = {}
        """The variants the session's tests use, in run order (session/plans.py fills it)."""
        self.records: list[CellRecord] = []
        """Every checked cell in order, with what it was judged on (session/cells.py appends to it)."""
        self.more_boots: Mapping[tuple[str, str], tuple[Result, ...]] = {}
        """Each cell's re-measures on further boots, by (test id, variant): the A/B between boots
        (session/ab_rounds.py, `--sglang-boots N` in a gate run)."""
        self._exact_prompts: dict[tuple[str, int, str | None], str] = {}
        """Prompts of exact length built so far, by (variant, tokens, opening): measure(prompt_tokens=N)."""
        self._say = say

    @cached_property
    def unavailable(self) -> str | None:
        """Why no variant can run here (SGLang is not installed), or None."""
        if (self.options.simulate or self.settings.server_command is not None
                or all(v.url for v in self.variants)):
            return None
        if importlib.util.find_spec("sglang") is None:
            return "SGLang is not installed"
        return None

    @property
    def skip_reason(self) -> str | None:
        """Why every perf test skips here (see unavailable), with the two ways out."""
        if self.unavailable is None:
            return None
        return f"{self.unavailable} ({INSTALL}); run with --sglang-simulate to use the simulator instead"

    # The rooms: each decides one concern; the facade only sequences them ----------------------------------------

    @cached_property
    def live(self) -> Live:  # what the session says while it runs, at pytest's verbosity
        from pytest_sglang_perf.session.live import Live

        options = self.options
        return Live(self._say, verbosity=options.verbosity, heartbeat=options.heartbeat, simulated=options.simulate)

    @cached_property
    def plans(self) -> SessionPlans:  # a run per variant the tests use, planned and checked before any boot
        from pytest_sglang_perf.session.plans import SessionPlans

        return SessionPlans(self.settings, self.options, self.variants, self.live, self.runs,
                            unavailable=self.unavailable)

    @cached_property
    def roofline(self) -> SessionRoofline:
        """The GPU probe's report, the variants' model bytes and each decode cell's bandwidth ceiling."""
        from pytest_sglang_perf.session.roofline import SessionRoofline

        cache = None if self.kept is None else self.kept.registry.folder / f"probe-{socket.gethostname()}.json"
        return SessionRoofline(self.settings, self.plans.targets, simulate=self.options.simulate,
                               probe=self.options.probe, say=self.live.note, cache=cache)

    @cached_property
    def conditions(self) -> SessionConditions:  # what a measurement's conditions do to its verdict and recording
        from pytest_sglang_perf.session.conditions import SessionConditions

        return SessionConditions(self.settings.conditions, ignore=self.options.ignore_conditions, live=self.live,
                                 simulate=self.options.simulate)

    @cached_property
    def gpus(self) -> SessionGpus:  # the GPUs each server gets (a claim of its own on a multi-GPU host)
        from pytest_sglang_perf.session.gpus import SessionGpus

        return SessionGpus(self.options, self.settings.startup_timeout, lambda: self.plans.parser, self.live)

    @cached_property
    def kept(self) -> SessionKept | None:  # --sglang-reuse: servers kept after the run, and attached to
        if not self.options.reuse:
            return None
        from pytest_sglang_perf.session.kept import SessionKept

        return SessionKept(self.settings, self.options, self.live, version=lambda: self.plans.parser.version,
                           pool=lambda: self.gpus.pool)

    @cached_property
    def boots(self) -> SessionBoots:  # booting, inspecting, placing and stopping each variant's server
        from pytest_sglang_perf.session.boots import SessionBoots

        return SessionBoots(self.settings, simulate=self.options.simulate, logs=self.logs, live=self.live,
                            gpus=self.gpus, roofline=self.roofline, parser=lambda: self.plans.parser,
                            targets=lambda: self.plans.targets, runs=self.runs, kept=self.kept)

    @cached_property
    def environment(self) -> Environment:
        from pytest_sglang_perf.gate.environment import build_environment

        return build_environment(model=self.settings.model, simulated=self.options.simulate)

    @cached_property
    def baselines(self) -> SessionBaselines:
        from pytest_sglang_perf.session.baselines import SessionBaselines
        from pytest_sglang_perf.sglang_facts.resolved import option_defaults

        return SessionBaselines(self.settings, self.options, self.environment.facts,
                                lambda: option_defaults(self.plans.parser))

    @cached_property
    def cells(self) -> SessionCells:  # each checked result placed, judged or recorded, confirmed and kept
        from pytest_sglang_perf.session.cells import SessionCells
        from pytest_sglang_perf.session.confirmation import Confirmation

        confirmation = Confirmation(self.settings.gate.confirm, self._confirmation_boot)
        return SessionCells(self.options, self.runs, self.baselines, self.conditions, self.measure, self.records,
                            confirmation)

    # Collection, and around each test ---------------------------------------------------------------------------

    def collected(self, tests: Sequence[tuple[str, str]]) -> None:
        """The tests (node id, variant name) in run order: plan each variant they use, then check its flags."""
        if tests:
            self.plans.collect(tests)

    def begin(self, name: str, *, skipped: bool) -> None:
        """Before a test's setup: boot its variant's server, so that boot progress reaches the terminal live."""
        run = self.runs.get(name)
        if run is None or skipped or run.preflight_errors or self.unavailable is not None:
            return
        from pytest_sglang_perf.server.launcher import BootError

        with contextlib.suppress(BootError):  # remembered in the run: the fixture fails the variant's tests
            self.boots.boot(run)

    def end(self, nodeid: str, name: str) -> None:
        """After a test: stop its variant's server when this was the variant's last test (having re-measured its
        recorded cells on more boots first, with --sglang-update-baselines --sglang-boots N)."""
        run = self.runs.get(name)
        if run is None or run.last_test != nodeid:
            return
        if self.options.update_baselines and self.options.boots > 1:
            error = self.cells.record_boots(run, self.options.boots, lambda: self._reboot(run), self._say)
            self.errors.extend([error] if error is not None else [])
        self.boots.done(run)

    def _reboot(self, run: VariantRun) -> None:
        """Stop the variant's server and boot it again on the same GPUs (the claim is kept)."""
        self.boots.stop(run, keep_claim=True)
        self.boots.boot(run, fresh=True)

    def _confirmation_boot(self, run: VariantRun) -> None:
        """A fresh boot to confirm a regression on (session/confirmation.py); VariantUnavailable with the boot's
        report when it fails (the variant's later tests fail with it too)."""
        from pytest_sglang_perf.server.launcher import BootError

        self._say(f"[{run.name}] a regression: booting the server again to re-measure it on a fresh boot "
                  "([gate] confirm)")
        try:
            self._reboot(run)
        except BootError as exc:
            raise VariantUnavailable("the fresh boot to confirm a regression on failed:\n"
                                     + self.boots.report(exc)) from None

    def ready(self, name: str) -> VariantRun:
        """The variant's run with its server up; raises VariantUnavailable with the report when it cannot be."""
        from pytest_sglang_perf.server.launcher import BootError
        from pytest_sglang_perf.wrapping import wrap_lines

        run = self.plans.run(name)
        if run.preflight_errors:
            errors = wrap_lines([f"  {error}" for error in run.preflight_errors])
            raise VariantUnavailable(f"sglang-perf: variant {name!r} failed the pre-flight check; no server was "
                                     "started:\n" + "\n".join(errors))
        try:
            self.boots.boot(run)
        except BootError as exc:
            raise VariantUnavailable(self.boots.report(exc)) from None
        return run

    def strict_failure(self, name: str) -> str | None:
        """With --sglang-strict-flags: why the variant's tests fail unrun (its server did not run what was asked)."""
        run = self.runs.get(name)
        if not self.options.strict_flags or run is None or run.config is None or not run.config.problems:
            return None
        from pytest_sglang_perf.server.describe import strict_failure

        return strict_failure(name, run.config)

    def config_warning(self, name: str) -> ConfigWarning | None:
        """The warning for a variant whose server ran something else than asked (strict mode fails instead)."""
        config = self.runs[name].config
        if config is None or not config.warnings or (self.options.strict_flags and config.problems):
            return None
        from pytest_sglang_perf.server.describe import warning_text

        path = self.settings.path
        line = variant_line(path, name) if path is not None else None
        return ConfigWarning(warning_text(name, config), path, line)

    # Measuring and checking results ---------------------------------------------------------------------------

    def measure(self, name: str, params: RequestParams, decided: Callable[[Result], bool] | None = None) -> Result:
        """Measure `params` on the variant's running server, watching the host and its GPUs meanwhile; raises
        client.RequestFailed."""
        from pytest_sglang_perf.measurement.measure import measure
        from pytest_sglang_perf.session.server_view import before, with_server_view

        run = self.runs[name]
        assert run.server is not None, "measure() needs the variant's running server"
        reused = None if run.kept is None or not run.kept.reused else run.kept.describe()
        start = before(run)
        with self.conditions.watch(run) as watched:
            result = measure(run.server.base_url, model=self.settings.model, variant=name, params=params,
                             boot_seconds=None if run.plan.url or reused else run.server.boot_seconds,
                             simulated=self.options.simulate, api_key=run.server.plan.api_key,
                             timeout=self.settings.request.timeout,
                             startup=None if reused else _boot_facts(run), decided=decided,
                             flush_key=run.plan.admin_api_key)
        result = replace(result, host=watched.host, gpu=watched.gpu, boot=run.boots, reused=reused)
        return self.roofline.annotate(run, with_server_view(run, start, result))

    def exact_prompt(self, name: str, tokens: int, head: str | None) -> str:
        """The prompt of exactly `tokens` tokens by the variant's server (measurement/exact_prompt.py), built once
        per variant, length and opening; raises client.RequestFailed."""
        from pytest_sglang_perf.measurement.exact_prompt import build_exact_prompt, tokenize_counter
        from pytest_sglang_perf.prompts import LONG_PROMPT_HEAD

        key = (name, tokens, head)
        if key not in self._exact_prompts:
            run = self.runs[name]
            assert run.server is not None, "exact_prompt() needs the variant's running server"
            count = tokenize_counter(run.server.base_url, self.settings.model, run.server.plan.api_key)
            built = build_exact_prompt(tokens, count, head=LONG_PROMPT_HEAD if head is None else head)
            self._exact_prompts[key] = built.text
        return self._exact_prompts[key]

    def decider(self, test_id: str, name: str, params: RequestParams) -> Callable[[Result], bool]:
        """For the adaptive plan: whether the samples so far decide the cell's verdict."""
        return self.cells.decider(test_id, name, params)

    def check(self, test_id: str, result: Result) -> CellRecord:
        """Judge a result against its baseline (session/cells.py); the cell's record."""
        return self.cells.check(test_id, result)

    def nothing_measured(self) -> str | None:
        """The closing line of a run whose perf tests all skipped (they cannot run here): never a silent green."""
        total = sum(len(run.tests) for run in self.runs.values())
        if self.unavailable is None or total == 0:
            return None
        return f"sglang-perf: {len(self.records)} of {total} cells measured: {self.skip_reason}"

    # The end --------------------------------------------------------------------------------------------------

    def stop_all(self) -> None:
        for run in self.runs.values():
            self.boots.done(run)

    def finish(self, *, rounds: bool = True) -> None:
        """Stop every server; the report wing writes what was asked for from the records (report/sections.py).
        With `--sglang-boots N` in a gate run, first the A/B between boots (session/ab_rounds.py): every variant
        booted N-1 more times, in turns, its cells re-measured (`rounds=False`: not in this process, an xdist
        worker's, whose A/B the controller makes from every worker's first boots)."""
        try:
            if rounds and self.options.boots > 1 and not self.options.update_baselines:
                self.more_boots = self._ab_rounds()
        finally:
            self.stop_all()

    def _ab_rounds(self) -> dict[tuple[str, str], tuple[Result, ...]]:
        from pytest_sglang_perf.session.ab_rounds import AbRounds

        rounds = AbRounds(self.options.boots, self._reboot, self.boots.stop,
                          lambda name, params: self.measure(name, params), self.live.note)
        return rounds.run(list(self.runs.values()), self.records)

    def wrote(self, written: Sequence[str], errors: Sequence[str]) -> None:
        """What the end of the run wrote besides the terminal, and what failed to be written."""
        self.written = list(written)
        self.errors.extend(errors)

    # What the report wing gets ----------------------------------------------------------------------------------

    def record(self) -> RunRecord:
        """The run's record for the summary (report/sections.py)."""
        from pytest_sglang_perf.session.run_record import RunRecord

        return RunRecord(tuple(v.name for v in self.variants), tuple(self.runs.values()), tuple(self.records),
                         simulated=self.options.simulate, verbosity=self.options.verbosity,
                         results_path=self.options.results_path, confidence=self.settings.gate.confidence,
                         logs_path=self.logs.path, baseline_lines=tuple(self.baselines.ledger.lines(self._collected())),
                         probe=self.roofline.probe, tolerances=self.settings.tolerances, more_boots=self.more_boots,
                         spreads=self._spreads())

    def _spreads(self) -> dict[tuple[str, str], dict[str, BootSpread]]:
        """The recorded boot spreads the A/B section uses: only where it compares variants."""
        if len({record.cell.variant for record in self.records}) < 2:
            return {}
        return self.baselines.recorded_spreads(self.records)

    def document_record(self) -> DocumentRecord:
        """The run's record for the results document: the summary's, with what each cell offers the baselines."""
        from pytest_sglang_perf.session.run_record import DocumentRecord

        return DocumentRecord(self.record(), tuple(self.baselines.offered(self.records, self.conditions.why)),
                              self.environment.facts, self.baselines.commit,
                              self.baselines.ledger.to_dict(self._collected()))

    def _collected(self) -> set[tuple[str, str]]:
        """(test id, variant) of every collected perf test."""
        from pytest_sglang_perf.gate.cell_ids import strip_variant

        return {(strip_variant(nodeid, run.name), run.name) for run in self.runs.values() for nodeid in run.tests}


def _boot_facts(run: VariantRun) -> BootFacts | None:
    """The server's startup facts as a result carries them."""
    from pytest_sglang_perf.measurement.result import BootFacts

    facts = run.startup
    return None if facts is None else BootFacts(facts.graph_capture_seconds, facts.to_dict())
