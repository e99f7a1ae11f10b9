"""The session: one VariantRun per variant, the baseline store and the cells checked so far.

Plain Python (no pytest). plugin.py creates one PerfSession per pytest session and keeps it in `config.stash`; its
hooks and fixtures only call into it: `collected()` once the tests are known, `begin()` and `end()` around each
test, `ready()` for the fixture, `check()` for a measured result and `finish()` at the end. A variant's server
boots in one place (`_boot`), before the variant's first test, and stops after its last one.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path

from pytest_sglang_perf.config.run_options import RunOptions
from pytest_sglang_perf.config.settings import ConfigError, Settings, variant_line
from pytest_sglang_perf.errors import SGLangPerfError
from pytest_sglang_perf.gate.compare import Cell, Verdict
from pytest_sglang_perf.gate.environment import Environment, build_environment, detect_gpus
from pytest_sglang_perf.gate.identity import CellIdentity
from pytest_sglang_perf.gate.judge import CellPlace
from pytest_sglang_perf.gate.recording import RecordedRun
from pytest_sglang_perf.gate.results_file import CellRecord
from pytest_sglang_perf.gate.store import check_baseline_dir
from pytest_sglang_perf.measurement.result import BootFacts, RequestParams, Result
from pytest_sglang_perf.server.describe import strict_failure, warning_text
from pytest_sglang_perf.server.launcher import BootError
from pytest_sglang_perf.server.logdirs import RunLogs
from pytest_sglang_perf.server.plan import plan_server
from pytest_sglang_perf.server.preflight import Level, check_plans
from pytest_sglang_perf.server.redaction import redact_argv
from pytest_sglang_perf.server.remote import remote_variants
from pytest_sglang_perf.server.target_gpus import TargetGpus, target_gpus
from pytest_sglang_perf.session.baselines import SessionBaselines
from pytest_sglang_perf.session.boots import SessionBoots
from pytest_sglang_perf.session.conditions import SessionConditions
from pytest_sglang_perf.session.gpus import SessionGpus
from pytest_sglang_perf.session.live import Live
from pytest_sglang_perf.session.roofline import SessionRoofline
from pytest_sglang_perf.session.run_record import DocumentRecord, RunRecord
from pytest_sglang_perf.session.variant_run import VariantRun
from pytest_sglang_perf.sglang_facts.parsers import ArgParser, choose_parser
from pytest_sglang_perf.wrapping import wrap_lines

_INSTALL = "pip install 'pytest-sglang-perf[sglang]'"
REGRESSED = Verdict.REGRESSED


class VariantUnavailable(SGLangPerfError):
    """A variant's tests cannot run: it failed the pre-flight check or its server failed to boot."""


