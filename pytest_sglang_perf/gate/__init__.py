"""The gate: baselines on disk, the comparison of a result with its baseline, and the reports of the verdicts
(the failing test's table, the terminal summary, the results file)."""
