"""The pytest11 entry point. pytest imports it in every run of every environment that has the package, so importing
it loads nothing else of the package (tests/unit/pytest_plugin/test_import_cost.py): it adds the options, and in
`pytest_configure` registers the pytest face (pytest_plugin/hooks.py) only when the project has a perf
configuration. The two fixtures stay here, so that a test that asks for them in a project without one fails with
what to do."""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_sglang_perf.config.settings import Variant
    from pytest_sglang_perf.pytest_plugin.handle import SGLangPerf

HOOKS = "sglang_perf_session"
"""The name the pytest face is registered under (`config.pluginmanager.get_plugin(HOOKS)`)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    from pytest_sglang_perf.pytest_plugin.options import add_options

    add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    from pytest_sglang_perf.pytest_plugin.options import may_have_configuration

    if not may_have_configuration(config):
        return
    from pytest_sglang_perf.pytest_plugin import hooks

    if not config.pluginmanager.is_registered(hooks):
        config.pluginmanager.register(hooks, HOOKS)
    hooks.configure(config)


@pytest.fixture(scope="session")
def sglang_variant(request: pytest.FixtureRequest) -> Variant:
    """The flag-matrix variant of the current test (tests using `sglang_perf` run once per variant)."""
    from pytest_sglang_perf.config.settings import Variant

    variant = getattr(request, "param", None)
    if not isinstance(variant, Variant):
        pytest.fail("sglang-perf: no configuration found: add a [tool.sglang_perf] table to pyproject.toml, "
                    "a sglang-perf.toml in the rootdir, or pass --sglang-config PATH", pytrace=False)
    return variant


@pytest.fixture
def sglang_perf(request: pytest.FixtureRequest, sglang_variant: Variant) -> Generator[SGLangPerf, None, None]:
    """This variant's running server, with `measure()`, `check()` and an `openai` client."""
    from pytest_sglang_perf.pytest_plugin.hooks import perf_handle

    yield from perf_handle(request, sglang_variant)
