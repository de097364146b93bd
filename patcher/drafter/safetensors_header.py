"""A strict reader of safetensors headers that never touches tensor bytes.

Format: 8-byte little-endian header length N, then N bytes of JSON
``{"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}``,
then the data section; offsets are relative to the start of the data section.

Why our own reader: checking a 4.7 GB drafter must take milliseconds and must fail
loudly on a damaged file. The engines' loaders either crash deep in a server start or,
worse, read a damaged file differently; we reject everything the reference
implementation would reject (holes, overlaps, size mismatches, duplicate names) and a
few things it would only discover late (an absurd header length).
"""

from __future__ import annotations

import json
import math
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from patcher.errors import DrafterInputError

# A real drafter's header is a few kB; 100 MB is what the reference implementation
# allows too. Anything larger is a corrupt length field, and reading it would mean
# allocating whatever the file claims.
MAX_HEADER_BYTES = 100_000_000

# Bits per element. Sub-byte types (F4, F6) are packed; a tensor's span must still be a
# whole number of bytes.
DTYPE_BITS: dict[str, int] = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8,
    "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32,
    "I64": 64, "U64": 64, "F64": 64, "C64": 64,
    "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
}

_HINT_CORRUPT = "the file is damaged or not a safetensors file; re-download or re-export it"


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int  # relative to the data section
    end: int

    @property
    def nbytes(self) -> int:
        return self.end - self.begin


@dataclass(frozen=True)
class SafetensorsHeader:
    path: Path
    file_size: int
    data_start: int  # 8 + header length
    tensors: dict[str, TensorInfo]  # in header order
    metadata: dict[str, str] | None

    @property
    def data_size(self) -> int:
        return self.file_size - self.data_start


def _corrupt(path: Path, what: str, *, wanted: str, found: str, hint: str = _HINT_CORRUPT) -> DrafterInputError:
    return DrafterInputError(f"{path}: {what}", wanted=wanted, found=found, hint=hint)


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    # json.loads keeps the last of two equal names silently; two tensors with one name
    # would make "which one does the engine load" undefined.
    out: dict[str, object] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate name {key!r}")
        out[key] = value
    return out


def read_header(path: Path) -> SafetensorsHeader:
    """Parse and validate the header of one .safetensors file; raise DrafterInputError."""
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            file_size = os.fstat(fh.fileno()).st_size
            prefix = fh.read(8)
            if len(prefix) < 8:
                raise _corrupt(path, "file too short for a safetensors header",
                               wanted="at least 8 bytes (the header length)",
                               found=f"{file_size} bytes")
            (n,) = struct.unpack("<Q", prefix)
            if n > MAX_HEADER_BYTES or 8 + n > file_size:
                raise _corrupt(path, "safetensors header length is impossible",
                               wanted=f"a header length of at most {MAX_HEADER_BYTES} bytes "
                                      f"that fits in the file ({file_size} bytes)",
                               found=f"{n} bytes declared")
            raw = fh.read(n)
    except OSError as exc:
        raise DrafterInputError(f"{path}: cannot read", wanted="a readable .safetensors file",
                                found=exc.strerror or str(exc), hint="check the path and permissions") from None
    if len(raw) != n:  # the file shrank while we read it
        raise _corrupt(path, "file truncated inside the header", wanted=f"{n} header bytes", found=f"{len(raw)} bytes")
    try:
        parsed = json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicates)
    except (UnicodeDecodeError, ValueError) as exc:
        raise _corrupt(path, "safetensors header is not valid JSON",
                       wanted="a UTF-8 JSON object after the 8-byte length",
                       found=_short(str(exc))) from None
    if not isinstance(parsed, dict):
        raise _corrupt(path, "safetensors header is not a JSON object",
                       wanted="a JSON object", found=type(parsed).__name__)
    return _validate(path, file_size, 8 + n, parsed)


def _short(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _validate(path: Path, file_size: int, data_start: int, parsed: dict) -> SafetensorsHeader:
    data_size = file_size - data_start
    metadata = parsed.pop("__metadata__", None)
    if metadata is not None and not (
        isinstance(metadata, dict) and all(isinstance(v, str) for v in metadata.values())
    ):
        raise _corrupt(path, "__metadata__ is not a map of strings",
                       wanted='"__metadata__": {"key": "string", ...}', found=_short(json.dumps(metadata)))
    tensors: dict[str, TensorInfo] = {}
    for name, entry in parsed.items():
        tensors[name] = _tensor(path, name, entry, data_size)
    # Spans must tile the data section exactly: no overlap (two tensors sharing bytes),
    # no hole, nothing after the last tensor. A file that was cut short shows up here
    # as a span past the end.
    cursor = 0
    for info in sorted(tensors.values(), key=lambda t: (t.begin, t.end)):
        if info.begin != cursor:
            what = "tensors overlap" if info.begin < cursor else "data section has a hole"
            raise _corrupt(path, what, wanted=f"{info.name!r} to start at data offset {cursor}",
                           found=f"it starts at {info.begin}")
        cursor = info.end
    if cursor != data_size:
        raise _corrupt(path, "data section size does not match the header",
                       wanted=f"{cursor} data bytes after the header",
                       found=f"{data_size} bytes")
    return SafetensorsHeader(path=path, file_size=file_size, data_start=data_start,
                             tensors=tensors, metadata=metadata)


def _tensor(path: Path, name: str, entry: object, data_size: int) -> TensorInfo:
    if not isinstance(entry, dict):
        raise _corrupt(path, f"entry {name!r} is not an object",
                       wanted='{"dtype", "shape", "data_offsets"}', found=_short(json.dumps(entry)))
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if dtype not in DTYPE_BITS:
        raise _corrupt(path, f"tensor {name!r} has an unknown dtype",
                       wanted="one of " + ", ".join(DTYPE_BITS), found=repr(dtype))
    if not (isinstance(shape, list) and all(_is_uint(d) for d in shape)):
        raise _corrupt(path, f"tensor {name!r} has an invalid shape",
                       wanted="a list of non-negative integers", found=_short(repr(shape)))
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_uint(o) for o in offsets)
            and offsets[0] <= offsets[1]):
        raise _corrupt(path, f"tensor {name!r} has invalid data_offsets",
                       wanted="[begin, end] with 0 <= begin <= end", found=_short(repr(offsets)))
    begin, end = offsets
    if end > data_size:
        raise _corrupt(path, f"tensor {name!r} lies past the end of the file",
                       wanted=f"data_offsets within the {data_size}-byte data section",
                       found=f"[{begin}, {end}]",
                       hint="the file is truncated (an interrupted download or copy?); re-download it")
    bits = math.prod(shape) * DTYPE_BITS[dtype]
    if bits % 8 or bits // 8 != end - begin:
        raise _corrupt(path, f"tensor {name!r} size does not match its dtype and shape",
                       wanted=f"{bits / 8:g} bytes ({dtype} x {shape})", found=f"{end - begin} bytes")
    return TensorInfo(name=name, dtype=dtype, shape=tuple(shape), begin=begin, end=end)


def _is_uint(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def encode_header(tensors: list[TensorInfo], metadata: dict[str, str] | None) -> bytes:
    """Serialise a header (length prefix included), padded to 8 bytes like the reference
    writer so tensor data stays aligned. Offsets are written as given."""
    body: dict[str, object] = {}
    if metadata is not None:
        body["__metadata__"] = metadata
    for t in tensors:
        body[t.name] = {"dtype": t.dtype, "shape": list(t.shape), "data_offsets": [t.begin, t.end]}
    raw = json.dumps(body, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw
