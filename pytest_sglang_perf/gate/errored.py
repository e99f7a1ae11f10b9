"""A variant whose tests measured nothing because its server never ran: it failed the pre-flight check or its boot.

Plain data for the reports: the summary's count line and the results file's `errored` list name each one, so that
a run with a broken variant never reads as "every cell passed".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PREFLIGHT = "pre-flight"
BOOT = "boot"


@dataclass(frozen=True)
class ErroredVariant:
    variant: str
    stage: str
    """PREFLIGHT (its flags were rejected, no server was started) or BOOT (its server failed to boot)."""
    reason: str
    """The pre-flight errors, or the boot failure's reason (secrets redacted)."""
    tests: tuple[str, ...]
    """Node ids of the variant's tests: each errored instead of measuring."""
    started: bool = True
    """BOOT: whether its server process was started at all (not when its GPUs could not be claimed)."""

    @property
    def failed(self) -> str:
        if self.stage == PREFLIGHT:
            return "pre-flight check failed"
        return "boot failed" if self.started else "boot failed, no server started"

    def describe(self) -> str:
        """`single_batch_overlap (pre-flight check failed)`, `bad (boot failed)`."""
        return f"{self.variant} ({self.failed})"

    def first_line(self) -> str:
        """`boot failed: <the reason's first line>`: what a one-line listing of the variant's tests says."""
        first = next((line.strip() for line in self.reason.splitlines() if line.strip()), "no reason recorded")
        return f"{self.failed}: {first}"

    def to_dict(self) -> dict[str, Any]:
        return {"variant": self.variant, "stage": self.stage, "reason": self.reason, "tests": list(self.tests)}
