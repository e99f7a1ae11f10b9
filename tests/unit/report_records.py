"""Records the session hands the report wing (session/run_record.py, session/variant_run.py), built small and by
hand for the session and report tests: results of identical requests (so that every statistic is exact), cells of
chosen verdicts, variant runs with or without a booted server."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from pytest_sglang_perf.config.settings import Variant
from pytest_sglang_perf.gate.compare import Cell, MetricCheck, Verdict
from pytest_sglang_perf.gate.results_file import CellRecord
from pytest_sglang_perf.measurement.client_load import ClientLoad
from pytest_sglang_perf.measurement.host_load import HostLoad
from pytest_sglang_perf.measurement.request import RequestParams
from pytest_sglang_perf.measurement.result import Result
from pytest_sglang_perf.measurement.samples import Sample
from pytest_sglang_perf.measurement.stats import Summary
from pytest_sglang_perf.measurement.values import metric_values
from pytest_sglang_perf.server.boot import RunningServer
from pytest_sglang_perf.server.effective import EffectiveConfig
from pytest_sglang_perf.server.plan import ServerPlan
from pytest_sglang_perf.session.run_record import RunRecord
from pytest_sglang_perf.session.variant_run import VariantRun

TOKENS = 65
PARAMS = RequestParams(prompt="p", max_tokens=TOKENS, temperature=0.0, seed=0, repeats=4, warmup=0)
CALM_HOST = HostLoad(cores=2, runnable=0.0, busy=0.1, steal=0.0, iowait=0.0, load1=0.1, samples=10)
BUSY_HOST = HostLoad(cores=2, runnable=3.0, busy=1.0, steal=0.0, iowait=0.0, load1=3.0, samples=10)
"""3 other runnable tasks on 2 cores: above the default limit of 0.5 per core."""
LAGGING_CLIENT = ClientLoad(lag_p50=0.001, lag_p99=0.02, lag_max=0.03, probes=100, cpu_share=0.5, seconds=2.0)
"""Event-loop lag p99 20 ms, loop-stamped reads: above the default limit of 5 ms."""
RAN = (("CUDA graphs", "decode on"),)


def samples(ttft: float = 0.1, e2e: float = 1.0, count: int = 4, spread: float = 0.0) -> tuple[Sample, ...]:
    """`count` one-stream requests of TOKENS tokens: identical, or their e2e spread evenly by +-`spread` x 1.5
    around `e2e` (relative, 4 requests)."""
    times = [e2e * (1 + spread * (i - (count - 1) / 2)) for i in range(count)]
    return tuple(Sample(ttft=ttft, e2e=time, decode_time=time - ttft, completion_tokens=TOKENS, prompt_tokens=20,
                        chunks=TOKENS) for time in times)


def result(variant: str = "default", *, ttft: float = 0.1, e2e: float = 1.0, simulated: bool = True,
           host: HostLoad | None = None, client: ClientLoad | None = None, spread: float = 0.0) -> Result:
    measured = samples(ttft, e2e, spread=spread)
    values = metric_values(measured, None, None)
    return Result(variant, PARAMS, "hash", measured, {name: Summary.of(v) for name, v in values.items()}, 2.0,
                  simulated, values=values, host=host, client=client)


def check(metric: str, verdict: Verdict) -> MetricCheck:
    return MetricCheck(metric, "s", 1.0, 1.5, 0.5, 0.05, verdict)


def cell(test_id: str, variant: str = "default", *verdicts: Verdict, simulated: bool = True) -> Cell:
    """A cell whose metrics (ttft, tpot, ...) have these verdicts, in order."""
    names = ("ttft", "tpot", "output_throughput", "decode_throughput")
    return Cell(test_id, variant, tuple(check(name, v) for name, v in zip(names, verdicts, strict=False)),
                simulated)


def variant_run(name: str = "default", *, args: tuple[str, ...] = (), env: Mapping[str, str] | None = None,
                url: str | None = None, tests: Sequence[str] = ()) -> VariantRun:
    plan = ServerPlan(Variant(name, args), args, ("python", "-m", "sim", "--model-path", "org/m", *args),
                      dict(env or {}), True, None, False, url=url)
    return VariantRun(Variant(name, args), plan, tests=list(tests))


def booted(run: VariantRun, log_path: Path, *, boot_seconds: float = 61.5,
           env: Mapping[str, str] | None = None) -> VariantRun:
    """The run with a server that came up (its log at `log_path`) and an effective configuration that is ok."""
    plan = run.plan if env is None else ServerPlan(run.variant, run.plan.args, run.plan.command, dict(env), True,
                                                   None, False, url=run.plan.url)
    run.server = RunningServer(plan, run.plan.url or "http://127.0.0.1:30000", boot_seconds, None, log_path)
    run.config = EffectiveConfig(run.name, (), (), RAN)
    return run


def run_record(records: Sequence[CellRecord], runs: Sequence[VariantRun] = (), *, logs_path: Path,
               variants: Sequence[str] = ("default",), verbosity: int = 0, results_path: Path | None = None,
               baseline_lines: Sequence[str] = ()) -> RunRecord:
    return RunRecord(tuple(variants), tuple(runs), tuple(records), True, verbosity, results_path, 0.95, logs_path,
                     tuple(baseline_lines), None)
