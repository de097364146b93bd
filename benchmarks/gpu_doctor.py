#!/usr/bin/env python3
"""The GPU as the judge of ``patcher doctor`` (issue 56): each launch's verdict first, then the engine
on exactly that line.

On the device, with the shared toolkit's engine installed (SGLang 0.5.13.post1 from
``../shared/tools/gpu-sglang``, vLLM 0.22.1 from ``gpu-vllm``) and its tiny DeepSeek-V3 target and
Llama EAGLE-3 drafter (``make_models.py``), for every row of the grid:

1. ``patcher doctor --json`` judges the line (in the engine's own interpreter: its parser, its
   loader on the drafter's headers) and its verdict is printed before anything starts;
2. the engine starts on the same line, read by its own parser (SGLang: ``prepare_server_args``
   then ``sglang.Engine(server_args=...)``; vLLM: the ``vllm serve`` parser, ``EngineArgs`` then
   ``LLM``), generates a few prompts, and the outcome is recorded: refused (at parse, start-up or
   load, or the first request, with the engine's message) or ran; for a run, inside the worker, the
   layers the target captures and, right after the drafter loads, which of its parameters hold the
   checkpoint's values (every tensor compared by value: random weights tell which filled which rows).

A row agrees when go means "ran the drafter as trained" (every parameter filled from the checkpoint,
or the target's embedding where the checkpoint has none; the trained aux layers captured; EAGLE-3)
and no-go means "refused, or ran it unlike its training"; "cannot tell" is counted apart.

    gpu_doctor.py grid ENGINE STATE MODELS OUT.json [--jobs 3]   # the rows; prints ROW lines
    gpu_doctor.py engine ENGINE ROW.json                         # one engine run, in its own process
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PROMPTS = ["the model draft token", "a layer of the target", "speculative decode accept",
           "hidden state eagle attention"]
HARMLESS = ("rotary_emb.inv_freq", "verifier_", "k_scale")
# As each engine numbers them: SGLang's models are written with ids [1, 3, 5] (SGLang 0.5.13 reads a list
# starting at 1 as SpecForge's, layers i + 1); vLLM's with [2, 3, 6] (device_doctor.sh), taken as given.
TRAINED_AUX = {"sglang": [2, 4, 6], "vllm": [2, 3, 6]}


# --- the drafter variants (made on the device from make_models' drafter) --------------------------

def variants(models: str) -> dict[str, str]:
    """name -> drafter folder: the toolkit's drafter (speculators' layers.0.* keys, ids [1, 3, 5] at the
    top level and in eagle_config) and the ways it goes wrong."""
    import torch
    from safetensors.torch import load_file, save_file

    base = os.path.join(models, "drafter")
    tensors = load_file(os.path.join(base, "model.safetensors"))
    config = json.load(open(os.path.join(base, "config.json")))
    out = {"well-formed": base}

    def make(name, tensors_=None, config_=None):
        dest = os.path.join(models, f"drafter-{name}")
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(base, dest)
        save_file(tensors_ if tensors_ is not None else tensors, os.path.join(dest, "model.safetensors"),
                  metadata={"format": "pt"})
        with open(os.path.join(dest, "config.json"), "w") as fh:
            json.dump(config_ if config_ is not None else config, fh)
        out[name] = dest

    make("no-down_proj", {k: v for k, v in tensors.items() if k != "layers.0.mlp.down_proj.weight"})
    make("rotary", {**tensors, "layers.0.self_attn.rotary_emb.inv_freq": torch.rand(32)})
    make("typo", {k.replace("mlp.down_proj", "mlp.down_prj"): v for k, v in tensors.items()})
    make("midlayer", {k.replace("layers.0.", "midlayer.", 1): v for k, v in tensors.items()})
    # The ids in one place only (the toolkits write them at the top level, SGLang's also in eagle_config).
    ids = config.get("eagle_aux_hidden_state_layer_ids") or config["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
    top_only = {**json.loads(json.dumps(config)), "eagle_aux_hidden_state_layer_ids": ids}
    top_only.get("eagle_config", {}).pop("eagle_aux_hidden_state_layer_ids", None)
    make("ids-top-only", config_=top_only)
    eagle_only = json.loads(json.dumps(config))
    eagle_only.pop("eagle_aux_hidden_state_layer_ids", None)
    eagle_only["eagle_config"] = {**eagle_only.get("eagle_config", {}), "eagle_aux_hidden_state_layer_ids": ids,
                                  "use_aux_hidden_state": True}
    make("ids-eagle-only", config_=eagle_only)
    make("eagle3")  # the same drafter in a folder named *eagle3: vLLM takes the method from the name
    # An MLA head (Eagle3DeepseekV2ForCausalLM, Kimi-K2.5's drafter class on SGLang): the Llama drafter's
    # top-level tensors and a decoder layer with the target's MLA attention, laid out as tests/support/
    # tiny_drafters.py's "mla" (SpecForge's layers.0.* keys), and the same head without one half of the
    # pair SGLang's loader fuses (it waits for both, so a lone q_a_proj is dropped without a word).
    mla_config, mla_tensors = _mla(models, tensors, config)
    make("mla", mla_tensors, mla_config)
    make("mla-no-kv_a", {k: v for k, v in mla_tensors.items() if "kv_a_proj_with_mqa" not in k}, mla_config)
    return out


def _mla(models: str, tensors: dict, config: dict) -> tuple[dict, dict]:
    import torch

    t = json.load(open(os.path.join(models, "target", "config.json")))
    c = {k: t[k] for k in ("vocab_size", "hidden_size", "num_attention_heads", "num_key_value_heads", "q_lora_rank",
                           "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
                           "max_position_embeddings", "rms_norm_eps", "rope_theta", "hidden_act")}
    c |= {"architectures": ["Eagle3DeepseekV2ForCausalLM"], "model_type": "deepseek_v3", "num_hidden_layers": 1,
          "intermediate_size": config["intermediate_size"], "draft_vocab_size": config["draft_vocab_size"],
          "tie_word_embeddings": False, "torch_dtype": "bfloat16",
          "eagle_aux_hidden_state_layer_ids": config["eagle_aux_hidden_state_layer_ids"],
          "eagle_config": config["eagle_config"]}
    gen = torch.Generator().manual_seed(1)
    h, heads, p = c["hidden_size"], c["num_attention_heads"], "layers.0.self_attn."

    def rand(*shape):
        return (torch.randn(*shape, generator=gen) * 0.02).to(torch.bfloat16)

    attn = {p + "q_a_proj.weight": rand(c["q_lora_rank"], 2 * h),
            p + "kv_a_proj_with_mqa.weight": rand(c["kv_lora_rank"] + c["qk_rope_head_dim"], 2 * h),
            p + "q_a_layernorm.weight": 1 + rand(c["q_lora_rank"]),
            p + "q_b_proj.weight": rand(heads * (c["qk_nope_head_dim"] + c["qk_rope_head_dim"]), c["q_lora_rank"]),
            p + "kv_a_layernorm.weight": 1 + rand(c["kv_lora_rank"]),
            p + "kv_b_proj.weight": rand(heads * (c["qk_nope_head_dim"] + c["v_head_dim"]), c["kv_lora_rank"]),
            p + "o_proj.weight": rand(h, heads * c["v_head_dim"])}
    return c, {**{k: v for k, v in tensors.items() if ".self_attn." not in k}, **attn}


def compressed_tensors_target(models: str) -> str:
    """The target with Kimi-K2-Thinking's checkpoint format stated (compressed-tensors)."""
    dest = os.path.join(models, "target-ct")
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(os.path.join(models, "target"), dest)
    config = json.load(open(os.path.join(dest, "config.json")))
    config["quantization_config"] = {"quant_method": "compressed-tensors", "format": "pack-quantized",
                                     "config_groups": {}}
    with open(os.path.join(dest, "config.json"), "w") as fh:
        json.dump(config, fh)
    return dest


