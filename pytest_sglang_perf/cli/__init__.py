"""The command face: `sglang-perf` (main.py) and its subcommands (baseline/, plot.py); plain Python over the
session-free parts of the package, never pytest's internals."""
