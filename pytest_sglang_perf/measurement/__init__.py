"""Measuring a server: the streaming client, the samples it records, the metrics and their summaries.

Importing it is cheap; the client's aiohttp/orjson are imported only when a request is sent.
"""
