"""Boot-failure hints from SGLang's own failure messages (texts as in docs/sglang-0.5.23.md)."""

from __future__ import annotations

import pytest

from pytest_sglang_perf.server.hints import boot_hints
from pytest_sglang_perf.sglang_facts.parsers import flag_table_parser


@pytest.mark.parametrize(("line", "expected"), [
    ("[2026-11-29 10:00:00 TP0] SBO (single batch overlap) is not supported on SM90 GPUs with latest "
     "sgl-deep-gemm wheel. Please try removing --enable-single-batch-overlap argument.",
     "--enable-single-batch-overlap crashes SGLang on SM90 GPUs (H100/H200)"),
    ("TypeError: '>' not supported between instances of 'NoneType' and 'int'", "a partial speculative triple"),
    ("ValueError: Unknown speculative algorithm name: MEDUSA", "--speculative-algorithm MEDUSA is not an algorithm"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "out of GPU memory: lower"),
    ("ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): address already in use",
     "the port was in use"),
    ("RuntimeError: Rank 1 scheduler died during initialization (exit code: -9)", "scheduler rank 1 died"),
    ("[2026-11-29 10:00:00] Initialization failed. warmup error: boom", "the warmup request failed"),
])
def test_known_failure_lines(line: str, expected: str) -> None:
    hints = boot_hints("exited with code 1 during boot", ["some line", line])
    assert any(expected in hint for hint in hints), hints


def test_timeout_names_the_phase() -> None:
    [hint] = boot_hints("no readiness after 600.0 s (stuck while capturing graphs; last probe: connection refused)",
                        [])
    assert hint.startswith("the boot timed out while capturing graphs: raise startup_timeout")


def test_unknown_flag_in_the_log_gets_the_new_name() -> None:
    tail = ["sglang serve: error: unrecognized arguments: --enforce-piecewise-cuda-graph"]
    hints = boot_hints("exited with code 2 during boot", tail, flag_table_parser())
    assert hints == ["--enforce-piecewise-cuda-graph was renamed: use --cuda-graph-backend-prefill breakable "
                     "(--enforce-piecewise-cuda-graph is gone after SGLang 0.5.19 (this is 0.5.23); there it was "
                     "deprecated for --cuda-graph-backend-prefill=tc_piecewise; 0.5.23's --cuda-graph-backend-prefill "
                     "has no tc_piecewise (it takes full, breakable, disabled))"]


def test_no_hint_for_an_unknown_failure() -> None:
    assert boot_hints("exited with code 1 during boot", ["ValueError: something new"], flag_table_parser()) == []
