"""Root conftest: pytester for the plugin's own tests (pytester runs of real test files)."""

from collections.abc import Iterator

import pytest

pytest_plugins = ["pytester"]

IGNORE_CONDITIONS = "SGLANG_PERF_IGNORE_CONDITIONS"


@pytest.fixture(autouse=True, scope="session")
def _conditions_ignored() -> Iterator[None]:
    """The runs of these tests use the conditions of their measurements only where a test is about them
    (tests/plugin/test_conditions.py): on a busy 2-core CI, a regression a test provokes on purpose must stay a
    regression, and its baselines must be recorded. The readings are taken and shown all the same. Session-wide, so
    that module-scoped fixtures that run pytest (tests/sglang_cpu) have it too."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(IGNORE_CONDITIONS, "1")
        yield