class NothingMeasured(SGLangPerfError):
    """A gate run (--sglang-require-real) whose perf tests cannot run here: the message says why and the fix."""


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
        self.runs: dict[str, VariantRun] = {}
        """The variants the session's tests use, in run order."""
        self.records: list[CellRecord] = []
        """Every checked cell in order, with its result, its re-measure and the entry recording it would write."""
        self.written: list[str] = []
        """What the end of the session wrote besides the terminal (results file, Markdown, plots), in words."""
        self.errors: list[str] = []
        """Session-level failures outside any test (a baseline boot that failed): the run exits non-zero."""
        self.logs = RunLogs(options.log_dir or settings.log_dir, options.log_root)
        """The servers' log folder (server/logdirs.py): created when the first server boots."""
        self.live = Live(say, verbosity=options.verbosity, heartbeat=options.heartbeat, simulated=options.simulate)
        self._say = say

    @cached_property
    def roofline(self) -> SessionRoofline:
        """The GPU probe's report, the variants' model bytes and each decode cell's bandwidth ceiling."""
        return SessionRoofline(self.settings, self._gpus, simulate=self.options.simulate, probe=self.options.probe,
                               say=self.live.note)

    @cached_property
    def conditions(self) -> SessionConditions:  # what a measurement's conditions do to its verdict and recording
        return SessionConditions(self.settings.conditions, ignore=self.options.ignore_conditions, live=self.live,
                                 simulate=self.options.simulate)

    @cached_property
    def gpus(self) -> SessionGpus:  # the GPUs each server gets (a claim of its own on a multi-GPU host)
        return SessionGpus(self.options, self.settings.startup_timeout, lambda: self._parser, self.live)

    @cached_property
    def boots(self) -> SessionBoots:  # booting, inspecting, placing and stopping each variant's server
        return SessionBoots(self.settings, simulate=self.options.simulate, logs=self.logs, live=self.live,
                            gpus=self.gpus, roofline=self.roofline, parser=lambda: self._parser,
                            targets=lambda: self._gpus, runs=self.runs)

    @cached_property
    def environment(self) -> Environment:
        return build_environment(model=self.settings.model, simulated=self.options.simulate)

    @cached_property
    def baselines(self) -> SessionBaselines:
        from pytest_sglang_perf.sglang_facts.resolved import option_defaults

        return SessionBaselines(self.settings, self.options, self.environment.facts,
                                lambda: option_defaults(self._parser))

    @cached_property
    def unavailable(self) -> str | None:
        """Why no variant can run here (SGLang is not installed), or None."""
        if self.options.simulate or self.settings.server_command is not None or all(v.url for v in self.variants):
            return None
        if importlib.util.find_spec("sglang") is None:
            return "SGLang is not installed"
        return None

    @property
    def skip_reason(self) -> str | None:
        """Why every perf test skips here (see unavailable), with the two ways out."""
        if self.unavailable is None:
            return None
        return f"{self.unavailable} ({_INSTALL}); run with --sglang-simulate to use the simulator instead"

    # Collection -----------------------------------------------------------------------------------------------

    def collected(self, tests: Sequence[tuple[str, str]]) -> None:
        """The tests (node id, variant name) in run order: plan each variant they use, then check its flags."""
        for nodeid, name in tests:
            self._run(name).tests.append(nodeid)
        if self.runs and self.unavailable is not None and self.options.require_real:
            raise NothingMeasured(
                f"sglang-perf: --sglang-require-real: {len(tests)} perf test(s) cannot run: {self.unavailable}; "
                f"install it on this runner ({_INSTALL}), or drop --sglang-require-real to let them skip")
        if self.runs and self.unavailable is None:
            check_baseline_dir(self.settings.baseline_dir)  # a broken store stops the session before any boot
            self._preflight()

    def _run(self, name: str) -> VariantRun:
        run = self.runs.get(name)
        if run is None:
            variant = next((v for v in self.variants if v.name == name), None) or self.settings.variant(name)
            run = self.runs[name] = VariantRun(variant, plan_server(self.settings, variant,
                                                                    simulate=self.options.simulate))
        return run

    def _preflight(self) -> None:
        """Unknown, ambiguous, repeated or incompatible flags: reported before any server starts."""
        local = [run.plan for run in self.runs.values() if run.plan.url is None]
        remote = [run.plan for run in self.runs.values() if run.plan.url is not None]
        findings = [*check_plans(local, self._parser, gpus=self._gpus), *check_plans(remote, self._parser)]
        for finding in findings:
            self.live.finding(f"pre-flight {finding}")
            if finding.level is Level.ERROR:
                self.runs[finding.variant].preflight_errors.append(finding.message)

    @cached_property
    def _parser(self) -> ArgParser:
        return choose_parser(simulate=self.options.simulate)

    @cached_property
    def _gpus(self) -> TargetGpus:
        """The GPUs the variants will run on: nvidia-smi's, or the simulated one (server/target_gpus.py)."""
        return target_gpus(self.settings, simulate=self.options.simulate, host=lambda: detect_gpus().names)

    # Around each test -----------------------------------------------------------------------------------------

    def begin(self, name: str, *, skipped: bool) -> None:
        """Before a test's setup: boot its variant's server, so that boot progress reaches the terminal live."""
        run = self.runs.get(name)
        if run is None or skipped or run.preflight_errors or self.unavailable is not None:
            return
        with contextlib.suppress(BootError):  # remembered in the run: the fixture fails the variant's tests
            self._boot(run)

    def end(self, nodeid: str, name: str) -> None:
        """After a test: stop its variant's server when this was the variant's last test."""
        run = self.runs.get(name)
        if run is None or run.last_test != nodeid:
            return
        if self.options.update_baselines and self.options.boots > 1:
            self._record_boots(run)
        self._stop(run)

    def _record_boots(self, run: VariantRun) -> None:
        """--sglang-boots N: re-measure the variant's recorded cells on N-1 fresh boots, then write them; if a boot
        or a request fails, write none of them and fail the session."""
        pending = self.baselines.recorder.pending(run.name)
        total = self.options.boots
        if not pending or run.process is None:
            return
        for boot in range(2, total + 1):
            self._say(f"[{run.name}] recording baselines: boot {boot} of {total}")
            try:
                self._stop(run)
                self._boot(run)
                for cell in pending:
                    cell.results.append(self.measure(run.name, cell.first.again()))
                    self.conditions.check_recording(cell.test_id, cell.results[-1], lambda: None)
            except SGLangPerfError as exc:
                self.baselines.discard(run.name)
                self.errors.append(f"variant {run.name!r}: baselines NOT recorded: boot {boot} of {total} "
                                   f"failed: {exc}")
                return
        files = ", ".join(str(path) for path in self.baselines.files(run.name))
        self._say(f"[{run.name}] recorded {len(pending)} baseline(s) over {total} boots in {files}")

    def ready(self, name: str) -> VariantRun:
        """The variant's run with its server up; raises VariantUnavailable with the report when it cannot be."""
        run = self._run(name)
        if run.preflight_errors:
            errors = wrap_lines([f"  {error}" for error in run.preflight_errors])
            raise VariantUnavailable(f"sglang-perf: variant {name!r} failed the pre-flight check; no server was "
                                     "started:\n" + "\n".join(errors))
        try:
            self._boot(run)
        except BootError as exc:
            raise VariantUnavailable(self.boots.report(exc)) from None
        return run

    def _boot(self, run: VariantRun) -> None:
        self.boots.boot(run)

    def _stop(self, run: VariantRun) -> None:
        self.boots.stop(run)

    def strict_failure(self, name: str) -> str | None:
        """With --sglang-strict-flags: why the variant's tests fail unrun (its server did not run what was asked)."""
        run = self.runs.get(name)
        if not self.options.strict_flags or run is None or run.config is None or not run.config.problems:
            return None
        return strict_failure(name, run.config)

    def config_warning(self, name: str) -> ConfigWarning | None:
        """The warning for a variant whose server ran something else than asked (strict mode fails instead)."""
        config = self.runs[name].config
        if config is None or not config.warnings or (self.options.strict_flags and config.problems):
            return None
        path = self.settings.path
        line = variant_line(path, name) if path is not None else None
        return ConfigWarning(warning_text(name, config), path, line)

    # Measuring and checking results ---------------------------------------------------------------------------

    def measure(self, name: str, params: RequestParams, decided: Callable[[Result], bool] | None = None) -> Result:
        """Measure `params` on the variant's running server, watching the host and its GPUs meanwhile; raises
        client.RequestFailed."""
        from pytest_sglang_perf.measurement.measure import measure

        run = self.runs[name]
        assert run.server is not None, "measure() needs the variant's running server"
        with self.conditions.watch(run) as watched:
            result = measure(run.server.base_url, model=self.settings.model, variant=name, params=params,
                             boot_seconds=None if run.plan.url else run.server.boot_seconds,
                             simulated=self.options.simulate, api_key=run.server.plan.api_key,
                             timeout=self.settings.request.timeout, startup=_boot_facts(run), decided=decided,
                             flush_key=run.plan.admin_api_key)
        result = replace(result, host=watched.host, gpu=watched.gpu)
        return self.roofline.annotate(run, result)

    def place(self, name: str, params: RequestParams) -> CellPlace:
        """The cell's baseline file key and identity (request, server args as resolved, model, GPUs used)."""
        from pytest_sglang_perf.measurement.measure import prompt_text_hash

        place = self.runs[name].place
        assert place is not None, "a cell is placed once its variant's server is booted"
        return CellPlace(place.key, CellIdentity.of(prompt_text_hash(params.prompt), params.settings, place.identity))

    def decider(self, test_id: str, name: str, params: RequestParams) -> Callable[[Result], bool]:
        """For the adaptive plan: whether the samples so far decide the cell's verdict."""
        place = self.place(name, params)
        recording = self.baselines.records(self.baselines.judge.store(place.key).lookup(test_id, name))
        return self.baselines.judge.decided(test_id, place, recording=recording)

    def check(self, test_id: str, result: Result) -> CellRecord:
        """Judge a result against its comparable baseline: a regression is re-measured once on the same server and
        fails only if it holds. With --sglang-update-baselines, record it instead (=new: only a cell without an
        entry). Returns the cell's record (its verdict, what it was judged on), kept for the results file; raises
        client.RequestFailed when the re-measure's request fails."""
        place = self.place(result.variant, result.params)
        baselines = self.baselines
        cell = baselines.judge.judge(test_id, result, place)
        key = (test_id, result.variant)
        stored = baselines.stored(place, key)
        run = self._recorded_run(result.variant)
        record = baselines.records(stored)
        if record:
            self.conditions.check_recording(test_id, result, lambda: self.records.append(CellRecord(cell, result)))
            cell = replace(cell, updated=True)
            baselines.record(test_id, result, place, run, existed=stored is not None)
        elif self.options.update_baselines:
            baselines.ledger.kept(key)
        regressed = not record and cell.verdict is REGRESSED
        again = self.conditions.remeasure(result, lambda: self._remeasure(test_id, result),
                                          self.runs[result.variant]) if regressed else None
        cell = cell if again is None else self.conditions.judge(baselines.judge.confirm(cell, again, place), again)
        self.records.append(CellRecord(cell, result, again, place, run))
        return self.records[-1]

    def _remeasure(self, test_id: str, result: Result) -> Result:
        """The confirmation of a regression: the same request again, on the same server."""
        params = result.again()
        decided = None if params.max_repeats is None else self.decider(test_id, result.variant, params)
        return self.measure(result.variant, params, decided)

    @property
    def cells(self) -> list[Cell]:
        return [record.cell for record in self.records]


    def _recorded_run(self, name: str) -> RecordedRun:
        run = self.runs[name]
        return RecordedRun(tuple(redact_argv(run.plan.args)), None if run.config is None else dict(run.config.ran))

    def nothing_measured(self) -> str | None:
        """The closing line of a run whose perf tests all skipped (they cannot run here): never a silent green."""
        total = sum(len(run.tests) for run in self.runs.values())
        if self.unavailable is None or total == 0:
            return None
        return f"sglang-perf: {len(self.cells)} of {total} cells measured: {self.skip_reason}"

    # The end --------------------------------------------------------------------------------------------------

    def stop_all(self) -> None:
        for run in self.runs.values():
            self._stop(run)

    def finish(self) -> None:
        """Stop every server; the report wing writes what was asked for from the records (report/sections.py)."""
        self.stop_all()

    def wrote(self, written: Sequence[str], errors: Sequence[str]) -> None:
        """What the end of the run wrote besides the terminal, and what failed to be written."""
        self.written = list(written)
        self.errors.extend(errors)

    # What the report wing gets ----------------------------------------------------------------------------------

    def record(self) -> RunRecord:
        """The run's record for the summary (report/sections.py)."""
        return RunRecord(tuple(v.name for v in self.variants), tuple(self.runs.values()), tuple(self.records),
                         simulated=self.options.simulate, verbosity=self.options.verbosity,
                         results_path=self.options.results_path, confidence=self.settings.gate.confidence,
                         logs_path=self.logs.path, baseline_lines=tuple(self.baselines.ledger.lines(self._collected())),
                         probe=self.roofline.probe)

    def document_record(self) -> DocumentRecord:
        """The run's record for the results document: the summary's, with what each cell offers the baselines."""
        return DocumentRecord(self.record(), tuple(self.baselines.offered(self.records, self.conditions.why)),
                              self.environment.facts, self.baselines.commit,
                              self.baselines.ledger.to_dict(self._collected()))

    def _collected(self) -> set[tuple[str, str]]:
        """(test id, variant) of every collected perf test."""
        from pytest_sglang_perf.gate.cell_ids import strip_variant

        return {(strip_variant(nodeid, run.name), run.name) for run in self.runs.values() for nodeid in run.tests}

def _boot_facts(run: VariantRun) -> BootFacts | None:
    """The server's startup facts as a result carries them."""
    facts = run.startup
    return None if facts is None else BootFacts(facts.graph_capture_seconds, facts.to_dict())
