"""The simulated SGLang engine below the HTTP API: the scheduler's boot (and how it crashes), continuous batching,
step times (the roofline model), request planning and content, decode statistics, info payloads and the
scheduler's metrics. `factory.build_engine(argv)` builds a ready `SimEngine`. Imports only `args/`, `logs.py` and
`sglang_facts`."""
