"""The `.safetensors` file layout: a file's tensor names, dtypes and shapes read from its header alone (no weight is
read), and writing a valid file (the tests and the GPU validation make checkpoints with it).

The layout (huggingface/safetensors, README.md "Format" and safetensors/src/tensor.rs): 8 bytes N, an unsigned
little-endian 64-bit integer; N bytes of UTF-8 JSON beginning with `{`, an object of tensor name ->
`{"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}` (offsets into the byte buffer that follows the
header) plus an optional `__metadata__` object of strings, padded with spaces; then the byte buffer, which the
tensors cover in full. safetensors refuses a header over 100,000,000 bytes, and a tensor whose `end - begin` is not
its element count x its dtype's size.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_sglang_perf.errors import SGLangPerfError

DTYPE_BITS: Mapping[str, int] = {
    "BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8,
    "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32,
    "F32": 32, "C64": 64, "F64": 64, "I64": 64, "U64": 64,
}
"""Every dtype of safetensors' `Dtype` enum (safetensors/src/tensor.rs, `Dtype::bitsize`), in bits per element."""
DTYPE_BYTES: Mapping[str, float] = {name: bits / 8 for name, bits in DTYPE_BITS.items()}
"""Bytes per element; the sub-byte MX formats (F4, F6_*) are fractions."""
MAX_HEADER_BYTES = 100_000_000
"""safetensors' `MAX_HEADER_SIZE`: a larger header is not a safetensors file."""
METADATA_KEY = "__metadata__"
_LENGTH = struct.Struct("<Q")


class CheckpointError(SGLangPerfError, ValueError):
    """A checkpoint the plugin cannot read: a malformed `.safetensors` header, a shard its index names but the folder
    lacks; the message names the file and what is wrong."""


@dataclass(frozen=True)
class TensorInfo:
    dtype: str
    """The safetensors dtype string ("BF16", "F8_E4M3", "I32", ...)."""
    shape: tuple[int, ...]

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """The bytes the tensor takes in the file (and, unpacked as stored, in GPU memory)."""
        return self.numel * DTYPE_BITS[self.dtype] // 8


def read_header(path: Path) -> dict[str, TensorInfo]:
    """Every tensor of a `.safetensors` file, from its header; CheckpointError naming the file when the file is not
    a valid safetensors file (bad length, bad JSON, an unknown dtype, offsets that disagree with a shape, or a
    file shorter than its header says: an interrupted download)."""
    header, data_size = _read_raw_header(path)
    tensors: dict[str, TensorInfo] = {}
    data_end = 0
    for name, entry in header.items():
        if name == METADATA_KEY:
            continue
        info, end = _tensor_entry(path, name, entry)
        tensors[name] = info
        data_end = max(data_end, end)
    if data_end > data_size:
        raise CheckpointError(
            f"{path} is truncated: its header places tensor data up to byte {data_end:,} of the data section, but "
            f"the file holds only {data_size:,} bytes of data; the download was probably interrupted: download the "
            "file again")
    return tensors


