"""The server wing: planning a variant's command line, the pre-flight check, launching and stopping the process
tree, reading its log and `/server_info`, and judging what it really ran (effective configuration, hints)."""