# --- the rows -------------------------------------------------------------------------------------

SGLANG_ROWS = [  # (name, drafter variant, method, extra options, environment)
    ("well-formed EAGLE3 TP1", "well-formed", "EAGLE3", [], {}),
    ("missing down_proj", "no-down_proj", "EAGLE3", [], {}),
    ("rotary inv_freq buffer", "rotary", "EAGLE3", [], {}),
    ("misspelt key", "typo", "EAGLE3", [], {}),
    ("SpecForge midlayer.*", "midlayer", "EAGLE3", [], {}),
    ("ids at the top level only", "ids-top-only", "EAGLE3", [], {}),
    ("EAGLE with an EAGLE-3 drafter", "well-formed", "EAGLE", [], {}),
    ("NEXTN on a target without MTP", None, "NEXTN", [], {}),
    ("MLA drafter", "mla", "EAGLE3", [], {}),
    ("MLA drafter missing kv_a_proj_with_mqa", "mla-no-kv_a", "EAGLE3", [], {}),
]
VLLM_ROWS = [
    ("well-formed eagle3", "well-formed", "eagle3", [], {}),
    ("missing down_proj", "no-down_proj", "eagle3", [], {}),
    ("rotary inv_freq buffer", "rotary", "eagle3", [], {}),
    ("misspelt key", "typo", "eagle3", [], {}),
    ("ids in eagle_config only, v2 runner", "ids-eagle-only", "eagle3", [], {"VLLM_USE_V2_MODEL_RUNNER": "1"}),
    ("ids in eagle_config only, v1 runner", "ids-eagle-only", "eagle3", [], {}),
    ("method eagle with an EAGLE-3 drafter", "well-formed", "eagle", [], {}),
]
# Issue 53: what the release's start-up configuration refuses or infers before any weight, on the
# well-formed drafter; (name, drafter variant, method, extra options, environment, speculative-config
# changes: a None value drops the key). "target-ct": the target with a compressed-tensors
# quantization_config (Kimi-K2-Thinking's checkpoint format).
VLLM_STARTUP_ROWS = [
    ("no token count", "well-formed", "eagle3", [], {}, {"num_speculative_tokens": None}),
    ("a key it does not know", "well-formed", "eagle3", [], {}, {"draft_layers": 2}),
    ("draft TP 2 at TP 1", "well-formed", "eagle3", [], {}, {"draft_tensor_parallel_size": 2}),
    ("upper-case EAGLE3", "well-formed", "EAGLE3", [], {}, {}),
    ("no method, folder not named eagle3", "well-formed", None, [], {}, {}),
    ("no method, folder named *eagle3", "eagle3", None, [], {}, {}),
    ("--quantization fp8 on compressed-tensors", "well-formed", "eagle3", ["--quantization", "fp8"], {},
     {"target": "target-ct"}),
]

