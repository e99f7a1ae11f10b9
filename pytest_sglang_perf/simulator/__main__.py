from __future__ import annotations

from pytest_sglang_perf.simulator import main

raise SystemExit(main())
