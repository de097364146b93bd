"""The GPU doctor harness's judgement of a row (benchmarks/gpu_doctor.py), on rows it recorded on a
GPU: an engine that stopped for the host's reasons says nothing about doctor's verdict."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROOF = ROOT / "docs" / "gpu-proof"
_spec = importlib.util.spec_from_file_location("gpu_doctor", ROOT / "benchmarks" / "gpu_doctor.py")
gpu_doctor = importlib.util.module_from_spec(_spec)
sys.modules["gpu_doctor"] = gpu_doctor
_spec.loader.exec_module(gpu_doctor)


def _rows(name: str) -> dict[str, dict]:
    return {row["name"]: row for row in json.loads((PROOF / name).read_text())}


def test_an_engine_out_of_gpu_memory_is_void_not_a_refusal():
    # 7 December, call 1: two engines side by side; the second stopped on memory the first held.
    crowded = _rows("sglang-0.5.13.post1-doctor-mla-published.json")["MLA drafter missing kv_a_proj_with_mqa"]
    assert "Not enough memory" in crowded["truth"]
    assert gpu_doctor._host_failure(crowded["truth"], crowded["doctor"]["reasons"]) == "GPU memory another row held"


def test_rows_the_engine_judged_stay_judged():
    alone = _rows("sglang-0.5.13.post1-doctor-mla-rerun-published.json")["MLA drafter missing kv_a_proj_with_mqa"]
    ran = _rows("sglang-0.5.13.post1-doctor-mla-published.json")["MLA drafter"]
    refused = _rows("sglang-0.5.13.post1-doctor-mla-patched.json")["MLA drafter missing kv_a_proj_with_mqa"]
    for row in (alone, ran, refused):
        assert gpu_doctor._host_failure(row["truth"], row["doctor"]["reasons"]) == "", row["name"]
    fused = "model.midlayer.self_attn.fused_qkv_a_proj_with_mqa.weight"
    assert alone["engine_outcome"]["weights"]["unfilled"] == [fused]


def test_a_package_the_host_lacks_is_void():
    reasons = ["ModuleNotFoundError: No module named 'lazy_importer'"]
    assert gpu_doctor._host_failure("ran as trained", reasons) == "a package the host lacks"
