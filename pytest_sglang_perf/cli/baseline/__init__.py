"""`sglang-perf baseline ...`: baselines as reviewed artifacts (show, diff, accept, validate, prune)."""
