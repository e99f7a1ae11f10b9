"""The `--sim-fault` spec syntax (faults.py): names, arguments, combinations, errors that show the syntax."""

from __future__ import annotations

import pytest

from pytest_sglang_perf.simulator.args.faults import Faults, parse_faults


def test_every_fault_parses() -> None:
    faults = parse_faults("crash-at-boot, hang-at-boot,fail-warmup,die-after:3,http-500:0.25,cut-stream:5,"
                          "no-usage,short:7,slow-after:2:4.5,no-server-info")
    assert faults == Faults(crash_at_boot=True, hang_at_boot=True, fail_warmup=True, die_after=3, http_500=0.25,
                            cut_stream=5, no_usage=True, short=7, slow_after=(2, 4.5, None), no_server_info=True)
    assert faults != Faults()
    assert parse_faults("") == parse_faults(" , ") == Faults()


def test_slow_factor_starts_after_n_requests() -> None:
    faults = parse_faults("slow-after:2:3")
    assert [faults.slow_factor(n) for n in (1, 2, 3, 10)] == [1.0, 1.0, 3.0, 3.0]
    assert Faults().slow_factor(100) == 1.0


def test_a_transient_slowdown_ends_after_m_requests() -> None:
    faults = parse_faults("slow-after:2:3:2")
    assert [faults.slow_factor(n) for n in (1, 2, 3, 4, 5, 10)] == [1.0, 1.0, 3.0, 3.0, 1.0, 1.0]


@pytest.mark.parametrize(("spec", "message"), [
    ("explode", "unknown fault 'explode'"),
    ("die-after", "fault 'die-after': takes one integer argument"),
    ("die-after:x", "fault 'die-after:x': 'x' is not an integer"),
    ("short:0", "fault 'short:0': 0 must be >= 1"),
    ("http-500:1.5", r"probability 1.5 must be in \(0, 1\]"),
    ("slow-after:2", "takes a request count, a factor"),
    ("slow-after:2:0.5", "factor 0.5 must be >= 1"),
    ("slow-after:2:3:0", "0 must be >= 1"),
    ("slow-after:1:2:3:4", "optionally a duration in requests"),
    ("no-usage:1", "fault 'no-usage:1': takes no argument"),
])
def test_bad_specs_say_what_is_wrong_and_show_the_syntax(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as error:
        parse_faults(spec)
    assert "crash-at-boot, hang-at-boot, fail-warmup, die-after:N" in str(error.value)
