"""argparse `type=` callables named like SGLang's, so that argparse's error messages read the same.

argparse reports a failed conversion as `invalid <function name> value: 'x'`, or with the text of an
`ArgumentTypeError`; keeping SGLang's function names keeps those messages identical.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

import orjson

_SI = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_IEC = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)")

_CUDA_GRAPH_PHASE_KEYS: Mapping[str, tuple[str, ...]] = {
    "decode": ("backend", "max_bs", "bs"),
    "prefill": ("backend", "max_bs", "bs", "max_context_size", "full_prefill_max_req",
                "full_prefill_prefix_chunk_tokens", "max_seq_len"),
}


def human_readable_int(value: str) -> int:
    """`4096`, `25.6k` (SI, decimals allowed, exact) or `4Ki` (IEC, integers only)."""
    text = value.strip()
    match = _HUMAN_INT.fullmatch(text)
    if match is None:
        return _plain_int(text)
    number, suffix = match.groups()
    if suffix in _IEC:
        if "." in number:
            raise argparse.ArgumentTypeError(
                f"Decimals are not allowed with IEC suffixes like '{suffix}'. "
                f"Use an integer IEC value such as '{int(Decimal(number))}{suffix}', "
                f"or an SI value such as '{number}{suffix[0]}'.")
        return int(number) * _IEC[suffix]
    return int(Decimal(number) * _SI[suffix])


def _plain_int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"Invalid integer value: '{text}'. Use a plain integer, SI suffixes (1k, 1M), or IEC suffixes "
            "(1Ki, 1Mi). Suffixes are case-sensitive.") from None


def nullable_str(value: str) -> str | None:
    return None if not value or value == "None" else value


def loads(value: str) -> Any:
    return json.loads(value)


def json_list_type(value: str) -> Any:
    """Any JSON document, decoded by orjson as SGLang does (stricter than `json`: no NaN, no bare big ints)."""
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        raise argparse.ArgumentTypeError(
            f"Invalid JSON list: {value}. Please provide a valid JSON list.") from None


def parse_cuda_graph_backend_arg(value: str) -> str:
    if value == "tc_piecewise":
        raise argparse.ArgumentTypeError("tc_piecewise was removed; select breakable, full, or disabled")
    return value


def parse_cuda_graph_config_arg(value: str) -> dict[str, dict[str, Any]]:
    """JSON object phase -> settings, e.g. `{"decode": {"backend": "full", "max_bs": 256}}`."""
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"--cuda-graph-config must be JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise argparse.ArgumentTypeError(
            f"--cuda-graph-config must be a JSON object, got {type(parsed).__name__}")
    return {str(phase): _cuda_graph_phase(str(phase), settings) for phase, settings in parsed.items()}


def _cuda_graph_phase(phase: str, settings: Any) -> dict[str, Any]:
    if phase not in _CUDA_GRAPH_PHASE_KEYS:
        raise argparse.ArgumentTypeError(
            f"--cuda-graph-config: unknown phase '{phase}', expected one of {tuple(_CUDA_GRAPH_PHASE_KEYS)}")
    if not isinstance(settings, dict):
        raise argparse.ArgumentTypeError(
            f"--cuda-graph-config['{phase}'] must be a JSON object, got {type(settings).__name__}")
    if "backend" in settings:
        parse_cuda_graph_backend_arg(settings["backend"])
    allowed = _CUDA_GRAPH_PHASE_KEYS[phase]
    for key in settings:
        if key not in allowed:
            raise argparse.ArgumentTypeError(
                f"--cuda-graph-config['{phase}']: unknown key '{key}', expected one of {allowed}")
    return dict(settings)


CONVERTERS: Mapping[str, Callable[[str], Any]] = {
    "int": int,
    "float": float,
    "str": str,
    "loads": loads,
    "json_list_type": json_list_type,
    "human_readable_int": human_readable_int,
    "nullable_str": nullable_str,
    "parse_cuda_graph_backend_arg": parse_cuda_graph_backend_arg,
    "parse_cuda_graph_config_arg": parse_cuda_graph_config_arg,
}


def converter(type_name: str | None) -> Callable[[str], Any] | None:
    """The callable for a type name of the flag table; None stays None, unknown names read as str."""
    if type_name is None:
        return None
    return CONVERTERS.get(type_name, str)
