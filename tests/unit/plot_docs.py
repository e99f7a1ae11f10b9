"""Results documents and PNG checks the plots' and the plot command's tests share (tests/unit/plots, tests/unit/cli)."""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_sglang_perf.gate.results_file import SCHEMA_VERSION
from pytest_sglang_perf.measurement.samples import Sample
from pytest_sglang_perf.server.startup import StartupFacts

TEST = "tests/perf/test_prompts.py::test_red_black_tree"
OTHER_TEST = "tests/perf/test_prompts.py::test_short_factual[long-param/x]"
NOISE = (0.97, 1.0, 1.03, 0.99, 1.01)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def samples(e2e: float = 10.0, ttft: float = 0.1, tokens: int = 512, spec: int | None = None) -> list[dict[str, Any]]:
    """Raw sample dicts as a results file holds them (Sample.to_dict), with ~3% spread."""
    return [Sample(ttft=ttft * n, e2e=e2e * n, decode_time=e2e * n - ttft * n, completion_tokens=tokens,
                   prompt_tokens=40, chunks=tokens, spec_verify_ct=spec, spec_accept_length=None if spec is None
                   else tokens / spec).to_dict() for n in NOISE]


def cell(variant: str, test_id: str = TEST, *, raw: list[dict[str, Any]] | None = None,
         baselines: Mapping[str, float] | None = None, simulated: bool = True) -> dict[str, Any]:
    metrics = {name: {"baseline": value, "measured": value, "unit": "tok/s"} for name, value in
               (baselines or {}).items()}
    return {"test_id": test_id, "variant": variant, "verdict": "ok", "simulated": simulated, "metrics": metrics,
            "samples": samples() if raw is None else raw, "startup": None, "boot_seconds": None}


FACTS = StartupFacts(load_weight=20.0, kv_cache_allocation=2.5, cuda_graph={"decode": 6.0, "prefill": 3.0,
                                                                              "draft_decode": 0.0})


def results_doc(cells: Sequence[Mapping[str, Any]], *, generated_at: str = "2026-12-01T06:16:02+00:00",
                commit: str | None = "1410775f314d", simulated: bool = True,
                servers: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A results document as gate/results_file.py writes it (the fields the plots read)."""
    if servers is None:
        variants = list(dict.fromkeys(c["variant"] for c in cells))
        servers = {v: {"boot_seconds": 40.0, "startup": FACTS.to_dict(), "effective": None} for v in variants}
    machine = None if commit is None else {"commit": commit, "dirty": False, "host": "vm"}
    return {"schema_version": SCHEMA_VERSION, "generated_at": generated_at, "simulated": simulated,
            "environment": {"model": "Qwen/Qwen3-8B"}, "machine": machine, "servers": dict(servers),
            "cells": list(cells), "errored": [], "baselines": None}


def level(variant: str, streams: int, tok_s: float, *, ttft_p99: float | None = 0.2,
          goodput: float | None = None) -> dict[str, Any]:
    """A concurrency level's cell (`@cN` but for one stream) with its load and summaries records."""
    percentiles = {} if ttft_p99 is None else {"ttft": {"p50": 0.1, "p90": 0.15, "p99": ttft_p99},
                                               "tpot": {"p50": 0.02, "p90": 0.025, "p99": 0.03}}
    summaries = {"output_throughput": {"median": tok_s}}
    if goodput is not None:
        summaries["goodput"] = {"median": goodput}
    return {**cell(variant, TEST if streams == 1 else f"{TEST}@c{streams}"), "summaries": summaries,
            "load": {"streams": streams, "rounds": 3, "latency_percentiles": percentiles}}


def ab_doc() -> dict[str, Any]:
    return results_doc([cell("default", baselines={"output_throughput": 51.0}),
                        cell("prefill_graph", raw=samples(e2e=8.0)),
                        cell("sbo", raw=samples(spec=200)),
                        cell("broken", raw=[])])



def png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk (after checking the signature)."""
    head = path.read_bytes()[:24]
    assert head[:8] == PNG_MAGIC and head[12:16] == b"IHDR", f"{path} is not a PNG"
    width, height = struct.unpack(">II", head[16:24])
    return width, height
