"""Every error the plugin reports to a user derives from one base class, so a caller can catch them all."""

from __future__ import annotations

import pytest

from pytest_sglang_perf.config.settings import ConfigError
from pytest_sglang_perf.errors import SGLangPerfError
from pytest_sglang_perf.gate.baseline import BaselineFileError
from pytest_sglang_perf.measurement.client import RequestFailed
from pytest_sglang_perf.server.info import ServerInfoError
from pytest_sglang_perf.server.launcher import BootError
from pytest_sglang_perf.session.facade import VariantUnavailable
from pytest_sglang_perf.sglang_facts.flags import FlagTableError
from pytest_sglang_perf.sglang_facts.gpus import GpuTableError, find_gpu
from pytest_sglang_perf.sglang_facts.rules import RulesError

USER_FACING = (ConfigError, BaselineFileError, RequestFailed, ServerInfoError, BootError, VariantUnavailable,
               FlagTableError, GpuTableError, RulesError)


@pytest.mark.parametrize("error", USER_FACING, ids=lambda e: e.__name__)
def test_user_facing_errors_share_the_base_class(error: type[Exception]) -> None:
    assert issubclass(error, SGLangPerfError)


def test_a_raised_error_is_caught_by_the_base_class() -> None:
    with pytest.raises(SGLangPerfError, match="unknown GPU 'B9000'"):
        find_gpu("B9000")
