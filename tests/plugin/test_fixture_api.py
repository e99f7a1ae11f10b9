"""The fixture's API as tests use it: measure() results and the openai client bound to the variant."""

from __future__ import annotations

import pytest
from perf_project import write_project


def test_measure_and_openai_client(pytester: pytest.Pytester) -> None:
    write_project(pytester, {"a": []})
    pytester.makepyfile(test_api="""
        def test_measure(sglang_perf):
            result = sglang_perf.measure("hi", max_tokens=16, repeats=2, warmup=1)
            assert result.variant == "a" and result.simulated
            assert [s.completion_tokens for s in result.samples] == [16, 16]
            assert result.summaries["output_throughput"].n == 2
            assert result.summaries["boot_seconds"].median == sglang_perf.server.boot_seconds > 0
            assert "accept_length" not in result.summaries  # no speculative algorithm in this matrix

        CLIENTS = []

        def test_openai(sglang_perf):
            CLIENTS.append(sglang_perf.openai)
            reply = sglang_perf.openai.chat.completions.create(
                model=sglang_perf.model, messages=[{"role": "user", "content": "hi"}], max_tokens=12,
                extra_body={"ignore_eos": True},
            )
            assert reply.usage.completion_tokens == 12
            assert reply.choices[0].finish_reason == "length"
            assert sglang_perf.base_url.startswith("http://127.0.0.1:")

        def test_cross_check(sglang_perf):
            ours = sglang_perf.measure("hi", max_tokens=24, repeats=1, warmup=0).samples[0]
            theirs = sglang_perf.cross_check("hi", max_tokens=24)
            assert theirs.sample.completion_tokens == ours.completion_tokens == 24
            assert theirs.sample.prompt_tokens == ours.prompt_tokens

        def test_the_last_tests_openai_client_was_closed(sglang_perf):
            assert CLIENTS and CLIENTS[0].is_closed()
    """)
    pytester.runpytest("--sglang-simulate").assert_outcomes(passed=4)


def test_speculative_server_reports_accept_length(pytester: pytest.Pytester) -> None:
    spec = ["--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
            "--speculative-num-draft-tokens", "4"]
    write_project(pytester, {"mtp": spec}, sim=["--sim-decode-tok-s", "3000", "--sim-accept-length", "2.5",
                                                "--sim-boot-seconds", "0.3"])
    pytester.makepyfile(test_spec="""
        def test_spec(sglang_perf):
            result = sglang_perf.measure("hi", max_tokens=300, repeats=2, warmup=0)
            accept = result.summaries["accept_length"].median
            assert 2.0 < accept < 3.0, accept
            assert all(s.spec_verify_ct for s in result.samples)
    """)
    pytester.runpytest("--sglang-simulate").assert_outcomes(passed=1)