def write_safetensors(path: Path, tensors: Mapping[str, tuple[str, tuple[int, ...]]],
                      data: Callable[[str, int], bytes] | None = None) -> None:
    """Write a valid `.safetensors` file holding `tensors` (name -> (dtype, shape)): widest dtype first, as
    safetensors orders them, so that every tensor's data is aligned to its element size (the order given otherwise).

    With `data` None the data section is zero-filled by extending the file (sparse on Linux file systems): a
    multi-GB checkpoint costs no time and no disk. Else `data(name, nbytes)` gives each tensor's bytes."""
    tensors = dict(sorted(tensors.items(), key=lambda item: -DTYPE_BITS.get(item[1][0], 0)))
    entries: dict[str, Any] = {METADATA_KEY: {"format": "pt"}}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        nbytes = _checked(path, name, dtype, shape).nbytes
        entries[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    header = json.dumps(entries, separators=(",", ":")).encode()
    header += b" " * (-len(header) % 8)
    with path.open("wb") as file:
        file.write(_LENGTH.pack(len(header)) + header)
        if data is None:
            file.truncate(_LENGTH.size + len(header) + offset)
            return
        for name, (dtype, shape) in tensors.items():
            _write_tensor(file, path, name, TensorInfo(dtype, tuple(shape)).nbytes, data)


def _write_tensor(file: Any, path: Path, name: str, nbytes: int, data: Callable[[str, int], bytes]) -> None:
    payload = data(name, nbytes)
    if len(payload) != nbytes:
        raise CheckpointError(f"{path}: the data given for tensor '{name}' is {len(payload):,} bytes; its dtype "
                              f"and shape need {nbytes:,}")
    file.write(payload)


def _checked(path: Path, name: str, dtype: str, shape: tuple[int, ...]) -> TensorInfo:
    problem = _problem(name, dtype, shape)
    if problem:
        raise CheckpointError(f"{path}: {problem}")
    return TensorInfo(dtype, tuple(shape))


def _problem(name: str, dtype: str, shape: tuple[Any, ...]) -> str | None:
    """What makes (dtype, shape) not a safetensors tensor, or None."""
    if dtype not in DTYPE_BITS:
        return f"tensor '{name}' has dtype '{dtype}', which safetensors does not define ({', '.join(DTYPE_BITS)})"
    if any(not isinstance(size, int) or isinstance(size, bool) or size < 0 for size in shape):
        return f"tensor '{name}' has shape {list(shape)}; a shape is a list of sizes >= 0"
    if math.prod(shape) * DTYPE_BITS[dtype] % 8:
        return f"tensor '{name}' ({dtype}, shape {list(shape)}) does not fill whole bytes"
    return None


def _read_raw_header(path: Path) -> tuple[dict[str, Any], int]:
    """The header object and the size of the data section after it."""
    try:
        with path.open("rb") as file:
            size = path.stat().st_size
            prefix = file.read(_LENGTH.size)
            if len(prefix) < _LENGTH.size:
                raise _malformed(path, f"it is {size} bytes long, shorter than the 8-byte header length")
            (length,) = _LENGTH.unpack(prefix)
            if length > MAX_HEADER_BYTES or _LENGTH.size + length > size:
                raise _malformed(path, f"its first 8 bytes give a header of {length:,} bytes, but the file is "
                                       f"{size:,} bytes long")
            text = file.read(length)
    except OSError as exc:
        raise CheckpointError(f"{path}: can't read it ({exc})") from None
    return _parse_header(path, text), size - _LENGTH.size - length


def _parse_header(path: Path, text: bytes) -> dict[str, Any]:
    try:
        header = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise _malformed(path, f"its header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise _malformed(path, "its header is not a JSON object")
    return header


def _tensor_entry(path: Path, name: str, entry: Any) -> tuple[TensorInfo, int]:
    """The tensor and the end of its data; its offsets must span exactly its bytes."""
    if not isinstance(entry, dict) or not isinstance(entry.get("dtype"), str):
        raise _malformed(path, f"tensor '{name}' has no dtype in its header entry {json.dumps(entry)[:80]}")
    shape, offsets = entry.get("shape"), entry.get("data_offsets")
    if not isinstance(shape, list) or not isinstance(offsets, list) or not _ints(offsets) or len(offsets) != 2:
        raise _malformed(path, f"tensor '{name}' lacks a shape list or two data_offsets: {json.dumps(entry)[:80]}")
    problem = _problem(name, entry["dtype"], tuple(shape))
    if problem:
        raise _malformed(path, problem)
    info = TensorInfo(entry["dtype"], tuple(shape))
    begin, end = offsets
    if begin < 0 or end - begin != info.nbytes:
        raise _malformed(path, f"tensor '{name}' ({info.dtype}, shape {list(shape)}) needs {info.nbytes:,} bytes, "
                               f"but its data_offsets [{begin}, {end}] span {end - begin:,}")
    return info, end


def _ints(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)


def _malformed(path: Path, what: str) -> CheckpointError:
    return CheckpointError(f"{path} is not a valid safetensors file: {what}; download the file again, or remove it "
                           "from the model folder if it is not part of the checkpoint")
