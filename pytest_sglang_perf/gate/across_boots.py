"""A regression that held on a fresh boot, tested across the boots: against a baseline of one boot, the first
measurement and the fresh boot's re-measure are two boots of the code under test, so the difference is tested
between boots, not between requests (gate/statistics.py `log_difference`, its "boots" method: the two boots as the
groups, the baseline's one boot as the other side, whose own offset is then in the error).

Why: a baseline recorded on one boot carries that boot's offset for good. When it was a fast boot, every later boot
of unchanged code is slower by about the same amount, the fresh boot included, and a confirmation on a fresh boot
alone would fail the test every time (seen against real SGLang on CPU, boots 25% apart). Two boots that disagree by
about as much as they differ from the baseline do not establish a change; two that agree closely do. A baseline
recorded over several boots (`--sglang-boots N`) has its spread in the first test already: not tested again here.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_sglang_perf.gate.compare import BootValues
from pytest_sglang_perf.gate.statistics import log_difference
from pytest_sglang_perf.measurement.metrics import METRICS, Direction

NOT_ESTABLISHED = ("{metric}: worse on both boots, but the two boots differ too much to establish it against a "
                   "baseline of one boot (record baselines over several boots: --sglang-boots 3)")


def held_across_boots(name: str, baseline: BootValues, first: Sequence[float], again: Sequence[float],
                      alpha: float) -> bool | None:
    """Whether `name` is worse than a one-boot `baseline` across the two boots `first` and `again` at level `alpha`;
    None when this test does not apply (a baseline of several boots, a metric without a direction) or none is
    possible (too few values, a value without a log)."""
    spec = METRICS.get(name)
    if len(baseline) != 1 or spec is None:
        return None
    result = log_difference([list(first), list(again)], list(baseline[0]))  # diff = log baseline - current boots
    if result is None:
        return None
    worse = result.p_increase() if spec.direction is Direction.HIGHER_IS_BETTER else result.p_decrease()
    return worse < alpha