# SGLang's (the same shape; changes: "config" moves the speculative options into a YAML file named
# by "--config FILE" ("space") or "--config=FILE" ("equals"), which the release merges only in the
# space form; a method of None leaves --speculative-algorithm out, with the draft path kept).
SGLANG_STARTUP_ROWS = [
    ("a draft window of 0", "well-formed", "EAGLE3", ["--speculative-draft-window-size", "0"], {}, {}),
    ("a draft path, no algorithm", "well-formed", None, [], {}, {}),
    ("speculative options in --config FILE", "well-formed", "EAGLE3", [], {}, {"config": "space"}),
    ("speculative options in --config=FILE", "well-formed", "EAGLE3", [], {}, {"config": "equals"}),
    ("topk 4 with page size 16 on triton", "well-formed", "EAGLE3",
     ["--speculative-eagle-topk", "4", "--page-size", "16"], {}, {}),
]


def line(engine: str, target: str, drafter: str | None, method: str | None, extra: list[str],
         changes: dict | None = None) -> list[str]:
    if engine == "sglang":
        spec = [*(["--speculative-algorithm", method] if method else []),
                *(["--speculative-draft-model-path", drafter] if drafter else []),
                "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
        config = (changes or {}).get("config")
        if config:  # the speculative options as YAML, beside the target
            path = os.path.join(os.path.dirname(target), f"spec-{config}.yaml")
            with open(path, "w") as fh:
                fh.writelines(f"{k[2:]}: {json.dumps(v)}\n" for k, v in zip(spec[::2], spec[1::2]))
            spec = ["--config", path] if config == "space" else [f"--config={path}"]
        return ["python3", "-m", "sglang.launch_server", "--model-path", target, *spec,
                "--attention-backend", "triton", "--sampling-backend", "pytorch", "--grammar-backend", "none",
                "--mem-fraction-static", "0.15", "--disable-cuda-graph", "--random-seed", "0", "--log-level",
                "warning", *extra]
    spec = {"method": method, "model": drafter, "num_speculative_tokens": 3, **(changes or {})}
    spec = {k: v for k, v in spec.items() if v is not None}
    return ["vllm", "serve", target, "--speculative-config", json.dumps(spec), "--enforce-eager",
            "--max-model-len", "1024", "--max-num-seqs", "8", "--gpu-memory-utilization", "0.2", "--seed", "0",
            *extra]


def doctor(row: dict) -> dict:
    env = dict(os.environ, **row["env"])
    t0 = time.time()
    proc = subprocess.run([sys.executable, "-m", "patcher", "doctor", "--json", "--", *row["line"]],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=400)
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        return {"verdict": f"error (exit {proc.returncode})", "reasons": [proc.stderr[-400:]], "seconds": 0}
    return {"verdict": doc.get("verdict"), "reasons": doc.get("reasons", [])[:6], "seconds": round(time.time() - t0, 1),
            "exit": doc.get("exit")}


def engine_run(row: dict, limit: int) -> dict:
    env = dict(os.environ, **row["env"])
    t0 = time.time()
    try:
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "engine", row["engine"], json.dumps(row)],
                              capture_output=True, text=True, env=env, timeout=limit, start_new_session=True)
        text, rc = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        text, rc = (exc.stdout or b"").decode(errors="replace") + (exc.stderr or b"").decode(errors="replace"), 124
    outcome = next((json.loads(ln.split(" ", 1)[1]) for ln in text.splitlines() if ln.startswith("OUTCOME ")), None)
    # the engine's own words first: the worker's error, not the front end's "see above"
    errors = [ln.strip() for ln in text.splitlines() if ("Error" in ln or "error:" in ln)
              and "Engine core initialization failed" not in ln and not ln.startswith("OUTCOME ")]
    errors = [e for i, e in enumerate(errors) if e not in errors[:i]][-4:]
    if outcome is None:
        outcome = {"stage": "start-up or load" if rc != 124 else "timeout", "error": " | ".join(errors)[-600:]}
    elif outcome.get("stage") != "ran" and errors:
        outcome["worker_error"] = " | ".join(errors)[-600:]
    for ln in text.splitlines():
        if ln.startswith("WEIGHTS "):
            outcome["weights"] = json.loads(ln.split(" ", 1)[1])
        elif ln.startswith("AUX "):
            outcome.setdefault("aux", []).append(json.loads(ln.split(" ", 1)[1]))
    outcome["seconds"] = round(time.time() - t0, 1)
    return outcome


