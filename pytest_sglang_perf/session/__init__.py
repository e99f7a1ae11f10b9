"""The session wing: the facade that sequences a run (facade.py) and the rooms that decide (one concern each):
boots and identities, GPU claims, conditions, baselines, roofline ceilings, live lines, the per-variant record."""

INSTALL = "pip install 'pytest-sglang-perf[sglang]'"
"""What a run without SGLang says to install (the facade's skip reason, the plans' refusal of a real gate)."""
