"""The command line and what SGLang resolves from it: SGLang's flags and the `--sim-*` knobs (faults included),
the model's config.json, the resolved server args, CUDA-graph and speculative settings, the memory plan.
`server_config.read_command_line` goes from argv to a `ServerConfig`; no I/O besides reading tables and files."""