def as_trained(row: dict, outcome: dict) -> tuple[bool, str]:
    """Whether the engine ran the drafter as trained, and why not."""
    if outcome.get("stage") != "ran":
        return False, f"refused at {outcome.get('stage')}: {outcome.get('error', '')[:200]}"
    # the engine's own (None: no speculative decoding), where it took it from elsewhere (issue 53)
    method = outcome["method"] if "method" in outcome else row["method"]
    if str(method).upper() != "EAGLE3":
        return False, f"ran {method}: no aux capture, fc never applied"
    w = outcome.get("weights")
    if w is None:
        return False, "ran, but the weights were not read in the worker"
    if w["unfilled"] or w["lost"]:
        return False, f"ran with unfilled {w['unfilled']} lost {w['lost']}"
    captured = [a.get("layers") for a in outcome.get("aux", []) if not a.get("draft")]
    want = TRAINED_AUX[row["engine"]]
    if not captured or captured[0] != want:
        return False, f"ran capturing {captured} (trained {want})"
    return True, f"ran as trained: aux {captured[0]}, every parameter filled, accept {outcome.get('accept')}"


def grid(args) -> int:
    t0 = time.time()
    target = os.path.join(args.models, "target")
    drafters = variants(args.models)
    table = SGLANG_ROWS + SGLANG_STARTUP_ROWS if args.engine == "sglang" else VLLM_ROWS + VLLM_STARTUP_ROWS
    targets = {"target": target}
    if args.engine == "vllm":
        targets["target-ct"] = compressed_tensors_target(args.models)
    rows = []
    for n, v, m, x, e, *more in table:
        if args.only is not None and n not in args.only:
            continue
        changes = dict(more[0]) if more else {}
        where = targets[changes.pop("target", "target")]
        rows.append({"name": n, "engine": args.engine, "state": args.state, "method": m, "variant": v, "env": e,
                     "drafter": drafters.get(v) if v else None,
                     "line": line(args.engine, where, drafters.get(v) if v else None, m, x, changes)})
    with ThreadPoolExecutor(args.jobs) as pool:  # every verdict before any engine starts
        verdicts = list(pool.map(doctor, rows))
    for row, v in zip(rows, verdicts):
        row["doctor"] = v
        print(f"DOCTOR {args.state} | {row['name']} | {v['verdict']} | {v['reasons'][:2]}", flush=True)
    if args.doctor_only:  # a dry run where no engine can start (a machine without a GPU)
        return 0
    # vLLM profiles free GPU memory at start-up and fails when another process frees some meanwhile:
    # its engines run one at a time (--engine-jobs 1 in device_doctor.sh).
    with ThreadPoolExecutor(args.engine_jobs or args.jobs) as pool:
        outcomes = list(pool.map(lambda r: engine_run(r, args.limit), rows))
    agree = 0
    for row, outcome in zip(rows, outcomes):
        row["engine_outcome"] = outcome
        ok_run, why = as_trained(row, outcome)
        verdict = row["doctor"]["verdict"]
        # A package the host lacks, or GPU memory another row held, is the harness's failure, not the
        # engine's verdict: the row is void (SGLang's "Not enough memory" at start-up once read as a
        # refusal that agreed with no-go).
        void = _host_failure(why, row["doctor"]["reasons"])
        row["agrees"] = None if verdict == "cannot tell" or void else (verdict == "go") == ok_run
        row["truth"], row["void"] = why, void
        agree += bool(row["agrees"])
        said = f"VOID ({void})" if void else "agrees" if row["agrees"] else \
            "cannot tell" if row["agrees"] is None else "DISAGREES"
        print(f"ROW {args.state} | {row['name']} | doctor {verdict} | engine {why} | {said}", flush=True)
    told = [r for r in rows if r["agrees"] is not None]
    void = sum(bool(r["void"]) for r in rows)
    print(f"SUMMARY {args.engine} {args.state}: {agree} of {len(told)} agree, "
          f"{len(rows) - len(told) - void} cannot tell, {void} void, {time.time() - t0:.0f} s", flush=True)
    with open(args.out, "w") as fh:
        json.dump(rows, fh, indent=1)
    return 0


