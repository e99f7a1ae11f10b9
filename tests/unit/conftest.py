"""The unit tests mirror the package: tests/unit/<part>/ holds the tests of pytest_sglang_perf/<part>/. The helpers
they share (stub servers, log text, documents) sit here, importable from every folder below."""
