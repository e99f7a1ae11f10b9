"""The pytest face: hooks (hooks.py), options (options.py), the fixture's handle (handle.py), xdist scheduling and
the pytest-benchmark bridge. The only part of the package that imports pytest, besides the entry point
(pytest_sglang_perf/plugin.py), which loads this wing only when a project has a perf configuration."""