_HOST_FAILURES = {"ModuleNotFoundError": "a package the host lacks",
                  "Not enough memory": "GPU memory another row held",
                  "out of memory": "GPU memory another row held"}


def _host_failure(why: str, reasons: list[str]) -> str:
    """Why the row says nothing about doctor ('' when it does): the host failed, not the engine."""
    said = " ".join([why, *reasons])
    return next((what for mark, what in _HOST_FAILURES.items() if mark in said), "")


# --- one engine run, in its own process -------------------------------------------------------------

def _compare(model, folder: str) -> dict:
    """The drafter's parameters against the checkpoint's tensors, by value."""
    import torch
    from safetensors.torch import load_file

    ckpt = load_file(os.path.join(folder, "model.safetensors"))
    found, unfilled = set(), []
    for name, p in model.named_parameters():
        if not p.is_floating_point():  # a vocabulary map (vLLM's draft_id_to_target_id from d2t): equal values
            v = p.detach().cpu()
            hit = [k for k, c in ckpt.items() if not c.is_floating_point() and c.shape == v.shape
                   and (torch.equal(c.to(v.dtype), v) or torch.equal(c.to(v.dtype) + torch.arange(len(v)), v))]
            found.update(hit)
            if not hit:
                unfilled.append(name)
            continue
        pp = p.detach().float().cpu().reshape(p.shape[0], -1) if p.dim() else p.detach().float().cpu().reshape(1, 1)
        covered = torch.zeros(pp.shape[0], dtype=torch.bool)
        for key, c in ckpt.items():
            if not c.is_floating_point():
                continue
            cc = c.float().reshape(c.shape[0], -1) if c.dim() else c.float().reshape(1, 1)
            if cc.shape[1] != pp.shape[1] or cc.shape[0] > pp.shape[0]:
                continue
            for r in (pp == cc[0]).all(dim=1).nonzero().flatten().tolist():
                if torch.equal(pp[r:r + cc.shape[0]], cc):
                    covered[r:r + cc.shape[0]] = True
                    found.add(key)
        shared = "embed_tokens" in name and not any("embed_tokens" in k for k in ckpt)  # the target's, shared
        if not bool(covered.all()) and not shared:
            unfilled.append(name)
    lost = [k for k, c in ckpt.items() if c.is_floating_point() and k not in found
            and not any(h in k for h in HARMLESS)]
    return {"unfilled": unfilled, "lost": lost}


