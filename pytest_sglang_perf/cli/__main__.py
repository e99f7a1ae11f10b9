"""`python -m pytest_sglang_perf.cli`: the `sglang-perf` command."""

from pytest_sglang_perf.cli.main import main

raise SystemExit(main())
