"""The command a failing cell's report ends with re-measures that cell (gate/failing.py)."""

from __future__ import annotations

from pytest_sglang_perf.config.run_options import RunOptions
from pytest_sglang_perf.gate.failing import refresh_command


def test_the_refresh_command_of_a_booted_server() -> None:
    assert refresh_command("t.py::test_x[tp2]", "tp2", RunOptions(simulate=True)) == \
        "pytest 't.py::test_x[tp2]' --sglang-simulate --sglang-update-baselines"


def test_the_refresh_command_of_a_remote_server_selects_its_variant_and_gpu() -> None:
    options = RunOptions(url="http://10.0.0.5:30000", remote_gpu="NVIDIA H100 80GB HBM3")
    assert refresh_command("t.py::test_x[prod]", "prod", options) == (
        "pytest 't.py::test_x[prod]' --sglang-url http://10.0.0.5:30000 --sglang-variants prod "
        "--sglang-remote-gpu 'NVIDIA H100 80GB HBM3' --sglang-update-baselines")


def test_a_gpu_is_named_only_for_a_remote_server() -> None:
    import pytest

    from pytest_sglang_perf.config.selection import remote_variants
    from pytest_sglang_perf.config.settings import ConfigError, Variant

    named = (Variant("prod", gpu="NVIDIA H100 80GB HBM3"),)
    with pytest.raises(ConfigError, match=r"gpu = \.\.\. names the GPU of a remote server"):
        remote_variants(named, RunOptions())
    (attached,) = remote_variants(named, RunOptions(url="http://10.0.0.5:30000"))
    assert (attached.url, attached.gpu) == ("http://10.0.0.5:30000", "NVIDIA H100 80GB HBM3")
