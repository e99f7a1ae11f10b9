"""`/metrics` counters (server/metrics_scrape.py): the families' samples summed over their labels, and the server's
accept length between two scrapes (generated tokens per verify call)."""

from __future__ import annotations

from pytest_sglang_perf.server.metrics_scrape import GENERATED, VERIFIES, accept_length, counters

TEXT = """# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{engine_type="unified",is_streaming="true",model_name="m"} 1200.0
sglang:generation_tokens_total{engine_type="unified",is_streaming="false",model_name="m"} 300.0
# TYPE sglang:spec_verify_calls_total counter
sglang:spec_verify_calls_total{model_name="m"} 600.0
sglang:prompt_tokens_total{model_name="m"} 9999.0
"""


def test_a_counter_is_summed_over_its_label_sets_and_others_are_left_out() -> None:
    assert counters(TEXT) == {GENERATED: 1500.0, VERIFIES: 600.0}


def test_the_accept_length_is_the_tokens_per_verify_call_in_between() -> None:
    before = {GENERATED: 1500.0, VERIFIES: 600.0}
    after = {GENERATED: 2700.0, VERIFIES: 1000.0}
    assert accept_length(before, after) == 3.0
    assert accept_length(before, before) is None  # nothing verified in between (no speculative decoding)
    assert accept_length(None, after) is None  # no /metrics