def _hook(module_name: str, cls_name: str, method: str, after) -> None:
    """Call ``after(self)`` once ``cls_name.method`` of ``module_name`` returns, in every process that
    imports it (the engine's workers are spawned and re-import this file)."""
    import importlib.abc
    import importlib.util

    def patch(mod):
        cls = getattr(mod, cls_name)
        orig = getattr(cls, method)

        def wrapped(self, *a, **k):
            out = orig(self, *a, **k)
            try:
                after(self)
            except Exception as e:  # noqa: BLE001 - a probe must not break the run
                print(f"PROBE failed: {e!r}", flush=True)
            return out

        setattr(cls, method, wrapped)

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, tgt=None):
            if name != module_name:
                return None
            sys.meta_path.remove(self)
            try:
                spec = importlib.util.find_spec(name)
            finally:
                sys.meta_path.insert(0, self)
            orig_exec = spec.loader.exec_module

            def exec_module(mod):
                orig_exec(mod)
                patch(mod)

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, Finder())


def _sglang_probes() -> None:
    """Right after the draft model loads, its parameters against the checkpoint; once the target
    set its capture, the layers it captures (the toolkit's smoke.py reads them the same way)."""
    folder = os.environ.get("GPUDOC_DRAFTER")

    def weights(self):
        if getattr(self, "is_draft_worker", False) and folder:
            print("WEIGHTS " + json.dumps(_compare(self.model, folder)), flush=True)

    def aux(self):
        if not getattr(self, "is_draft_worker", False):
            layers = getattr(getattr(self.model, "model", None), "layers_to_capture", None)
            print("AUX " + json.dumps({"layers": list(layers) if layers is not None else None, "draft": False}),
                  flush=True)

    _hook("sglang.srt.model_executor.model_runner", "ModelRunner", "load_model", weights)
    _hook("sglang.srt.model_executor.model_runner", "ModelRunner", "init_aux_hidden_state_capture", aux)


def engine_sglang(row: dict) -> int:
    os.environ["GPUDOC_PROBES"] = "1"  # inherited by the spawned scheduler, which re-imports this file
    if row.get("drafter"):
        os.environ["GPUDOC_DRAFTER"] = row["drafter"]
    _sglang_probes()
    import sglang
    from sglang.srt.server_args import prepare_server_args

    try:
        args = prepare_server_args(row["line"][3:])
    except BaseException as exc:  # noqa: BLE001 - argparse's SystemExit too
        return _outcome(stage="parse", error=f"{type(exc).__name__}: {exc}")
    try:
        engine = sglang.Engine(server_args=args)
    except BaseException as exc:  # noqa: BLE001
        return _outcome(stage="start-up or load", error=f"{type(exc).__name__}: {exc}")
    method = getattr(getattr(engine, "server_args", args), "speculative_algorithm", None)  # as resolved
    try:
        outs = engine.generate(prompt=PROMPTS, sampling_params={"temperature": 0.0, "max_new_tokens": 16,
                                                                 "ignore_eos": True})
    except BaseException as exc:  # noqa: BLE001
        return _outcome(stage="first request", error=f"{type(exc).__name__}: {exc}")
    tokens = sum(o["meta_info"]["completion_tokens"] for o in outs)
    verify = sum(o["meta_info"].get("spec_verify_ct", 0) for o in outs)
    engine.shutdown()
    return _outcome(stage="ran", tokens=tokens, accept=round(tokens / verify, 3) if verify else None,
                    method=str(method) if method is not None else None)


