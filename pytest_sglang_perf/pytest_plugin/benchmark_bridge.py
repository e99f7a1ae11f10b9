"""Every measured cell is also a pytest-benchmark benchmark (docs/pytest-benchmark.md).

pytest-benchmark times a function; our cells are timed already, by the streaming client. So nothing is re-timed:
each perf test gets, at collection, a `@pytest.mark.benchmark(timer=<replay clock>, group=<test id>)` marker, and
once its cell is judged, `benchmark.pedantic` runs one round per measured request whose target moves the replay
clock on by that request's end-to-end latency (`Sample.e2e`). pytest-benchmark's rounds are then exactly our
requests' latencies, and its table, saved runs, comparisons and histograms work on our cells; our metrics and the
gate's verdict ride along in `extra_info`. The gate stays the authority on pass and fail.

Only pytest-benchmark's documented interface is used: the `benchmark` fixture, `pedantic`, `extra_info` and the
marker's `timer` and `group` options.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from pytest_sglang_perf.gate.cell_ids import strip_variant
from pytest_sglang_perf.gate.compare import Cell, MetricCheck
from pytest_sglang_perf.measurement.result import Result
from pytest_sglang_perf.roofline.ceiling import ceiling_record

ROUND = "e2e"
"""The per-request time that is a round: `Sample.e2e`, request sent -> last content token received."""
ROUND_TEXT = "one measured request: its end-to-end latency (request sent -> last content token), seconds"
AUTHORITY = ("pytest-sglang-perf's gate decides pass and fail (verdict); pytest-benchmark's statistics describe the "
             "same requests' end-to-end latencies")

_ASKING_OPTIONS = ("benchmark_json", "benchmark_autosave", "benchmark_save", "benchmark_compare",
                   "benchmark_compare_fail", "benchmark_histogram", "benchmark_verbose")
"""pytest-benchmark's options that ask for its outputs: any of them (or --sglang-benchmark) feeds our cells."""


class ReplayClock:
    """A per-test virtual clock for pytest-benchmark's `timer` option: it moves only when a recorded duration is
    replayed, so a round that replays one request lasts exactly that request's measured time.

    pytest-benchmark reads the timer before and after each round; `rewind()` (the round's setup) sets it to 0 and
    `play()` (the round itself) moves it on by the next recorded duration, so end - start is that duration exactly.
    """

    def __init__(self, label: str) -> None:
        self.label = label
        self._now = 0.0
        self._pending: Iterator[float] = iter(())

    def __call__(self) -> float:
        return self._now

    def load(self, durations: Iterable[float]) -> None:
        """The durations the next rounds replay, in order."""
        self._pending = iter(tuple(durations))

    def rewind(self) -> None:
        self._now = 0.0

    def play(self) -> None:
        """Move the clock on by the next loaded duration."""
        try:
            self._now += next(self._pending)
        except StopIteration:
            raise RuntimeError(f"{self}: no recorded duration left to replay") from None

    def __str__(self) -> str:  # pytest-benchmark records str(timer) in its JSON options
        return f"sglang-perf replay clock (per-request {ROUND} of {self.label}, not re-timed)"

    def __repr__(self) -> str:
        return f"ReplayClock({self.label!r})"


@dataclass
class _Feed:
    """A marked perf item: its clock, and once fed, the fixture that holds its benchmark."""

    clock: ReplayClock
    fixture: Any = None
    checks: int = 0


_FEED = pytest.StashKey[_Feed]()


def wanted(config: pytest.Config, benchmark: bool) -> bool:
    """Whether this run hands its cells to pytest-benchmark: it is loaded and neither skipped nor disabled, and
    --sglang-benchmark or one of its output options (--benchmark-json, -autosave, -save, -compare, ...) asks."""
    if not _loaded(config) or config.getoption("benchmark_skip", False):
        return False
    if config.getoption("benchmark_disable", False) and not config.getoption("benchmark_enable", False):
        return False
    return benchmark or any(config.getoption(name, None) for name in _ASKING_OPTIONS)


def _loaded(config: pytest.Config) -> bool:
    """pytest-benchmark's plugin is registered (not with `-p no:benchmark`), however it was loaded."""
    module = sys.modules.get("pytest_benchmark.plugin")
    return module is not None and config.pluginmanager.is_registered(module)


