"""The session wing: the facade that sequences a run (facade.py) and the rooms that decide (one concern each):
boots and identities, GPU claims, conditions, baselines, roofline ceilings, live lines, the per-variant record."""
