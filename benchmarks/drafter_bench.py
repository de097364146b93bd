"""Time `patcher drafter check` and `fix` on a Kimi-K2.5-sized EAGLE-3 drafter (~4.7 GB).

The drafter is a sparse file (a real header, then ftruncate), so building it costs no
disk and no minutes; check reads only headers either way. fix is timed against `cp` of
the same folder: `cp -r` (sparse-aware, like fix's copy) and `cp -r --sparse=never`
(what copying a real, dense drafter costs in bytes written). fix additionally hashes
every tensor on both sides (sha256) and fsyncs; that is the price of "bytes identical".

Run: python benchmarks/drafter_bench.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from patcher.cli import drafter_cli as cli
from patcher.cli.main import run_drafter
from patcher.drafter.safetensors_header import DTYPE_BITS, TensorInfo, encode_header

HIDDEN, VOCAB, DRAFT_VOCAB, LAYERS = 7168, 163840, 32000, 61
HEADS, KV_HEADS, HEAD_DIM, INTERMEDIATE = 56, 8, 128, 28672


def drafter_shapes() -> list[tuple[str, str, tuple[int, ...]]]:
    p = "layers.0."
    h = HIDDEN
    return [
        ("embed_tokens.weight", "BF16", (VOCAB, h)),
        ("fc.weight", "BF16", (h, 3 * h)),
        (p + "self_attn.q_proj.weight", "BF16", (HEADS * HEAD_DIM, 2 * h)),
        (p + "self_attn.k_proj.weight", "BF16", (KV_HEADS * HEAD_DIM, 2 * h)),
        (p + "self_attn.v_proj.weight", "BF16", (KV_HEADS * HEAD_DIM, 2 * h)),
        (p + "self_attn.o_proj.weight", "BF16", (h, HEADS * HEAD_DIM)),
        (p + "mlp.gate_proj.weight", "BF16", (INTERMEDIATE, h)),
        (p + "mlp.up_proj.weight", "BF16", (INTERMEDIATE, h)),
        (p + "mlp.down_proj.weight", "BF16", (h, INTERMEDIATE)),
        (p + "input_layernorm.weight", "BF16", (h,)),
        (p + "post_attention_layernorm.weight", "BF16", (h,)),
        (p + "hidden_norm.weight", "BF16", (h,)),
        ("norm.weight", "BF16", (h,)),
        ("lm_head.weight", "BF16", (DRAFT_VOCAB, h)),
        ("d2t", "I64", (DRAFT_VOCAB,)),
        ("t2d", "BOOL", (VOCAB,)),
    ]


def build(root: Path) -> tuple[Path, Path]:
    drafter = root / "drafter"
    drafter.mkdir()
    infos, offset = [], 0
    for name, dtype, shape in drafter_shapes():
        n = math.prod(shape) * DTYPE_BITS[dtype] // 8
        infos.append(TensorInfo(name, dtype, shape, offset, offset + n))
        offset += n
    header = encode_header(infos, {"format": "pt"})
    with open(drafter / "model.safetensors", "wb") as fh:
        fh.write(header)
        fh.truncate(len(header) + offset)  # sparse: no data blocks written
    layer = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": HIDDEN,
             "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM,
             "intermediate_size": INTERMEDIATE, "num_hidden_layers": 1, "vocab_size": VOCAB,
             "max_position_embeddings": 262144, "rope_theta": 50000.0}
    (drafter / "config.json").write_text(json.dumps({
        "architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3",
        "speculators_config": {"algorithm": "eagle3"}, "transformer_layer_config": layer,
        "draft_vocab_size": DRAFT_VOCAB, "norm_before_residual": False, "torch_dtype": "bfloat16",
        "eagle_aux_hidden_state_layer_ids": [2, 30, 58]}))
    target = root / "kimi"
    target.mkdir()
    (target / "config.json").write_text(json.dumps({"model_type": "kimi_k25", "text_config": {
        "model_type": "kimi_k2", "hidden_size": HIDDEN, "num_hidden_layers": LAYERS, "vocab_size": VOCAB,
        "max_position_embeddings": 262144, "rope_theta": 50000.0}}))
    return drafter, target


def run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers(dest="command"))
    return run_drafter(parser.parse_args(["drafter", *argv]), io.StringIO(), io.StringIO(), lambda *_: None)


def timed(fn, repeat: int) -> float:
    best = math.inf
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keep", type=Path, help="build under this folder and keep it")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="drafter-bench-", dir=args.keep))
    try:
        drafter, target = build(root)
        size = (drafter / "model.safetensors").stat().st_size
        print(f"drafter: {size / 1e9:.2f} GB ({size} bytes), sparse")
        engine = ["--engine", "sglang", "--engine-version", "0.5.11"]
        check_argv = ["check", str(drafter), "--target", str(target), *engine,
                      "--flags=--speculative-algorithm EAGLE3"]
        assert run_cli(check_argv) == 1  # speculators config + layers.0 keys on 0.5.11: problems expected
        t_check = timed(lambda: run_cli(check_argv), 10)
        t_check_proc = timed(lambda: subprocess.run(
            [sys.executable, "-c", ("import sys; from benchmarks.drafter_bench import run_cli; "
             f"sys.exit(run_cli({check_argv!r}))")], check=False, cwd=Path(__file__).resolve().parents[1]), 3)

        out = root / "out"

        def do_fix() -> None:
            shutil.rmtree(out, ignore_errors=True)
            assert run_cli(["fix", str(drafter), "--out", str(out), "--target", str(target), *engine]) == 0

        def do_cp(*extra: str) -> None:
            shutil.rmtree(out, ignore_errors=True)
            subprocess.run(["cp", "-r", *extra, str(drafter), str(out)], check=True)

        t_fix = timed(do_fix, args.repeat)
        t_cp = timed(do_cp, args.repeat)
        t_cp_dense = timed(lambda: do_cp("--sparse=never"), 1)
        shutil.rmtree(out, ignore_errors=True)
        print(f"check (in process, best of 10): {t_check * 1000:8.1f} ms")
        print(f"check (new interpreter, best of 3): {t_check_proc * 1000:8.1f} ms")
        print(f"fix   (best of {args.repeat}):         {t_fix:8.2f} s   rename + config + sha256 of "
              f"{2 * size / 1e9:.1f} GB read back")
        print(f"cp -r (sparse-aware, best of {args.repeat}): {t_cp:8.2f} s   -> fix / cp = {t_fix / t_cp:.1f}x")
        print(f"cp -r --sparse=never (dense):   {t_cp_dense:8.2f} s   -> fix / cp = {t_fix / t_cp_dense:.2f}x")
        print(f"cpus: {os.cpu_count()}")
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