def mark_items(config: pytest.Config, items: Sequence[tuple[pytest.Item, str]], benchmark: bool) -> None:
    """At collection: prepare the perf items (those using `sglang_perf`, each with its variant's name) for
    pytest-benchmark.

    Each gets its replay clock and a benchmark marker with it as the timer and its test id (the node id without
    the variant) as the group, so the variants of a test are compared side by side. Nothing is marked when the
    run does not ask for pytest-benchmark's outputs (see `wanted`), nor a test that uses `benchmark` itself.
    """
    if benchmark and not _loaded(config):
        raise pytest.UsageError(
            "--sglang-benchmark (ini sglang_benchmark, env SGLANG_PERF_BENCHMARK) hands every cell to "
            "pytest-benchmark, but its plugin is not loaded in this run (-p no:benchmark, or "
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD set without -p pytest_benchmark.plugin): load it, or leave out "
            "--sglang-benchmark")
    if not wanted(config, benchmark):
        return
    for item, variant in items:
        if "benchmark" in getattr(item, "fixturenames", ()):
            continue
        clock = ReplayClock(item.nodeid)
        item.stash[_FEED] = _Feed(clock)
        item.add_marker(pytest.mark.benchmark(timer=clock, group=strip_variant(item.nodeid, variant)), append=False)


def feed(request: pytest.FixtureRequest, cell: Cell, result: Result) -> None:
    """After a cell was judged (or recorded): hand it to pytest-benchmark, its requests' end-to-end latencies as
    the rounds and the cell in `extra_info`. A test that checks several results (a concurrency sweep's levels) is
    one benchmark (it runs once per test): its rounds are the first result's requests, and each later cell, its
    metrics and verdicts, goes into `extra_info["later"]`."""
    entry = request.node.stash.get(_FEED, None)
    if entry is None or not result.samples:
        return
    entry.checks += 1
    if entry.fixture is not None:
        info = entry.fixture.extra_info
        info["checks"] = entry.checks
        info["note"] = (f"this test checked {entry.checks} results; pytest-benchmark holds the first one's "
                        "requests, the later ones' cells are in 'later'")
        info.setdefault("later", []).append(_later(cell, result))
        return
    fixture = request.getfixturevalue("benchmark")
    entry.fixture = fixture
    fixture.extra_info.update(extra_info(cell, result))
    durations = [getattr(sample, ROUND) for sample in result.samples]
    entry.clock.load(durations)
    fixture.pedantic(entry.clock.play, setup=entry.clock.rewind, rounds=len(durations), iterations=1)


def extra_info(cell: Cell, result: Result) -> dict[str, Any]:
    """What pytest-benchmark stores beside the rounds: the cell, its metrics and verdicts (plain JSON values)."""
    info: dict[str, Any] = {
        "test_id": cell.test_id,
        "variant": cell.variant,
        "verdict": cell.verdict.value,
        "simulated": cell.simulated,
        "authority": AUTHORITY,
        "round": ROUND_TEXT,
        "samples": len(result.samples),
        "prompt_hash": result.prompt_hash,
        "cached_tokens_median": result.cached_tokens,
        "metrics": {check.metric: _metric(check) for check in cell.checks},
        "checks": 1,
        "roofline": ceiling_record(result.roofline),
    }
    if cell.stale:
        info["stale"] = list(cell.stale)
    if cell.confirmation is not None:
        info["confirmation"] = {check.metric: _metric(check) for check in cell.confirmation}
    return info


def _later(cell: Cell, result: Result) -> dict[str, Any]:
    """A later checked result of the same test, as `extra_info` holds it: its cell, metrics and verdicts."""
    return {"test_id": cell.test_id, "verdict": cell.verdict.value, "samples": len(result.samples),
            "concurrency": result.params.concurrency, "prompt_hash": result.prompt_hash,
            "metrics": {check.metric: _metric(check) for check in cell.checks}}


def _metric(check: MetricCheck) -> dict[str, Any]:
    return {"measured": check.measured, "baseline": check.baseline, "change": check.change,
            "allowed": check.allowed, "unit": check.unit, "verdict": check.verdict.value}
