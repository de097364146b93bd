"""`patcher drafter check|fix` on tiny synthetic drafters written with the real `safetensors`.

Sizes are scaled down from Kimi-K2.5 (hidden 7168 -> 8, vocab 163840 -> 64, draft vocab
32000 -> 16); the target keeps its 61 layers so aux layer ids are the real ones.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
from dataclasses import replace as replace_
from pathlib import Path

import numpy as np
import pytest
from packaging.version import Version
from safetensors.numpy import load_file, save_file

from patcher.cli import drafter_cli as cli
from patcher.cli.main import run_drafter
from patcher.drafter import facts, fix_copy
from patcher.release.release import Release, from_version

H = 8  # drafter hidden size
T = 8  # target hidden size
HEADS, KV, HEAD_DIM = 2, 1, 4
VOCAB, DRAFT_VOCAB = 64, 16
LAYERS = 61
AUX = [2, 30, 58]


def tensors(prefix: str = "layers.0.", fc_in: int = 3 * T, d2t: bool = True, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)

    def w(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float16)

    out = {
        "embed_tokens.weight": w(VOCAB, H),
        "fc.weight": w(H, fc_in),
        prefix + "self_attn.q_proj.weight": w(HEADS * HEAD_DIM, 2 * H),
        prefix + "self_attn.k_proj.weight": w(KV * HEAD_DIM, 2 * H),
        prefix + "self_attn.v_proj.weight": w(KV * HEAD_DIM, 2 * H),
        prefix + "self_attn.o_proj.weight": w(H, HEADS * HEAD_DIM),
        prefix + "mlp.gate_proj.weight": w(16, H),
        prefix + "mlp.up_proj.weight": w(16, H),
        prefix + "mlp.down_proj.weight": w(H, 16),
        prefix + "input_layernorm.weight": w(H),
        prefix + "post_attention_layernorm.weight": w(H),
        prefix + "hidden_norm.weight": w(H),
        "norm.weight": w(H),
        "lm_head.weight": w(DRAFT_VOCAB, H),
        "t2d": rng.integers(0, 2, VOCAB).astype(bool),
    }
    if d2t:
        out["d2t"] = rng.integers(0, VOCAB - DRAFT_VOCAB, DRAFT_VOCAB).astype(np.int64)
    return out


LLAMA_FIELDS = {
    "hidden_size": H, "num_attention_heads": HEADS, "num_key_value_heads": KV, "head_dim": HEAD_DIM,
    "intermediate_size": 16, "num_hidden_layers": 1, "vocab_size": VOCAB, "max_position_embeddings": 262144,
    "rope_theta": 50000.0, "rms_norm_eps": 1e-5, "torch_dtype": "float16",
}


def eagle3_config(aux: list[int] | None = AUX, use_aux: bool = True) -> dict:
    eagle: dict = {"use_aux_hidden_state": use_aux}
    if aux is not None:
        eagle["eagle_aux_hidden_state_layer_ids"] = aux
    return {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", **LLAMA_FIELDS,
            "draft_vocab_size": DRAFT_VOCAB, "target_hidden_size": T, "eagle_config": eagle}


def speculators_config(aux: list[int] | None = AUX) -> dict:
    layer = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", **LLAMA_FIELDS}
    del layer["torch_dtype"]
    cfg = {
        "architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3",
        "speculators_version": "0.2.0", "speculators_config": {
            "algorithm": "eagle3", "default_proposal_method": "greedy",
            "verifier": {"architectures": ["KimiK25ForConditionalGeneration"], "name_or_path": "kimi"}},
        "transformer_layer_config": layer, "draft_vocab_size": DRAFT_VOCAB, "norm_before_residual": False,
        "target_hidden_size": None, "torch_dtype": "float16",
    }
    if aux is not None:
        cfg["eagle_aux_hidden_state_layer_ids"] = aux
    return cfg


def make_drafter(root: Path, name: str = "drafter", *, config: dict | None = None, sharded: bool = False,
                 **kw) -> Path:
    folder = root / name
    folder.mkdir()
    data = tensors(**kw)
    (folder / "config.json").write_text(json.dumps(config if config is not None else speculators_config()))
    if not sharded:
        save_file(data, str(folder / "model.safetensors"), metadata={"format": "pt"})
        return folder
    names = sorted(data)
    shards = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    weight_map = {}
    for fname, keys in shards.items():
        save_file({k: data[k] for k in keys}, str(folder / fname), metadata={"format": "pt"})
        weight_map.update({k: fname for k in keys})
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map}))
    return folder


def make_target(root: Path) -> Path:
    folder = root / "kimi"
    folder.mkdir()
    text = {"model_type": "kimi_k2", "hidden_size": T, "num_hidden_layers": LAYERS, "vocab_size": VOCAB,
            "max_position_embeddings": 262144, "rope_theta": 50000.0, "num_attention_heads": 64}
    (folder / "config.json").write_text(json.dumps(
        {"architectures": ["KimiK25ForConditionalGeneration"], "model_type": "kimi_k25", "text_config": text}))
    return folder


def no_engine(_engine: str | None, _python: str | None = None, _site: Path | None = None) -> None:
    return None


def patched(name: str, version: str, keys_patch: str = "applied", source: str = "installed") -> Release:
    """A release as the manifests declare it, after 'patcher apply' (every pending family
    applied), except the drafter-keys family, which is in state ``keys_patch`` when it has a variant."""
    release = from_version(name, Version(version), source=source)

    def state(f):
        if f.state != "pending":
            return f
        wanted = keys_patch if f.family.name == facts.KEYS_FAMILY else "applied"
        return replace_(f, state=wanted)
    return replace_(release, families=tuple(state(f) for f in release.families))


def installed(name: str, version: str, keys_patch: str = "applied"):
    def detect(engine: str | None, python: str | None = None, site: Path | None = None):
        return patched(name, version, keys_patch) if engine in (None, name) else None
    return detect


def run(argv: list[str], detect=no_engine) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="patcher")
    cli.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["drafter", *argv])
    out, err = io.StringIO(), io.StringIO()
    code = run_drafter(args, out, err, detect)
    return code, out.getvalue(), err.getvalue()


def check_json(argv: list[str], detect=no_engine) -> tuple[int, dict]:
    code, out, err = run(["check", *argv, "--json"], detect)
    assert err == ""
    doc = json.loads(out)
    assert doc["exit"] == code
    return code, doc


def by_code(doc: dict) -> dict[str, dict]:
    return {f["code"]: f for f in doc["findings"]}


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


# --- key names, from the eagle3-drafter-keys family state ------------------------------

@pytest.mark.parametrize(("engine", "version", "patch", "accepted"), [
    ("vllm", "0.9.0", None, {"midlayer.", "layers.0."}),
    ("vllm", "0.33.0", None, {"midlayer.", "layers.0."}),
    ("sglang", "0.5.1", None, {"midlayer."}),
    ("sglang", "0.5.11", "pending", {"midlayer."}),
    ("sglang", "0.5.11", "applied", {"midlayer.", "layers.0."}),
    ("sglang", "0.5.12rc1", None, {"midlayer."}),  # a pre-release of 0.5.12 is still before it
    ("sglang", "0.5.12", None, {"midlayer.", "layers.0."}),
    ("sglang", "0.5.23", None, {"midlayer.", "layers.0."}),
])
def test_loader_accepts(engine: str, version: str, patch: str | None, accepted: set[str]) -> None:
    release = patched(engine, version, patch) if patch else from_version(engine, Version(version))
    assert facts.loader_accepts(release) == frozenset(accepted)


# --- check ---------------------------------------------------------------------------------

def test_without_the_loader_the_keys_are_not_judged(tmp_path: Path) -> None:
    """A release named by its state alone (no interpreter to run its loader): what the name rules
    expect is a hint, and whether the keys load is "cannot tell", never ok (issue 52)."""
    drafter, target = make_drafter(tmp_path, config=speculators_config(aux=None)), make_target(tmp_path)
    code, doc = check_json([str(drafter), "--target", str(target)], installed("sglang", "0.5.11", "pending"))
    assert code == 1
    f = by_code(doc)
    assert f["keys.decoder_prefix"] == {
        "level": "hint", "code": "keys.decoder_prefix",
        "message": "expected from the key names, not asked of the loader: sglang 0.5.11 skips all 10 layers.0.* "
                   "tensors without a message: the decoder layer stays randomly initialised and nothing is accepted",
        "wanted": "midlayer.* tensors", "found": "10 layers.0.* tensors",
        "hint": "convert: patcher drafter fix DRAFTER --out NEW --engine sglang --engine-version 0.5.11  "
                "(or apply sglang/eagle3-drafter-keys: patcher apply --engine sglang)"}
    assert (f["keys.load"]["level"], f["keys.load"]["found"]) == (
        "unknown", "sglang 0.5.11 is named by its version only; its loader runs only where it is installed")
    assert f["config.format"]["level"] == "problem"
    assert f["config.format"]["message"] == ("speculators-format config that sglang 0.5.11 cannot read "
                                             "(SGLang has no reader for it)")
    engine = doc["engine"]
    assert (engine["name"], engine["version"], engine["source"], engine["site"], engine["python"]) == (
        "sglang", "0.5.11", "installed", None, None)
    assert engine["families"]["sglang/eagle3-drafter-keys"] == "pending"
    assert engine["families"]["sglang/k25-aux-capture"] == "upstream"
    # The other problem: the keys family is pending, as verify says.
    assert sorted(c for c, x in f.items() if x["level"] == "problem") == ["config.format", "setup.eagle3-drafter-keys"]


def test_a_name_rule_that_finds_nothing_wrong_says_nothing(tmp_path: Path) -> None:
    """With our keys patch applied the name rule expects layers.0.* to load; without the loader
    that is no ok line (only the rule's warnings are shown, as hints)."""
    drafter = make_drafter(tmp_path)
    _, doc = check_json([str(drafter)], installed("sglang", "0.5.11", "applied"))
    assert "keys.decoder_prefix" not in by_code(doc)
    assert by_code(doc)["keys.load"]["level"] == "unknown"


def test_engine_version_flag_overrides_detection_and_drops_its_patch_state(tmp_path: Path) -> None:
    drafter = make_drafter(tmp_path)
    _, doc = check_json([str(drafter), "--engine-version", "0.5.10"], installed("sglang", "0.5.11", "applied"))
    assert (doc["engine"]["version"], doc["engine"]["source"]) == ("0.5.10", "flags")
    assert doc["engine"]["families"]["sglang/eagle3-drafter-keys"] == "pending"  # as published, not as installed
    assert by_code(doc)["keys.decoder_prefix"]["level"] == "hint"  # the rule for 0.5.10 as published


def test_good_midlayer_drafter_on_sglang_0_5_11_has_only_its_keys_unproven(tmp_path: Path) -> None:
    drafter = make_drafter(tmp_path, config=eagle3_config(aux=None), prefix="midlayer.")
    code, out, err = run(["check", str(drafter), "--target", str(make_target(tmp_path)),
                          "--flags", "--speculative-algorithm EAGLE3 --tp 8"], installed("sglang", "0.5.11"))
    assert (code, err) == (1, "")
    assert "PROBLEM" not in out
    assert "  UNKNOWN  keys.load: what the release's loader does with this checkpoint was not asked" in out
    assert re.search(r"\nresult:  0 problem\(s\), 1 unknown, 0 hint\(s\), \d+ ok\n$", out)


@pytest.mark.parametrize(("version", "level"), [("0.10.0", "problem"), ("0.10.1.1", "ok")])
def test_vllm_reads_speculators_config_from_0_10_1_1(tmp_path: Path, version: str, level: str) -> None:
    _, doc = check_json([str(make_drafter(tmp_path)), "--engine", "vllm", "--engine-version", version])
    assert by_code(doc)["config.format"]["level"] == level
    assert by_code(doc)["keys.load"]["level"] == "unknown"  # vllm is named, not installed here


def test_one_layer_fc_is_a_problem(tmp_path: Path) -> None:
    drafter = make_drafter(tmp_path, config=eagle3_config(), fc_in=T)
    code, doc = check_json([str(drafter), "--target", str(make_target(tmp_path)), "--engine", "vllm",
                            "--engine-version", "0.18.0"])
    assert code == 1
    assert by_code(doc)["fc.shape"] == {
        "level": "problem", "code": "fc.shape",
        "message": "fc.weight was trained on 1 layer of 8 features; EAGLE-3 feeds it 3 x 8 = 24 (an EAGLE-1 style fc)",
        "wanted": "[8, 24] (3 aux layers x 8)", "found": "[8, 8] (1 x 8)",
        "hint": "the config's eagle_aux_hidden_state_layer_ids must list as many layers as fc was trained on"}


def test_three_layer_fc_is_ok(tmp_path: Path) -> None:
    _, doc = check_json([str(make_drafter(tmp_path)), "--target", str(make_target(tmp_path))])
    assert by_code(doc)["fc.shape"]["message"] == "fc.weight [8, 24] fuses 3 aux layers x 8 (layers 2, 30, 58)"


def test_missing_d2t_is_a_problem(tmp_path: Path) -> None:
    code, doc = check_json([str(make_drafter(tmp_path, d2t=False)), "--target", str(make_target(tmp_path))])
    assert code == 1
    f = by_code(doc)["vocab.d2t"]
    assert (f["level"], f["message"], f["wanted"]) == (
        "problem", ("no d2t although the draft vocab (16) is smaller than the target's (64): draft token i "
                   "would be taken as target token i"), "d2t [16]")


def test_use_aux_hidden_state_false_is_a_problem(tmp_path: Path) -> None:
    drafter = make_drafter(tmp_path, config=eagle3_config(use_aux=False), prefix="midlayer.")
    code, doc = check_json([str(drafter)])
    assert code == 1
    assert by_code(doc)["config.use_aux_hidden_state"]["found"] == '"use_aux_hidden_state": false'


def test_aux_ids_outside_the_target(tmp_path: Path) -> None:
    drafter = make_drafter(tmp_path, config=speculators_config(aux=[2, 30, 61]))
    _, doc = check_json([str(drafter), "--target", str(make_target(tmp_path))])
    f = by_code(doc)["aux.layer_ids"]
    assert (f["level"], f["message"]) == ("problem", "aux layer ids [2, 30, 61] reach outside the target's 61 layers")


@pytest.mark.parametrize(("engine", "flags", "level", "wanted"), [
    ("sglang", "--speculative-algorithm EAGLE --speculative-num-steps 3", "problem",
     "--speculative-algorithm EAGLE3"),
    ("sglang", "--speculative-algorithm=eagle3", "ok", ""),
    ("vllm", """--speculative-config '{"method": "eagle", "num_speculative_tokens": 3}'""", "problem",
     '"method": "eagle3"'),
    ("vllm", """--speculative-config '{"method": "eagle3", "num_speculative_tokens": 3}'""", "ok", ""),
    ("vllm", "--speculative-algorithm EAGLE3", "problem",  # an SGLang flag, and no --speculative-config
     """--speculative-config '{"method": "eagle3", "model": "DRAFTER", "num_speculative_tokens": 3}'"""),
])
def test_launch_flags(tmp_path: Path, engine: str, flags: str, level: str, wanted: str) -> None:
    drafter = make_drafter(tmp_path, config=eagle3_config(), prefix="midlayer.")
    _, doc = check_json([str(drafter), "--engine", engine, f"--flags={flags}"])
    flag_findings = {f["code"]: f for f in doc["findings"] if f["code"].startswith("flags.")}
    assert flag_findings["flags.algorithm"]["level"] == level
    assert flag_findings["flags.algorithm"]["wanted"] == wanted


def test_sharded_and_single_file_give_the_same_findings(tmp_path: Path) -> None:
    single = make_drafter(tmp_path, "single")
    sharded = make_drafter(tmp_path, "sharded", sharded=True)
    detect = installed("sglang", "0.5.11")
    _, a = check_json([str(single)], detect)
    _, b = check_json([str(sharded)], detect)
    assert a["findings"] == b["findings"] and "config.format" in {f["code"] for f in a["findings"]
                                                                  if f["level"] == "problem"}


def test_no_engine_makes_key_naming_a_hint(tmp_path: Path) -> None:
    drafter = make_drafter(tmp_path, config=eagle3_config(), prefix="layers.0.")
    code, doc = check_json([str(drafter), "--target", str(make_target(tmp_path))])
    assert (code, doc["engine"]) == (0, None)
    assert by_code(doc)["keys.decoder_prefix"]["level"] == "hint"
    assert by_code(doc)["keys.load"]["level"] == "hint"


def test_an_unknown_key_without_the_loader_is_a_hint(tmp_path: Path) -> None:
    drafter = make_drafter(tmp_path, config=eagle3_config(), prefix="midlayer.")
    data = load_file(str(drafter / "model.safetensors"))
    data["midlayer.self_attn.qkv_proj.weight"] = np.zeros((16, 16), np.float16)
    save_file(data, str(drafter / "model.safetensors"))
    _, doc = check_json([str(drafter)], installed("sglang", "0.5.12"))
    f = by_code(doc)["keys.unknown"]
    assert (f["level"], f["found"]) == ("hint", "midlayer.self_attn.qkv_proj.weight")
    assert by_code(doc)["keys.load"]["level"] == "unknown"


# --- corrupt input: exit 2, one clear error, nothing written -------------------------------

def _corrupt_truncated(folder: Path) -> str:
    path = folder / "model.safetensors"
    path.write_bytes(path.read_bytes()[:-7])
    return "lies past the end of the file"


def _corrupt_json(folder: Path) -> str:
    path = folder / "model.safetensors"
    raw = bytearray(path.read_bytes())
    raw[8] = ord("[")  # the header's opening brace
    raw[9] = ord("}")
    path.write_bytes(bytes(raw))
    return "safetensors header is not valid JSON"


def _corrupt_length(folder: Path) -> str:
    path = folder / "model.safetensors"
    raw = path.read_bytes()
    path.write_bytes((2**62).to_bytes(8, "little") + raw[8:])
    return "safetensors header length is impossible"


def _corrupt_config(folder: Path) -> str:
    (folder / "config.json").write_text("{not json")
    return "config.json is not valid JSON"


def _corrupt_index(folder: Path) -> str:
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    index["weight_map"]["ghost.weight"] = "model-00001-of-00002.safetensors"
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return "tensor 'ghost.weight' is listed but not stored"


@pytest.mark.parametrize("corrupt", [_corrupt_truncated, _corrupt_json, _corrupt_length, _corrupt_config,
                                     _corrupt_index])
@pytest.mark.parametrize("command", ["check", "fix"])
def test_corrupt_input_exits_2_and_writes_nothing(tmp_path: Path, corrupt, command: str) -> None:
    drafter = make_drafter(tmp_path, sharded=corrupt is _corrupt_index)
    expected = corrupt(drafter)
    before = listing(tmp_path)
    argv = [command, str(drafter), "--engine", "sglang", "--engine-version", "0.5.11"]
    if command == "fix":
        argv += ["--out", str(tmp_path / "new")]
    code, out, err = run(argv)
    assert (code, out) == (2, "")
    first, *rest = err.splitlines()
    assert first.startswith(f"error: {drafter}") and first.endswith(expected)
    assert [line.split(":")[0] for line in rest][:2] == ["  wanted", "  found"]
    assert "Traceback" not in err
    assert listing(tmp_path) == before


def test_corrupt_input_json_mode(tmp_path: Path) -> None:
    drafter = make_drafter(tmp_path)
    _corrupt_length(drafter)
    code, out, err = run(["check", str(drafter), "--json"])
    doc = json.loads(out)
    assert (code, doc["exit"], doc["schema"]) == (2, 2, "patcher.drafter.check/1")
    assert doc["error"]["what"] == f"{drafter / 'model.safetensors'}: safetensors header length is impossible"
    assert err.startswith("error: ")


def test_bad_engine_version_is_usage_error(tmp_path: Path) -> None:
    code, _out, err = run(["check", str(make_drafter(tmp_path)), "--engine", "sglang", "--engine-version", "new"])
    assert (code, err) == (2, ("error: --engine-version is not a version\n  wanted: e.g. 0.5.11 or 0.10.1.1\n"
                              "  found:  'new'\n"))


def test_missing_drafter_folder(tmp_path: Path, monkeypatch) -> None:
    """Each way a folder is missed gets the hint that fits it (issue 42: a missing path was told
    to 'pass the folder, not a file inside it')."""
    code, _, err = run(["check", str(tmp_path / "nope")])
    assert code == 2 and err.splitlines()[0] == f"error: {tmp_path / 'nope'}: no such folder"
    assert err.splitlines()[-1] == "  hint:   check the path"
    (tmp_path / "config.json").write_text("{}")
    code, _, err = run(["check", str(tmp_path / "config.json")])
    assert code == 2 and err.splitlines()[-1] == f"  hint:   pass the folder, not a file inside it: {tmp_path}"
    monkeypatch.chdir(tmp_path)
    code, _, err = run(["check", "./nope"])
    assert code == 2 and err.splitlines()[-1] == f"  hint:   check the path; it is read from {tmp_path}"
    code, _, err = run(["check", "lightseekorg/kimi-k2.5-eagle3"])
    assert code == 2 and "huggingface-cli download lightseekorg/kimi-k2.5-eagle3 --local-dir kimi-k2.5-eagle3" in err


# --- fix -----------------------------------------------------------------------------------

def _assert_same_tensors(src: Path, dst: Path, rename: dict[str, str]) -> None:
    a: dict[str, np.ndarray] = {}
    for f in sorted(src.glob("*.safetensors")):
        a.update(load_file(str(f)))
    b: dict[str, np.ndarray] = {}
    for f in sorted(dst.glob("*.safetensors")):
        b.update(load_file(str(f)))
    assert sorted(b) == sorted(rename.get(k, k) for k in a)
    for k, v in a.items():
        got = b[rename.get(k, k)]
        assert got.dtype == v.dtype and got.tobytes() == v.tobytes()


@pytest.mark.parametrize("sharded", [False, True])
def test_fix_for_sglang_0_5_11_renames_keys_and_rewrites_config(tmp_path: Path, sharded: bool) -> None:
    drafter = make_drafter(tmp_path, config=speculators_config(aux=None), sharded=sharded)
    target = make_target(tmp_path)
    new = tmp_path / "out" / "drafter-sglang"
    new.parent.mkdir()
    detect = installed("sglang", "0.5.11", keys_patch="pending")
    code, out, err = run(["fix", str(drafter), "--out", str(new), "--target", str(target)], detect)
    # The copy is read as trained; what remains is the install's own state, as verify says it.
    assert (code, err) == (1, "")
    assert out.splitlines()[:4] == [
        f"wrote {new} for sglang 0.5.11",
        "  renamed 10 tensors layers.0.* -> midlayer.* (the spelling sglang 0.5.11 reads without our patches)",
        "  config.json rewritten from speculators format to LlamaForCausalLMEagle3",
        "  16 tensors (3328 bytes) verified identical by sha256",
    ]
    names = {k: "midlayer." + k[len("layers.0."):] for k in tensors() if k.startswith("layers.0.")}
    _assert_same_tensors(drafter, new, names)
    config = json.loads((new / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLMEagle3"]
    assert (config["hidden_size"], config["draft_vocab_size"], config["eagle_config"]) == (
        H, DRAFT_VOCAB, {"use_aux_hidden_state": True})
    if sharded:
        index = json.loads((new / "model.safetensors.index.json").read_text())
        assert "midlayer.mlp.up_proj.weight" in index["weight_map"]
        assert not any(k.startswith("layers.") for k in index["weight_map"])
    assert out.splitlines()[4:] == [
        "the copy still has 1 problem(s) sglang 0.5.11 would run into:",
        "  PROBLEM  setup.eagle3-drafter-keys: sglang/eagle3-drafter-keys is pending on sglang 0.5.11: "
        "the published files need variant v1",
        "           wanted: applied or upstream (what 'patcher verify' accepts)",
        "           found:  pending",
        "           hint:   run 'patcher apply --engine sglang'",
        f"result:  copy kept at {new}; 1 problem(s) remain"]
    # The converted copy has no problem left on the patched install; its keys are the loader's to
    # judge (tests/test_drafter_loader.py), which this install, named by its state, cannot run.
    _, doc = check_json([str(new), "--target", str(target)], installed("sglang", "0.5.11"))
    assert not [f for f in doc["findings"] if f["level"] == "problem"]
    assert [f["code"] for f in doc["findings"] if f["level"] == "unknown"] == ["keys.load"]
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["drafter-sglang"]  # no temp folder left


def test_fix_keeps_non_default_aux_ids(tmp_path: Path) -> None:
    drafter = make_drafter(tmp_path, config=speculators_config(aux=[3, 31, 57]))
    new = tmp_path / "new"
    code, _, _ = run(["fix", str(drafter), "--out", str(new)], installed("sglang", "0.5.13"))
    assert code == 0
    assert json.loads((new / "config.json").read_text())["eagle_config"] == {
        "use_aux_hidden_state": True, "eagle_aux_hidden_state_layer_ids": [3, 31, 57]}


def test_fix_on_sglang_0_5_12_keeps_keys_and_converts_config(tmp_path: Path) -> None:
    drafter, new = make_drafter(tmp_path, config=speculators_config(aux=None)), tmp_path / "new"
    code, out, _ = run(["fix", str(drafter), "--out", str(new), "--json"], installed("sglang", "0.5.12"))
    doc = json.loads(out)
    assert (code, doc["renamed"], doc["config_rewritten"], doc["problems"]) == (0, None, True, [])
    _assert_same_tensors(drafter, new, {})


def test_fix_for_vllm_writes_nothing_when_nothing_needs_fixing(tmp_path: Path) -> None:
    # 0.25.0: every family that concerns this drafter is upstream there (on 0.18.0 eagle31-switches is pending)
    drafter, new = make_drafter(tmp_path), tmp_path / "new"
    code, out, _ = run(["fix", str(drafter), "--out", str(new), "--engine", "vllm", "--engine-version", "0.25.0"])
    assert code == 0
    assert out.splitlines() == ["nothing to fix: vllm 0.25.0 reads this drafter's keys and config as they are; "
                                "nothing was written"]
    assert not new.exists()


def test_fix_refuses_existing_out(tmp_path: Path) -> None:
    drafter, new = make_drafter(tmp_path), tmp_path / "new"
    new.mkdir()
    code, out, err = run(["fix", str(drafter), "--out", str(new), "--engine", "sglang", "--engine-version", "0.5.11"])
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        f"error: {new}: already exists", "  wanted: a new path for the converted drafter",
        "  found:  an existing folder", "  hint:   fix never overwrites; choose another --out or remove it first"]
    assert list(new.iterdir()) == []


def test_fix_refuses_out_inside_the_input(tmp_path: Path) -> None:
    drafter = make_drafter(tmp_path)
    before = listing(drafter)
    code, _, err = run(["fix", str(drafter), "--out", str(drafter / "converted"), "--engine", "vllm",
                        "--engine-version", "0.18.0"])
    assert code == 2
    assert err.splitlines()[0] == f"error: {drafter / 'converted'}: inside the input drafter folder"
    assert listing(drafter) == before


def test_fix_without_engine_is_usage_error(tmp_path: Path) -> None:
    code, _, err = run(["fix", str(make_drafter(tmp_path)), "--out", str(tmp_path / "new")])
    assert (code, err.splitlines()[0]) == (2, "error: fix needs to know the engine")


def test_fix_aborts_when_a_copied_tensor_differs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    drafter, new = make_drafter(tmp_path), tmp_path / "new"
    real = fix_copy._hash_pair

    def flaky(job):  # the copy reads back different bytes for one chunk
        a, b, n = real(job)
        return (a, b[::-1], n) if job[0] == "fc.weight" else (a, b, n)

    monkeypatch.setattr(fix_copy, "_hash_pair", flaky)
    code, out, err = run(["fix", str(drafter), "--out", str(new), "--engine", "sglang", "--engine-version", "0.5.11"])
    assert (code, out) == (1, "")
    assert err.splitlines()[0] == "error: tensor 'fc.weight' in model.safetensors differs after the copy"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["drafter"]  # no --out, no temp folder


def test_interrupted_fix_leaves_nothing_under_the_final_name(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    drafter, new = make_drafter(tmp_path), tmp_path / "new"

    def killed(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr(fix_copy, "_verify", killed)
    with pytest.raises(KeyboardInterrupt):
        run(["fix", str(drafter), "--out", str(new), "--engine", "sglang", "--engine-version", "0.5.11"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["drafter"]


def test_fix_refuses_multi_layer_drafter_for_midlayer_engine(tmp_path: Path) -> None:
    drafter = make_drafter(tmp_path)
    data = load_file(str(drafter / "model.safetensors"))
    data["layers.1.input_layernorm.weight"] = np.ones(H, np.float16)
    save_file(data, str(drafter / "model.safetensors"))
    code, _, err = run(["fix", str(drafter), "--out", str(tmp_path / "new"), "--engine", "sglang",
                        "--engine-version", "0.5.11"])
    assert code == 1
    assert err.splitlines()[0] == "error: sglang 0.5.11 has a single midlayer; this drafter has decoder layers [0, 1]"
    assert not (tmp_path / "new").exists()


def test_fix_preserves_holes_of_a_sparse_input(tmp_path: Path) -> None:
    # The benchmark's 4.7 GB drafter is sparse; the copy must read back identically.
    drafter = make_drafter(tmp_path)
    path = drafter / "model.safetensors"
    big = {"embed_tokens.weight": np.zeros((VOCAB * 4096, H), np.float16)}
    data = load_file(str(path))
    data.update(big)
    del data["embed_tokens.weight"]
    save_file({**data, **big}, str(path))
    new = tmp_path / "new"
    code, _, _ = run(["fix", str(drafter), "--out", str(new), "--engine", "sglang", "--engine-version", "0.5.11"])
    assert code == 1  # the copy is kept; the published 0.5.11 still needs our families
    assert os.path.getsize(new / "model.safetensors") > 4 * 1024 * 1024
    _assert_same_tensors(drafter, new, {k: "midlayer." + k[9:] for k in data if k.startswith("layers.0.")})


# --- glue ----------------------------------------------------------------------------------

def test_explicit_version_survives_a_broken_install(tmp_path: Path) -> None:
    from patcher.errors import EngineError

    def broken(_engine: str | None, _python: str | None = None, _site: Path | None = None):
        raise EngineError("sglang is installed twice")

    drafter = make_drafter(tmp_path, config=eagle3_config(), prefix="midlayer.")
    code, out, _ = run(["check", str(drafter), "--engine", "sglang", "--engine-version", "0.5.11"], broken)
    assert code == 1 and "setup.eagle3-drafter-keys: sglang/eagle3-drafter-keys is pending" in out
    code, _, err = run(["check", str(drafter)], broken)
    assert (code, err) == (2, "error: sglang is installed twice\n")


def test_python_m_patcher_drafter_check(tmp_path: Path) -> None:
    import subprocess
    import sys

    drafter = make_drafter(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "patcher", "drafter", "check", str(drafter), "--engine", "sglang",
                           "--engine-version", "0.5.11", "--json"], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1], check=False)
    assert proc.returncode == 1, proc.stderr
    problems = sorted(f["code"] for f in json.loads(proc.stdout)["findings"] if f["level"] == "problem")
    # The published 0.5.11 needs our families (setup.*) and cannot read the config (nor the speculators
    # config's top-level ids: SGLang reads eagle_config; config.format says it); its keys are not
    # judged without its loader.
    assert {"config.format", "setup.eagle3-drafter-keys"} <= set(problems)
    assert all(p.startswith("setup.") for p in set(problems) - {"aux.capture", "config.format"})


def test_eagle_instead_of_eagle3_is_named_exactly(tmp_path: Path) -> None:
    drafter = make_drafter(tmp_path, config=eagle3_config(), prefix="midlayer.")
    code, out, _ = run(["check", str(drafter), "--engine", "sglang", "--engine-version", "0.5.12",
                        "--flags=--speculative-algorithm EAGLE"])
    assert code == 1
    assert ("  PROBLEM  flags.algorithm: --speculative-algorithm EAGLE runs this EAGLE-3 drafter without its aux "
            "features: the server starts (warning only about DeepSeek MTP), the target captures nothing, fc is never "
            "applied, d2t is never read and the drafter's lm_head is the target's\n"
            "           wanted: --speculative-algorithm EAGLE3\n"
            "           found:  --speculative-algorithm EAGLE\n") in out


def test_a_dense_head_whose_config_copies_n_routed_experts_is_judged_by_its_tensors(tmp_path):
    """ModelOpt exports a Kimi-K2 EAGLE-3 head with the base config's n_routed_experts beside a
    dense MLP: it was refused as a MoE drafter "with 0 expert tensors" (issue 53, item 5)."""
    from tests.support import real_drafters as rd

    drafter = rd.specforge_kimi(tmp_path)
    config = json.loads((drafter / "config.json").read_text())
    config["n_routed_experts"] = 384  # copied from Kimi-K2's own config
    (drafter / "config.json").write_text(json.dumps(config))
    code, doc = check_json([str(drafter), "--target", str(rd.kimi_target(tmp_path, "kimi-k2", k25=False))])
    mlp = [f for f in doc["findings"] if f["code"] == "shape.mlp"]
    assert [f["level"] for f in mlp] == ["hint"] and "no expert tensor" in mlp[0]["message"], mlp
