"""What `concurrency="max"` resolves to (server/capacity.py): /server_info's effective cap per DP rank, summed over
the ranks, else the startup log's line; refused when the server says nothing or more than the client opens."""

from __future__ import annotations

import pytest

from pytest_sglang_perf.server.capacity import max_running_requests, max_streams
from pytest_sglang_perf.server.startup import StartupFacts

TWO_RANKS = {"internal_states": [{"effective_max_running_requests_per_dp": 48},
                                 {"effective_max_running_requests_per_dp": 40}]}


def test_the_caps_of_every_dp_rank_are_summed_and_the_source_named() -> None:
    assert max_running_requests(TWO_RANKS, None) == (88, "/server_info effective_max_running_requests_per_dp over "
                                                         "2 DP ranks")


def test_the_startup_log_is_the_fallback_and_unusable_states_are_skipped() -> None:
    info = {"internal_states": [{"effective_max_running_requests_per_dp": True}, "junk", {}]}
    assert max_running_requests(info, StartupFacts(max_running_requests=12)) == (
        12, "the startup log's max_running_requests")
    assert max_running_requests(info, None) is None


def test_max_is_the_cap_when_the_client_can_open_that_many() -> None:
    assert max_streams("tp2", TWO_RANKS, None, 256) == 88


@pytest.mark.parametrize(("info", "limit", "message"), [
    ({}, 256, r'\[tp2\] concurrency="max": the server reported no request cap .*; pass a number instead'),
    (TWO_RANKS, 64, r'\[tp2\] concurrency="max" is 88 streams here \(/server_info .*\), more than the 64 the client '
                    r"opens at once: cap the server with --max-running-requests"),
])
def test_max_is_refused_with_what_to_do(info: dict[str, object], limit: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        max_streams("tp2", info, None, limit)
