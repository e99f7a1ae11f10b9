"""Concurrent rounds' metrics, SLO goodput, levels and the request cap "max" resolves to (measurement/concurrency.py,
server/capacity.py)."""

from __future__ import annotations

import pytest

from pytest_sglang_perf.config.request import parse_slo
from pytest_sglang_perf.config.units import parse_latency
from pytest_sglang_perf.gate.ab import CellSamples, ab_lines
from pytest_sglang_perf.gate.cell_ids import collected_test
from pytest_sglang_perf.gate.compare import Verdict, check_metric
from pytest_sglang_perf.gate.identity import CellIdentity, ServerIdentity, differences
from pytest_sglang_perf.gate.ledger import Ledger
from pytest_sglang_perf.measurement.concurrency import (
    MAX_STREAMS,
    Slo,
    latency_percentiles,
    level_suffix,
    parse_levels,
    round_values,
)
from pytest_sglang_perf.measurement.request import RequestSettings
from pytest_sglang_perf.measurement.samples import Sample
from pytest_sglang_perf.measurement.values import metric_values
from pytest_sglang_perf.server.capacity import max_running_requests, max_streams
from pytest_sglang_perf.server.startup import StartupFacts


def _sample(ttft: float, e2e: float, *, round_index: int | None = None, start: float = 0.0,
            tokens: int = 101) -> Sample:
    return Sample(ttft=ttft, e2e=e2e, decode_time=e2e - ttft, completion_tokens=tokens, prompt_tokens=10,
                  chunks=tokens, round=round_index, start=start)


def test_a_rounds_throughput_is_its_tokens_over_first_send_to_last_token() -> None:
    # round 0: two streams, sent 0.0 and 0.1 s into the round, ending 1.0 and 2.1 s in: wall 2.1 s
    # round 1: two streams, both 0.0 -> 1.0 s
    samples = [_sample(0.1, 1.0, round_index=0), _sample(0.2, 2.0, round_index=0, start=0.1),
               _sample(0.1, 1.0, round_index=1), _sample(0.3, 1.0, round_index=1)]
    values = round_values(samples, None)
    assert values["output_throughput"] == pytest.approx((202 / 2.1, 202 / 1.0))
    assert values["request_throughput"] == pytest.approx((2 / 2.1, 2 / 1.0))
    assert values["ttft"] == pytest.approx((0.15, 0.2))  # each round's median request: the independent unit
    assert "goodput" not in values


def test_goodput_counts_the_requests_that_met_every_objective() -> None:
    slo = Slo(ttft=0.25, tpot=0.0095)
    samples = [_sample(0.1, 1.0, round_index=0), _sample(0.2, 2.0, round_index=0),  # tpot 9 ms, 18 ms
               _sample(0.3, 1.0, round_index=1), _sample(0.1, 1.0, round_index=1)]  # ttft 300 ms misses
    assert round_values(samples, slo)["goodput"] == pytest.approx((1 / 2.0, 1 / 1.0))
    one_stream = [_sample(0.1, 1.0), _sample(0.3, 1.0)]  # no rounds: each request is a round of one
    assert round_values(one_stream, slo) == {"goodput": pytest.approx((1.0, 0.0))}


def test_one_stream_metrics_stay_per_request() -> None:
    samples = [_sample(0.1, 1.0), _sample(0.2, 2.0)]
    values = metric_values(samples, None, None)
    assert values["output_throughput"] == pytest.approx((101.0, 50.5))
    assert "request_throughput" not in values and "goodput" not in values


def test_a_concurrent_measurements_values_come_from_its_samples_alone() -> None:
    """What a baseline keeps (samples) defines the same values again."""
    samples = [_sample(0.1, 1.0, round_index=0), _sample(0.2, 2.0, round_index=0, start=0.1)]
    again = [Sample.from_dict(s.to_dict()) for s in samples]
    assert metric_values(again, None, None, Slo(ttft=0.15)) == metric_values(samples, None, None, Slo(ttft=0.15))


def test_percentiles_are_over_every_request_and_gap() -> None:
    samples = [_sample(t / 1000, 1.0) for t in range(1, 101)]
    found = latency_percentiles(samples, [0.01] * 10)
    assert found["ttft"]["p50"] == pytest.approx(0.0505) and found["ttft"]["p99"] == pytest.approx(0.09901)
    assert found["itl"] == {"p50": 0.01, "p90": 0.01, "p99": 0.01}


@pytest.mark.parametrize(("value", "levels"), [(16, (16,)), ("max", ("max",)), ([1, 4, "max"], (1, 4, "max"))])
def test_levels(value: object, levels: tuple[object, ...]) -> None:
    assert parse_levels(value) == levels