def engine_vllm(row: dict) -> int:
    os.environ.setdefault("VLLM_USE_FLASHINFER_SAMPLER", "0")
    os.environ.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")
    import vllm.entrypoints.cli.serve as serve
    from vllm import LLM, SamplingParams
    from vllm.engine.arg_utils import EngineArgs

    try:
        top = serve.FlexibleArgumentParser(prog="vllm")
        serve.ServeSubcommand().subparser_init(top.add_subparsers(dest="subparser"))
        ns = top.parse_args(["serve", *row["line"][2:]])
        if getattr(ns, "model_tag", None):
            ns.model = ns.model_tag
        engine_args = EngineArgs.from_cli_args(ns)
    except BaseException as exc:  # noqa: BLE001
        return _outcome(stage="parse", error=f"{type(exc).__name__}: {exc}")
    try:
        kwargs = dict(vars(engine_args), disable_log_stats=False)  # get_metrics() needs the stats
        llm = LLM(**kwargs)
    except BaseException as exc:  # noqa: BLE001
        return _outcome(stage="start-up or load", error=f"{type(exc).__name__}: {exc}")
    folder = row.get("drafter")
    spec = getattr(getattr(getattr(llm, "llm_engine", None), "vllm_config", None), "speculative_config", None)
    method = getattr(spec, "method", None)  # what the release resolved (issue 53: inferred where unnamed)

    def probe(worker):
        runner = worker.model_runner
        model = runner.get_model() if hasattr(runner, "get_model") else runner.model
        inner = getattr(model, "model", model)
        drafter = getattr(getattr(runner, "drafter", None), "model", None) or getattr(
            getattr(runner, "speculator", None), "model", None)
        layers = getattr(inner, "aux_hidden_state_layers", None)
        return {"aux": list(layers) if layers is not None else None,
                "weights": _compare(drafter, folder) if drafter is not None and folder else None}

    try:
        got = llm.collective_rpc(probe)[0]
    except BaseException as exc:  # noqa: BLE001
        got = {"aux": None, "weights": None, "error": repr(exc)}
    print("AUX " + json.dumps({"layers": got.get("aux"), "draft": False}), flush=True)
    if got.get("weights") is not None:
        print("WEIGHTS " + json.dumps(got["weights"]), flush=True)
    try:
        outs = llm.generate(PROMPTS, SamplingParams(temperature=0.0, max_tokens=16, ignore_eos=True))
    except BaseException as exc:  # noqa: BLE001
        return _outcome(stage="first request", error=f"{type(exc).__name__}: {exc}")
    drafts = accepted = 0
    for m in llm.get_metrics():
        if m.name == "vllm:spec_decode_num_drafts":
            drafts += int(m.value)
        elif m.name == "vllm:spec_decode_num_accepted_tokens":
            accepted += int(m.value)
    return _outcome(stage="ran", tokens=sum(len(o.outputs[0].token_ids) for o in outs),
                    accept=round(1 + accepted / drafts, 3) if drafts else None, method=method)


def _outcome(**fields) -> int:
    print("OUTCOME " + json.dumps(fields), flush=True)
    return 0


if os.environ.get("GPUDOC_PROBES") == "1" and __name__ != "__main__":
    _sglang_probes()  # the scheduler, spawned, imports this file as __mp_main__


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("grid")
    g.add_argument("engine", choices=("sglang", "vllm"))
    g.add_argument("state")
    g.add_argument("models")
    g.add_argument("out")
    g.add_argument("--jobs", type=int, default=3)
    g.add_argument("--engine-jobs", type=int, default=0, help="engines at once (default: --jobs)")
    g.add_argument("--limit", type=int, default=240)
    g.add_argument("--only", type=lambda t: [n for n in t.split(";") if n], help="row names, ';'-separated")
    g.add_argument("--doctor-only", action="store_true")
    e = sub.add_parser("engine")
    e.add_argument("engine")
    e.add_argument("row")
    args = ap.parse_args(argv)
    if args.cmd == "grid":
        return grid(args)
    row = json.loads(args.row)
    return engine_sglang(row) if args.engine == "sglang" else engine_vllm(row)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
