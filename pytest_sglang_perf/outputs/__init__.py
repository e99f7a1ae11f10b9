"""Where a session's results go besides the terminal: Markdown (job summaries), JUnit properties, the machine."""
