"""Root conftest: pytester for the plugin's own tests (pytester runs of real test files)."""

import pytest

pytest_plugins = ["pytester"]

IGNORE_CONDITIONS = "SGLANG_PERF_IGNORE_CONDITIONS"


@pytest.fixture(autouse=True)
def _conditions_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runs of these tests use the conditions of their measurements only where a test is about them
    (tests/plugin/test_conditions.py): on a busy 2-core CI, a regression a test provokes on purpose must stay a
    regression, and its baselines must be recorded. The readings are taken and shown all the same."""
    monkeypatch.setenv(IGNORE_CONDITIONS, "1")
