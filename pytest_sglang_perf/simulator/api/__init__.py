"""SGLang's HTTP API on aiohttp: health, info, cache, `/metrics` (Prometheus text), OpenAI chat completions and
the native `/generate`, their wire formats and request faults. Handlers drive a `SimEngine` through its public
methods and render the metrics from its snapshot."""
