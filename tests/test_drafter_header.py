"""The strict safetensors header reader against files written by the real `safetensors`."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors import safe_open
from safetensors.numpy import save_file

from patcher.drafter.key_names import DECODER_PARTS, DecoderKey, decoder_key, rename
from patcher.drafter.safetensors_header import MAX_HEADER_BYTES, TensorInfo, encode_header, read_header
from patcher.errors import DrafterInputError
from tests.support.tiers import examples


def _sample(path: Path) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    tensors = {
        "fc.weight": rng.standard_normal((8, 24)).astype(np.float16),
        "d2t": np.arange(16, dtype=np.int64),
        "t2d": rng.integers(0, 2, 64).astype(bool),
        "empty": np.zeros((0, 3), dtype=np.float32),
    }
    save_file(tensors, str(path), metadata={"format": "pt"})
    return tensors


def _raw(header: dict | bytes, data: bytes, declared: int | None = None) -> bytes:
    body = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(body) if declared is None else declared) + body + data


def _error(path: Path) -> DrafterInputError:
    with pytest.raises(DrafterInputError) as info:
        read_header(path)
    return info.value


def test_offsets_point_at_the_bytes_safetensors_wrote(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    tensors = _sample(path)
    header = read_header(path)
    assert header.metadata == {"format": "pt"}
    assert set(header.tensors) == set(tensors)
    raw = path.read_bytes()
    for name, array in tensors.items():
        info = header.tensors[name]
        assert info.shape == array.shape
        assert raw[header.data_start + info.begin: header.data_start + info.end] == array.tobytes()
    assert header.tensors["d2t"].dtype == "I64" and header.tensors["t2d"].dtype == "BOOL"


def test_encoded_header_is_read_back_by_safetensors(tmp_path: Path) -> None:
    src = tmp_path / "a.safetensors"
    tensors = _sample(src)
    old = read_header(src)
    renamed = [TensorInfo("x." + t.name, t.dtype, t.shape, t.begin, t.end) for t in old.tensors.values()]
    new = encode_header(renamed, old.metadata)
    assert len(new) % 8 == 0  # alignment of the data section, like the reference writer
    dst = tmp_path / "b.safetensors"
    dst.write_bytes(new + src.read_bytes()[old.data_start:])
    with safe_open(str(dst), framework="numpy") as f:
        assert sorted(f.keys()) == sorted("x." + n for n in tensors)
        for name, array in tensors.items():
            assert np.array_equal(f.get_tensor("x." + name), array)


def test_truncated_file_names_the_tensor_past_the_end(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    _sample(path)
    full = path.read_bytes()
    last = max(read_header(path).tensors.values(), key=lambda t: t.end)
    path.write_bytes(full[:-10])
    header_len = struct.unpack("<Q", full[:8])[0]
    data_size = len(full) - 8 - header_len - 10
    err = _error(path)
    assert err.lines() == [
        f"error: {path}: tensor {last.name!r} lies past the end of the file",
        f"  wanted: data_offsets within the {data_size}-byte data section",
        f"  found:  [{last.begin}, {last.end}]",
        "  hint:   the file is truncated (an interrupted download or copy?); re-download it",
    ]


def test_bad_json(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    path.write_bytes(_raw(b'{"a": {"dtype": "F16", ', b""))
    err = _error(path)
    assert err.what == f"{path}: safetensors header is not valid JSON"
    assert err.wanted == "a UTF-8 JSON object after the 8-byte length"
    assert err.found.startswith("Expecting property name enclosed in double quotes")


def test_offsets_past_the_end_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    path.write_bytes(_raw({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, b"\0" * 8))
    err = _error(path)
    assert err.what == f"{path}: tensor 'w' lies past the end of the file"
    assert (err.wanted, err.found) == ("data_offsets within the 8-byte data section", "[0, 16]")


@pytest.mark.parametrize("declared", [MAX_HEADER_BYTES + 1, 2**64 - 1])
def test_huge_declared_header_length(tmp_path: Path, declared: int) -> None:
    path = tmp_path / "m.safetensors"
    path.write_bytes(_raw(b"{}", b"", declared=declared))
    err = _error(path)
    assert err.lines() == [
        f"error: {path}: safetensors header length is impossible",
        "  wanted: a header length of at most 100000000 bytes that fits in the file (10 bytes)",
        f"  found:  {declared} bytes declared",
        "  hint:   the file is damaged or not a safetensors file; re-download or re-export it",
    ]


def test_header_length_beyond_a_small_file(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    path.write_bytes(_raw(b"{}", b"", declared=1000))
    assert _error(path).found == "1000 bytes declared"


@pytest.mark.parametrize(
    ("header", "data", "what", "found"),
    [
        ({"a": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]},
          "b": {"dtype": "F16", "shape": [2], "data_offsets": [2, 6]}}, b"\0" * 6, "tensors overlap", "it starts at 2"),
        ({"a": {"dtype": "F16", "shape": [2], "data_offsets": [4, 8]}}, b"\0" * 8,
         "data section has a hole", "it starts at 4"),
        ({"a": {"dtype": "F16", "shape": [3], "data_offsets": [0, 4]}}, b"\0" * 4,
         "tensor 'a' size does not match its dtype and shape", "4 bytes"),
        ({"a": {"dtype": "Q4", "shape": [2], "data_offsets": [0, 1]}}, b"\0",
         "tensor 'a' has an unknown dtype", "'Q4'"),
        ({"a": {"dtype": "F16", "shape": [-1], "data_offsets": [0, 2]}}, b"\0" * 2,
         "tensor 'a' has an invalid shape", "[-1]"),
        ({"a": {"dtype": "F16", "shape": [1], "data_offsets": [2, 0]}}, b"\0" * 2,
         "tensor 'a' has invalid data_offsets", "[2, 0]"),
        ({"a": {"dtype": "F16", "shape": [1], "data_offsets": [0, 2]}}, b"\0" * 4,
         "data section size does not match the header", "4 bytes"),
        ([1, 2], b"", "safetensors header is not a JSON object", "list"),
        ({"__metadata__": {"k": 1}}, b"", "__metadata__ is not a map of strings", '{"k": 1}'),
    ],
)
def test_invalid_headers(tmp_path: Path, header, data: bytes, what: str, found: str) -> None:
    path = tmp_path / "m.safetensors"
    path.write_bytes(_raw(header, data))
    err = _error(path)
    assert (err.what, err.found) == (f"{path}: {what}", found)
    assert err.exit_code == 2


def test_duplicate_tensor_name(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    entry = '{"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}'
    path.write_bytes(_raw(f'{{"a": {entry}, "a": {entry}}}'.encode(), b"\0"))
    err = _error(path)
    assert err.what == f"{path}: safetensors header is not valid JSON"
    assert err.found == "duplicate name 'a'"


def test_file_shorter_than_the_length_field(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    path.write_bytes(b"\1\0\0")
    assert _error(path).what == f"{path}: file too short for a safetensors header"


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_damage_is_rejected_cleanly_or_read_consistently(tmp_path: Path, data: st.DataObject) -> None:
    path = tmp_path / "fuzz.safetensors"
    _sample(path)
    raw = bytearray(path.read_bytes())
    cut = data.draw(st.integers(0, len(raw)))
    for _ in range(data.draw(st.integers(0, 4))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    damaged = tmp_path / "damaged.safetensors"
    damaged.write_bytes(bytes(raw[:cut]))
    try:
        header = read_header(damaged)
    except DrafterInputError as exc:
        assert exc.lines()[0].startswith(f"error: {damaged}: ")
        return
    # Whatever we accept must tile the data section exactly, like the reference reader demands.
    spans = sorted((t.begin, t.end) for t in header.tensors.values())
    assert sum(e - b for b, e in spans) == header.data_size


@given(part=st.sampled_from(sorted(DECODER_PARTS)), model=st.booleans())
def test_rename_round_trips_and_touches_only_the_decoder(part: str, model: bool) -> None:
    lead = "model." if model else ""
    name = f"{lead}layers.0.{part}"
    moved = rename(name, "layers.0.", "midlayer.")
    assert moved == f"{lead}midlayer.{part}"
    assert rename(moved, "midlayer.", "layers.0.") == name
    assert decoder_key(moved) == DecoderKey("midlayer.", 0, part)
    assert decoder_key(name) == DecoderKey("layers.0.", 0, part)
    assert rename(f"{lead}lm_head.weight", "layers.0.", "midlayer.") == f"{lead}lm_head.weight"
