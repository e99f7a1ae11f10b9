"""The options' help states the defaults the code uses (the entry point's options module imports nothing of the
package, so a default it states is written out, and held to the code's here)."""

from __future__ import annotations

from pytest_sglang_perf.pytest_plugin.options import _OPTIONS
from pytest_sglang_perf.server.progress import HEARTBEAT_SECONDS


def test_the_heartbeat_help_states_the_default_the_boot_progress_uses() -> None:
    help_text = next(text for name, _, text in _OPTIONS if name == "heartbeat")
    assert f"(default {HEARTBEAT_SECONDS:g}; 0: never)" in help_text
