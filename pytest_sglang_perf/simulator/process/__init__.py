"""The simulator as an OS process: the CLI (`python -m pytest_sglang_perf.simulator`, exit codes as SGLang's),
the server's lifecycle (boot with the port closed, HTTP, warmup, watchdog, signals, killing its process tree) and
the idle scheduler child process."""