@pytest.mark.parametrize(("value", "message"), [
    (0, "a concurrency level is a whole number from 1 to 1024"),
    (True, "a concurrency level is a whole number"),
    ("all", "a concurrency level is a whole number"),
    (MAX_STREAMS + 1, "from 1 to 1024"),
    ([4, 4], "lists each level once"),
    ([], "needs at least one level"),
])
def test_bad_levels_say_what_is_allowed(value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_levels(value)


def test_a_level_names_its_cell() -> None:
    assert (level_suffix(1), level_suffix(16), level_suffix("max")) == ("", "@c16", "@cmax")


def test_slo_parsing() -> None:
    assert parse_slo({"ttft": "200ms", "tpot": 0.05}) == Slo(ttft=0.2, tpot=0.05)
    assert parse_latency("1.5s") == 1.5
    with pytest.raises(ValueError, match="not 'e2e'"):
        parse_slo({"e2e": "1s"})
    with pytest.raises(ValueError, match="write a latency like '200ms'"):
        parse_slo({"ttft": "fast"})
    with pytest.raises(ValueError, match="write the objectives as a table"):
        parse_slo("200ms")
    assert Slo(ttft=0.2, tpot=0.05).describe() == "ttft <= 200 ms, tpot <= 50 ms"


def test_concurrency_is_part_of_the_identity_and_the_slo_is_not() -> None:
    server = ServerIdentity("m", None, "cpu", {})
    one = CellIdentity.of("h", RequestSettings(64, 0.6, 0, 3, 1), server)
    four = CellIdentity.of("h", RequestSettings(64, 0.6, 0, 3, 1, concurrency=4, slo=Slo(ttft=0.2)), server)
    assert differences(one, four) == ["concurrency 1 -> 4"]
    assert "concurrency" not in one.to_dict()  # a one-stream entry reads as before concurrency existed
    assert CellIdentity.from_dict(four.to_dict()) == four
    with_slo = CellIdentity.of("h", RequestSettings(64, 0.6, 0, 3, 1, slo=Slo(ttft=0.2)), server)
    assert with_slo == one  # adding an SLO keeps every baseline comparable
    settings = RequestSettings(64, 0.6, 0, 3, 1, concurrency=4, slo=Slo(tpot=0.05))
    assert RequestSettings.from_dict(settings.to_dict()) == settings


def test_a_goodput_of_zero_is_never_a_verdict_without_a_test() -> None:
    """A round where no request met the SLO is 0: no log-scale test, so a drop is inconclusive, not regressed."""
    check = check_metric("goodput", [[4.0, 5.0, 5.0, 5.1, 4.9]], [5.0, 4.3, 0.0, 1.0, 0.5], 0.10)
    assert check.verdict is Verdict.INCONCLUSIVE and check.note == "goodput: no statistical test (a value of 0 " \
        "among the samples)"
    assert check_metric("goodput", [[4.0]], [2.0], 0.10).verdict is Verdict.REGRESSED  # one sample: as any metric


def test_a_levels_cell_belongs_to_its_collected_test() -> None:
    assert collected_test("t.py::test_x@c16") == "t.py::test_x"
    assert collected_test("t.py::test_x[512]@cmax") == "t.py::test_x[512]"
    assert collected_test("t.py::test_x[a@c1]") == "t.py::test_x[a@c1]"


def test_max_is_the_servers_cap_over_its_dp_ranks() -> None:
    info = {"internal_states": [{"effective_max_running_requests_per_dp": 24},
                                {"effective_max_running_requests_per_dp": 24}]}
    assert max_running_requests(info, None) == (48, "/server_info effective_max_running_requests_per_dp over 2 DP "
                                                    "ranks")
    logged = StartupFacts(max_running_requests=32)
    assert max_running_requests({}, logged) == (32, "the startup log's max_running_requests")
    assert max_streams("v", {}, logged, 64) == 32
    with pytest.raises(ValueError, match=r"\[v\] concurrency=\"max\" is 32 streams here .*--max-running-requests"):
        max_streams("v", {}, logged, 16)
    with pytest.raises(ValueError, match="reported no request cap"):
        max_streams("v", {}, None, 64)


def test_unused_entries_count_a_levels_cell_as_its_tests() -> None:
    ledger = Ledger(mode=None)
    ledger.files["k"] = {("t.py::test_x@c16", "default"), ("t.py::gone@c4", "default")}
    assert ledger.unused({("t.py::test_x", "default")}) == [("t.py::gone@c4", "default")]


def test_ab_compares_rounds_and_refuses_different_concurrency() -> None:
    rounds = [_sample(0.1, 1.0, round_index=r, start=0.01 * k) for r in range(3) for k in range(4)]
    four = CellSamples.from_samples("t.py::t@cmax", "a", False, rounds, "h", streams=4)
    assert four.values["output_throughput"] == pytest.approx(round_values(rounds, None)["output_throughput"])
    assert len(four.values["request_throughput"]) == 3  # one per round, as the gate has them
    eight = CellSamples.from_samples("t.py::t@cmax", "b", False, rounds, "h", streams=8)
    lines = ab_lines([four, eight], reference="a")
    assert "  b vs a: n/a (different concurrency: 4 vs 8 streams)" in lines
