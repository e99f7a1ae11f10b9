"""What the user configured: the project's perf settings (pyproject.toml / sglang-perf.toml) and this run's options."""
