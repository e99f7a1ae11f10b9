"""The session's cells: each measured result placed (its baseline file and identity), judged against its baseline or
recorded, a regression confirmed by a re-measure (on a fresh boot or the same server: session/confirmation.py), and
kept as the cell's record.

Plain Python (no pytest): the facade (session/facade.py) hands it each checked result; the records it keeps are what
the report wing and the results file are made of.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from pytest_sglang_perf.config.run_options import RunOptions
from pytest_sglang_perf.errors import SGLangPerfError
from pytest_sglang_perf.gate.compare import FRESH_BOOT, SAME_SERVER, Cell, Verdict
from pytest_sglang_perf.gate.identity import CellIdentity
from pytest_sglang_perf.gate.judge import CellPlace
from pytest_sglang_perf.gate.recording import RecordedRun
from pytest_sglang_perf.gate.results_file import CellRecord
from pytest_sglang_perf.measurement.request import RequestParams
from pytest_sglang_perf.measurement.result import Result
from pytest_sglang_perf.server.redaction import redact_argv
from pytest_sglang_perf.session.baselines import SessionBaselines
from pytest_sglang_perf.session.conditions import SessionConditions
from pytest_sglang_perf.session.confirmation import Confirmation
from pytest_sglang_perf.session.variant_run import VariantRun

Measure = Callable[[str, RequestParams, "Callable[[Result], bool] | None"], Result]
"""The session's measure(variant, params, decided): a measurement on the variant's running server."""


class SessionCells:
    def __init__(self, options: RunOptions, runs: Mapping[str, VariantRun], baselines: SessionBaselines,
                 conditions: SessionConditions, measure: Measure, records: list[CellRecord],
                 confirmation: Confirmation) -> None:
        self._options = options
        self._confirmation = confirmation
        self._runs = runs
        self._baselines = baselines
        self._conditions = conditions
        self._measure = measure
        self.records = records
        """Every checked cell in order, with its result, its re-measure and the entry recording it would write (the
        session's own record, appended to here)."""

    def place(self, name: str, params: RequestParams) -> CellPlace:
        """The cell's baseline file key and identity (request, server args as resolved, model, GPUs used)."""
        from pytest_sglang_perf.measurement.measure import prompt_text_hash

        place = self._runs[name].place
        assert place is not None, "a cell is placed once its variant's server is booted"
        return CellPlace(place.key, CellIdentity.of(prompt_text_hash(params.prompt), params.settings, place.identity))

    def decider(self, test_id: str, name: str, params: RequestParams) -> Callable[[Result], bool]:
        """For the adaptive plan: whether the samples so far decide the cell's verdict."""
        place = self.place(name, params)
        judge = self._baselines.judge
        recording = self._baselines.records(judge.store(place.key).lookup(test_id, name))
        return judge.decided(test_id, place, recording=recording)

    def check(self, test_id: str, result: Result) -> CellRecord:
        """Judge a result against its comparable baseline: a regression is re-measured once (on a fresh boot or the
        same server) and fails only if it holds. With --sglang-update-baselines, record it instead (=new: only a cell
        without an entry); a recording refused for disturbed conditions keeps the cell, inconclusive at worst, and
        raises DisturbedRecording. Returns the cell's record (its verdict, what it was judged on), kept for the
        results file; raises client.RequestFailed when the re-measure's request fails, and what the boot raises
        when a fresh boot for it fails."""
        place = self.place(result.variant, result.params)
        baselines = self._baselines
        cell = baselines.judge.judge(test_id, result, place)
        key = (test_id, result.variant)
        stored = baselines.stored(place, key)
        run = self._recorded_run(result.variant)
        record = baselines.records(stored)
        run_state = self._runs[result.variant]
        self._confirmation.seen(result)
        if record:
            refused = self._conditions.judge(cell, result)  # disturbed: it establishes no regression
            self._conditions.check_recording(test_id, result, lambda: self.records.append(CellRecord(refused, result)))
            cell = replace(cell, updated=True)
            baselines.record(test_id, result, place, run, existed=stored is not None)
        elif self._options.update_baselines:
            baselines.ledger.kept(key)
        again = None
        if not record and cell.verdict is Verdict.REGRESSED:
            cell, again = self._confirm(test_id, result, cell, place, run_state)
        self.records.append(CellRecord(cell, result, again, place, run))
        return self.records[-1]

    def _confirm(self, test_id: str, result: Result, cell: Cell, place: CellPlace,
                 run: VariantRun) -> tuple[Cell, Result]:
        """The regressed cell re-measured, on a fresh boot or the same server (session/confirmation.py), and judged
        again: each regression holds only if the re-measure regresses too, under undisturbed conditions. When the
        re-measure cannot be made (its boot or a request fails), the cell is kept as measured and the error raised."""
        plan = self._confirmation.plan(run, cell, result)
        try:
            again = self._conditions.remeasure(result, lambda: self._remeasure(test_id, result, reboot=plan.reboot),
                                               run)
        except SGLangPerfError:
            self.records.append(CellRecord(cell, result, None, place, self._recorded_run(result.variant)))
            raise
        self._confirmation.seen(again)
        confirmed = self._baselines.judge.confirm(cell, again, place, on=FRESH_BOOT if plan.fresh else SAME_SERVER,
                                                  other_boot=plan.other_boot, first=result)
        return self._conditions.judge(confirmed, again), again

    def _remeasure(self, test_id: str, result: Result, *, reboot: bool) -> Result:
        """The confirmation of a regression: the same request again, after booting the variant's server again or
        on the server it runs."""
        if reboot:
            self._confirmation.reboot(self._runs[result.variant])
        params = result.again()
        decided = None if params.max_repeats is None else self.decider(test_id, result.variant, params)
        return self._measure(result.variant, params, decided)

    def _recorded_run(self, name: str) -> RecordedRun:
        run = self._runs[name]
        return RecordedRun(tuple(redact_argv(run.plan.args)), None if run.config is None else dict(run.config.ran))

    def record_boots(self, run: VariantRun, boots: int, reboot: Callable[[], None],
                     say: Callable[[str], None]) -> str | None:
        """--sglang-boots N: re-measure the variant's recorded cells on N-1 fresh boots (`reboot` stops and boots
        its server), then write them; if a boot or a request fails, write none of them. The error, or None."""
        pending = self._baselines.recorder.pending(run.name)
        if pending and run.boot_error is not None:  # a confirmation's fresh boot failed: no boot 2 to measure on
            self._baselines.discard(run.name)
            return (f"variant {run.name!r}: baselines NOT recorded: its server failed to boot again after boot 1 "
                    f"({run.boot_error.reason})")
        if not pending or run.process is None:
            return None
        for boot in range(2, boots + 1):
            say(f"[{run.name}] recording baselines: boot {boot} of {boots}")
            try:
                reboot()
                for cell in pending:
                    cell.results.append(self._measure(run.name, cell.first.again(), None))
                    self._conditions.check_recording(cell.test_id, cell.results[-1], lambda: None)
            except SGLangPerfError as exc:
                self._baselines.discard(run.name)
                return f"variant {run.name!r}: baselines NOT recorded: boot {boot} of {boots} failed: {exc}"
        files = ", ".join(str(path) for path in self._baselines.files(run.name))
        say(f"[{run.name}] recorded {len(pending)} baseline(s) over {boots} boots in {files}")
        return None
