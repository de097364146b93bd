#!/usr/bin/env python3
"""GPU proof (issue 33): after ``patcher apply``, does vLLM accept drafted tokens as the drafter was trained to?

One command, on a machine with a GPU and vLLM installed the normal way (pip):

    python benchmarks/gpu_accept.py --work /tmp/gpu-accept [--runner default|v1|v2] [--modes eager,compiled]

What it does, with fixed seeds:
1. ``models``: builds a small DeepSeek-V3-architecture target (benchmarks/gpu_accept_parts.py: MLA,
   MoE, 8 layers) and trains it for a minute on the standard library's docstrings, so that its
   greedy output is varied text, not a loop; generates greedy continuations of training prompts with
   it; trains an EAGLE-3 drafter on the target's own hidden states at aux layers (3, 6, 7), not
   vLLM's default (2, 4, 5), with training-time test over 3 draft steps, until its offline
   acceptance on held-out continuations is high; saves it as SpecForge lays drafters out (ids only
   in ``eagle_config``) and as speculators does (ids at the top level).
2. ``matrix``: for the installed vLLM as published (``patcher revert``) and patched (``patcher
   apply``), serves both layouts through vLLM's offline ``LLM`` API with EAGLE-3 (3 tokens), eager
   and with CUDA graphs, each run in its own process, and reads the engine's own spec-decode
   metrics (mean accepted length, acceptance per position), the aux layer ids it logged, and
   what ``patcher drafter check`` predicted it would capture.
3. prints one table (release x layout x runner x mode x state), with the ratio to the reference:
   the pristine row of the layout whose ids the published engine honours.
4. ``cache`` (its own command): the compile-cache case. The SpecForge-layout drafter is served with
   CUDA graphs, first with vLLM's default ids (2, 4, 5) in its eagle_config, then edited in place to
   the trained ids and served again with the cache warm; pristine and patched, each with its own
   ``VLLM_CACHE_ROOT``. Prints which cache folder (key) each run used, whether it loaded a compiled
   graph, and the acceptance: a key that misses the edit serves the graph of the old layers.

``--reuse`` skips step 1 when the work folder already holds the models. Needs torch, transformers,
safetensors, tokenizers and vLLM; downloads nothing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_accept_parts as parts  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SEED = 0
DEV = os.environ.get("GPU_ACCEPT_DEVICE", "cuda")  # "cpu": a slow dry run of step 1 (tests of the script itself)
NUM_SPEC = 3


def log(msg: str) -> None:
    print(f"[gpu_accept {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --- step 1: the target and the drafter ----------------------------------------------------------

def _tokenizer(vocab: list[str], path: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(vocab)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.decoder = decoders.WordPiece(prefix="##")
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                                   pad_token="<pad>")
    fast.save_pretrained(path)


def _chunks(ids: list[int], n: int) -> list[list[int]]:
    return [ids[i:i + n] for i in range(0, len(ids) - n, n)]


def train_target(work: Path, seconds: float) -> dict:
    import torch
    from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

    torch.manual_seed(SEED)
    train, held = parts.corpus()
    vocab = parts.vocabulary(train)
    index = {w: i for i, w in enumerate(vocab)}
    config = DeepseekV3Config(**{k: v for k, v in parts.TARGET.items() if k not in ("architectures", "torch_dtype")})
    model = DeepseekV3ForCausalLM(config).to(DEV)
    data = torch.tensor(_chunks([i for t in train for i in [1, *parts.encode(t, index)]], 128), device=DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
    t0, step, loss = time.perf_counter(), 0, float("nan")
    gen = torch.Generator(device=DEV).manual_seed(SEED)
    while time.perf_counter() - t0 < seconds:
        batch = data[torch.randint(len(data), (64,), device=DEV, generator=gen)]
        with torch.autocast(DEV, dtype=torch.bfloat16):
            out = model(input_ids=batch, labels=batch)
        opt.zero_grad(set_to_none=True)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step, loss = step + 1, out.loss.item()
    log(f"target: {step} steps in {time.perf_counter() - t0:.0f} s, loss {loss:.3f}")
    model = model.to(torch.bfloat16).eval()
    target = work / "target"
    model.save_pretrained(target, max_shard_size="14MB")
    cfg = json.loads((target / "config.json").read_text())
    cfg["architectures"] = parts.TARGET["architectures"]  # the name vLLM's v2 default list holds
    (target / "config.json").write_text(json.dumps(cfg, indent=2))
    _tokenizer(vocab, target)
    return {"target_steps": step, "target_loss": round(loss, 3), "vocab": vocab, "held": held, "train": train}


def greedy(model, prompts, new: int):
    """The target's own greedy continuations (full recompute each step: small, and exact)."""
    import torch

    seqs = prompts.clone()
    for _ in range(new):
        with torch.no_grad(), torch.autocast(DEV, dtype=torch.bfloat16):
            logits = model(input_ids=seqs).logits[:, -1]
        seqs = torch.cat([seqs, logits.argmax(-1, keepdim=True)], 1)
    return seqs


class _Rms:
    def __init__(self, n, eps=1e-6):
        import torch

        self.weight = torch.nn.Parameter(torch.ones(n, device=DEV))
        self.eps = eps

    def __call__(self, x):
        import torch

        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight.to(x.dtype)


def make_drafter(embed):
    """vLLM's Eagle3LlamaForCausalLM (llama_eagle3.py) in plain torch: layer 0 normalises the
    embeddings and the fc-combined hidden state separately, concatenates them (2 x H) into q/k/v,
    adds attention to the hidden state, then an MLP; the final norm feeds lm_head and the pre-norm
    state is the next draft step's hidden state. RoPE is NeoX-style, as vLLM's Llama."""
    import torch
    from torch import nn

    c = parts.DRAFT_LAYER
    h, heads, kv, hd, inter = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"], \
        c["intermediate_size"]

    class Drafter(nn.Module):
        def __init__(self):
            super().__init__()
            lin = lambda i, o: nn.Linear(i, o, bias=False)  # noqa: E731
            self.fc = lin(3 * h, h)
            self.q_proj, self.k_proj, self.v_proj = lin(2 * h, heads * hd), lin(2 * h, kv * hd), lin(2 * h, kv * hd)
            self.o_proj = lin(heads * hd, h)
            self.gate_proj, self.up_proj, self.down_proj = lin(h, inter), lin(h, inter), lin(inter, h)
            self.lm_head = lin(h, parts.VOCAB)
            norms = {n: _Rms(h, c["rms_norm_eps"]) for n in ("input_layernorm", "hidden_norm",
                                                             "post_attention_layernorm", "norm")}
            for n, m in norms.items():
                self.register_parameter(f"{n}_weight", m.weight)
            self.norms = norms
            self.embed = embed  # the target's, frozen: SpecForge drops the drafter's, vLLM shares the target's
            inv = 1.0 / (c["rope_theta"] ** (torch.arange(0, hd, 2, device=DEV).float() / hd))
            self.register_buffer("inv_freq", inv, persistent=False)

        def rope(self, x, pos):  # x: [B, n, T, hd]; NeoX: rotate the two halves
            f = pos[..., None].float() * self.inv_freq  # [B, T, hd/2]
            cos, sin = f.cos()[:, None], f.sin()[:, None]
            a, b = x[..., : hd // 2].float(), x[..., hd // 2:].float()
            return torch.cat([a * cos - b * sin, b * cos + a * sin], -1).to(x.dtype)

        def qkv(self, tokens, hidden, pos):
            e = self.norms["input_layernorm"](self.embed(tokens))
            x = torch.cat([e, self.norms["hidden_norm"](hidden)], -1)
            b, t, _ = x.shape
            q = self.q_proj(x).view(b, t, heads, hd).transpose(1, 2)
            k = self.k_proj(x).view(b, t, kv, hd).transpose(1, 2)
            v = self.v_proj(x).view(b, t, kv, hd).transpose(1, 2)
            return self.rope(q, pos), self.rope(k, pos), v

        def finish(self, attn, hidden):
            b, n, t, _ = attn.shape
            residual = self.o_proj(attn.transpose(1, 2).reshape(b, t, n * hd)) + hidden
            y = self.norms["post_attention_layernorm"](residual)
            pre = self.down_proj(nn.functional.silu(self.gate_proj(y)) * self.up_proj(y)) + residual
            return pre, self.lm_head(self.norms["norm"](pre))

        def unroll(self, aux, tokens, steps: int):
            """Training-time test: step 0 reads fc(aux states) at every position (causal); step s
            at index i reads step s-1's pre-norm state and the token after, at position i + s, and
            attends to step 0's keys up to i and to its own chain's earlier steps at i, as the
            engine's KV cache holds them when it drafts. Returns each step's logits."""
            # index i: the target's state F_i with token x_{i+1} at position i (the engine shifts the
            # tokens by one and keeps the positions); step s reads x_{i+1+s} at i + s, predicts x_{i+2+s}
            b, t = tokens.shape[0], tokens.shape[1] - steps - 1
            pos = torch.arange(t, device=DEV).expand(b, t)
            hidden = self.fc(aux[:, :t])
            ks, vs, out = [], [], []
            causal = torch.ones(t, t, dtype=torch.bool, device=DEV).tril()
            eye = torch.eye(t, dtype=torch.bool, device=DEV)
            for s in range(steps):
                q, k, v = self.qkv(tokens[:, 1 + s:1 + s + t], hidden, pos + s)
                ks.append(k.repeat_interleave(heads // kv, 1))
                vs.append(v.repeat_interleave(heads // kv, 1))
                mask = torch.cat([causal] + [eye] * s, 1)
                attn = nn.functional.scaled_dot_product_attention(q, torch.cat(ks, 2), torch.cat(vs, 2), attn_mask=mask)
                hidden, logits = self.finish(attn, hidden)
                out.append(logits)
            return out

    return Drafter().to(DEV)


def aux_states(model, seqs):
    """The target's residual stream entering each trained layer (vLLM's aux capture: hidden +
    residual before layer i; HF's hidden_states[i]), concatenated: [B, T, 3H]."""
    import torch

    with torch.no_grad(), torch.autocast(DEV, dtype=torch.bfloat16):
        hs = model(input_ids=seqs, output_hidden_states=True).hidden_states
    return torch.cat([hs[i] for i in parts.TRAINED_IDS], -1).to(torch.bfloat16)


def offline_acceptance(drafter, aux, seqs, start: int) -> tuple[float, list[float]]:
    """Greedy acceptance on held-out continuations, as the engine counts it: per verified position
    in the generated part, the drafts accepted before the first miss (up to NUM_SPEC)."""
    import torch

    with torch.no_grad(), torch.autocast(DEV, dtype=torch.bfloat16):
        logits = drafter.unroll(aux, seqs, NUM_SPEC)
    t = seqs.shape[1] - NUM_SPEC - 1
    hits = torch.stack([lg.argmax(-1) == seqs[:, 2 + s: 2 + s + t] for s, lg in enumerate(logits)], -1)
    hits = hits[:, start:]  # verified positions whose drafts fall in the target's own continuation
    run = hits.cumprod(-1)
    per_pos = run.float().mean((0, 1)).tolist()
    return 1 + sum(per_pos), per_pos


def train_drafter(work: Path, info: dict, seconds: float) -> dict:
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM

    torch.manual_seed(SEED)
    target = AutoModelForCausalLM.from_pretrained(work / "target", torch_dtype=torch.bfloat16).to(DEV).eval()
    index = {w: i for i, w in enumerate(info["vocab"])}
    gen = torch.Generator().manual_seed(SEED)

    def prompts(texts, n):
        ids = [p for p in (parts.encode(t, index)[:16] for t in texts) if len(p) == 16]
        pick = torch.randperm(len(ids), generator=gen)[:n]
        return torch.tensor([[1, *ids[i]] for i in pick], device=DEV)

    t0 = time.perf_counter()
    n, new = info["sizes"]
    train_seqs = torch.cat([greedy(target, p, new) for p in prompts(info["train"], n).split(512)])
    held_seqs = greedy(target, prompts(info["held"], max(n // 8, 8)), new)
    log(f"greedy continuations: {len(train_seqs)} + {len(held_seqs)} in {time.perf_counter() - t0:.0f} s; "
        f"held-out unique tokens / bigrams: {parts.diversity(held_seqs[:, 17:].tolist())}")
    train_aux, held_aux = aux_states(target, train_seqs), aux_states(target, held_seqs)
    embed = target.get_input_embeddings()
    embed.weight.requires_grad_(False)
    drafter = make_drafter(embed)
    params = [p for n, p in drafter.named_parameters() if not n.startswith("embed")]
    opt = torch.optim.AdamW(params, lr=1e-3)
    t0, step = time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds:
        pick = torch.randint(len(train_seqs), (128,), generator=gen)
        seqs, aux = train_seqs[pick].to(DEV), train_aux[pick].to(DEV)
        with torch.autocast(DEV, dtype=torch.bfloat16):
            logits = drafter.unroll(aux, seqs, NUM_SPEC)
            t = seqs.shape[1] - NUM_SPEC - 1
            loss = sum(0.8 ** s * torch.nn.functional.cross_entropy(
                lg.reshape(-1, parts.VOCAB).float(), seqs[:, 2 + s: 2 + s + t].reshape(-1))
                for s, lg in enumerate(logits))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
    mean, per_pos = offline_acceptance(drafter, held_aux, held_seqs, 15)  # x_{i+2} past the 17-token prompt
    log(f"drafter: {step} steps in {time.perf_counter() - t0:.0f} s, loss {loss.item():.3f}; offline held-out "
        f"mean accepted length {mean:.3f}, per position {[round(x, 3) for x in per_pos]}")
    weights = {
        "fc.weight": drafter.fc.weight, "lm_head.weight": drafter.lm_head.weight,
        "norm.weight": drafter.norms["norm"].weight, "embed_tokens.weight": embed.weight,
        "layer.self_attn.q_proj.weight": drafter.q_proj.weight, "layer.self_attn.k_proj.weight": drafter.k_proj.weight,
        "layer.self_attn.v_proj.weight": drafter.v_proj.weight, "layer.self_attn.o_proj.weight": drafter.o_proj.weight,
        "layer.mlp.gate_proj.weight": drafter.gate_proj.weight, "layer.mlp.up_proj.weight": drafter.up_proj.weight,
        "layer.mlp.down_proj.weight": drafter.down_proj.weight,
        "layer.input_layernorm.weight": drafter.norms["input_layernorm"].weight,
        "layer.hidden_norm.weight": drafter.norms["hidden_norm"].weight,
        "layer.post_attention_layernorm.weight": drafter.norms["post_attention_layernorm"].weight,
    }
    maps = {"d2t": torch.zeros(parts.VOCAB, dtype=torch.int64), "t2d": torch.ones(parts.VOCAB, dtype=torch.bool)}
    for layout, config in parts.LAYOUTS.items():
        folder = work / f"drafter-{layout}"
        folder.mkdir(parents=True, exist_ok=True)
        names = parts.layout_names(layout, list(weights))
        tensors = {names[n]: w.detach().to(torch.bfloat16).contiguous().cpu() for n, w in weights.items() if n in names}
        save_file({**tensors, **maps}, folder / "model.safetensors", metadata={"format": "pt"})
        (folder / "config.json").write_text(json.dumps(config(parts.TRAINED_IDS), indent=2))
    return {"drafter_steps": step, "drafter_loss": round(loss.item(), 3), "offline_mean_len": round(mean, 3),
            "offline_per_pos": [round(x, 3) for x in per_pos], "serve_prompts": held_seqs[:64, :17].tolist(),
            "target_greedy": held_seqs[:64, 17:].tolist(), "max_tokens": new}


# --- step 2: serving ----------------------------------------------------------------------------

def aux_layers(worker) -> str:
    """Runs inside the worker: the aux layer ids the target model was set to capture."""
    runner = worker.model_runner
    try:
        model = runner.get_model() if hasattr(runner, "get_model") else runner.model
    except Exception as e:  # noqa: BLE001 - a runner layout this helper does not know
        return f"n/a ({type(e).__name__})"
    return repr(tuple(getattr(getattr(model, "model", model), "aux_hidden_state_layers", ()) or ()))


def serve(args) -> int:
    """One vLLM run (its own process): prints one ``RESULT {json}`` line."""
    os.environ.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")  # the rpc of aux_layers()
    from vllm import LLM, SamplingParams

    info = json.loads((Path(args.work) / "train.json").read_text())
    eager = args.mode == "eager"
    llm = LLM(model=str(Path(args.work) / "target"), tokenizer=str(Path(args.work) / "target"),
              speculative_config={"method": "eagle3", "model": args.drafter, "num_speculative_tokens": NUM_SPEC},
              enforce_eager=eager, compilation_config=None if eager else {"max_cudagraph_capture_size": 32},
              max_model_len=1024, max_num_seqs=8, gpu_memory_utilization=0.3, disable_log_stats=False, seed=SEED)
    aux = llm.collective_rpc(aux_layers)
    params = SamplingParams(temperature=0.0, max_tokens=info["max_tokens"], ignore_eos=True)
    from vllm.inputs import TokensPrompt

    outs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in info["serve_prompts"]], params)
    tokens = [list(o.outputs[0].token_ids) for o in outs]
    metrics = [(m.name, getattr(m, "values", None) if m.name.endswith("_per_pos") else getattr(m, "value", 0))
               for m in llm.get_metrics()]
    agree = sum(t == g for t, g in zip(tokens, info["target_greedy"])) / len(tokens)
    print("RESULT " + json.dumps({"aux_rpc": aux[0] if aux else None, "counters": parts.spec_counters(metrics),
                                  "diversity": parts.diversity(tokens), "target_agrees": agree}), flush=True)
    return 0


def _patcher(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "patcher", *argv, "--engine", "vllm", "--no-probes"],
                          cwd=ROOT, capture_output=True, text=True)


def _predicted(work: Path, drafter: Path, runner: str) -> list[int] | None:
    """What `patcher drafter check` says the target captures on this install, for this runner."""
    r = subprocess.run([sys.executable, "-m", "patcher", "drafter", "check", str(drafter), "--target",
                        str(work / "target"), "--json"], cwd=ROOT, capture_output=True, text=True)
    try:
        return parts.predicted_capture(json.loads(r.stdout), runner)
    except ValueError:
        return None


def _serve(work: str, drafter: Path, mode: str, env: dict) -> tuple[int, str, dict | None]:
    """One ``serve`` in its own process: (exit status, its output, its RESULT or None)."""
    p = subprocess.run([sys.executable, __file__, "serve", "--work", work, "--drafter", str(drafter), "--mode", mode],
                       env=env, capture_output=True, text=True)
    text = p.stdout + p.stderr
    return p.returncode, text, next((json.loads(ln[7:]) for ln in text.splitlines() if ln.startswith("RESULT ")), None)


def _state(state: str) -> None:
    """The installed vLLM as published (``patcher revert``) or patched (``patcher apply``)."""
    r = _patcher("revert" if state == "pristine" else "apply")
    log(f"patcher {'revert' if state == 'pristine' else 'apply'}: exit {r.returncode}\n{r.stdout}{r.stderr}")
    if r.returncode != 0 and "exit 1:" not in r.stdout:  # exit 1 names families; anything else is a failure
        raise SystemExit("patcher failed: the rows would not be what they say")


def _runner_env(runner: str) -> dict:
    """The environment of a launch with this runner ("default": whatever the release picks)."""
    env = {k: v for k, v in os.environ.items() if k != "VLLM_USE_V2_MODEL_RUNNER"}
    return env if runner == "default" else {**env, "VLLM_USE_V2_MODEL_RUNNER": "1" if runner == "v2" else "0"}


def cache_case(args) -> list[parts.CacheRow]:
    """The compile-cache case: a SpecForge-layout drafter first served with vLLM's default ids in
    its eagle_config (cache cold), then the same folder edited in place to the trained ids and
    served again with the cache warm, CUDA graphs on, pristine and patched (each its own cache).
    A key that misses the edit loads the graph compiled for the old layers."""
    import vllm

    rows = []
    for state in ("pristine", "patched"):
        _state(state)
        drafter, cache = Path(args.work) / f"drafter-cache-{state}", Path(args.work) / f"vllm-cache-{state}"
        shutil.rmtree(drafter, ignore_errors=True)
        shutil.rmtree(cache, ignore_errors=True)
        shutil.copytree(Path(args.work) / "drafter-specforge", drafter)
        env = dict(_runner_env(args.runner), VLLM_CACHE_ROOT=str(cache))
        for step, ids in (("first", parts.DEFAULT_IDS), ("edited", parts.TRAINED_IDS)):
            config = json.loads((drafter / "config.json").read_text())
            parts.write_json(drafter / "config.json", parts.with_eagle_config_ids(config, ids))
            t0 = time.perf_counter()
            rc, text, result = _serve(args.work, drafter, "compiled", env)
            cache_dir, loaded = parts.compile_cache(text)
            log(f"cache {state} {step} {ids}: exit {rc} in {time.perf_counter() - t0:.0f} s; cache {cache_dir} "
                f"loaded={loaded}; aux {None if result is None else result.get('aux_rpc')}; "
                f"{None if result is None else result['counters']}")
            for line in text.splitlines():  # the engine's own cache lines, kept should the call stop
                if parts.CACHE_LINE.search(line):
                    log("  " + line[-240:])
            (Path(args.work) / f"serve-cache-{state}-{step}.log").write_text(text[-20000:])
            if result is None:
                continue
            c = result["counters"]
            rows.append(parts.CacheRow(vllm.__version__, state, step, ids, cache_dir, loaded, result.get("aux_rpc"),
                                       c["drafts"], c["accepted"], c["per_pos"]))
    return rows


def matrix(args) -> list[parts.Row]:
    import vllm

    release, rows = vllm.__version__, []
    for state in ("pristine", "patched"):
        _state(state)
        for layout in parts.LAYOUTS:
            drafter = Path(args.work) / f"drafter-{layout}"
            for mode in args.modes.split(","):
                env = _runner_env(args.runner)
                t0 = time.perf_counter()
                rc, text, result = _serve(args.work, drafter, mode, env)
                # the log line, else what the model inside the worker was set to capture (the v2
                # runner logs nothing when the ids come from the drafter's config)
                logged = parts.aux_from_log(text) or (parts.aux_from_log(
                    "Using auxiliary layers from worker: " + str(result.get("aux_rpc"))) if result else None)
                cache_dir, loaded = parts.compile_cache(text)
                log(f"{state} {layout} {mode}: exit {rc} in {time.perf_counter() - t0:.0f} s; "
                    f"logged {logged}; compile cache {cache_dir} loaded={loaded}; "
                    f"{None if result is None else result['counters']}")
                (Path(args.work) / f"serve-{state}-{layout}-{mode}.log").write_text(text[-20000:])
                if result is None:
                    continue
                c = result["counters"]
                predicted = _predicted(Path(args.work), drafter, args.runner)
                rows.append(parts.Row(release, layout, args.runner, mode, state, logged[0] if logged else None,
                                      logged[1] if logged else "not logged", predicted,
                                      c["drafts"], c["accepted"], c["per_pos"], *result["diversity"],
                                      target_agrees=result["target_agrees"]))
    return rows


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd")
    for name in ("all", "models", "matrix", "cache"):
        p = sub.add_parser(name)
        p.add_argument("--work", default="/tmp/gpu-accept")
        p.add_argument("--target-seconds", type=float, default=60)
        p.add_argument("--drafter-seconds", type=float, default=120)
        p.add_argument("--runner", choices=("default", "v1", "v2"), default="default")
        p.add_argument("--modes", default="eager,compiled")
        p.add_argument("--reuse", action="store_true", help="keep the models already in --work")
        p.add_argument("--prompts", type=int, default=2048, help="training continuations the target generates")
        p.add_argument("--new-tokens", type=int, default=48, help="greedy tokens per continuation")
    s = sub.add_parser("serve")
    s.add_argument("--work", required=True)
    s.add_argument("--drafter", required=True)
    s.add_argument("--mode", choices=("eager", "compiled"), required=True)
    args = ap.parse_args(argv or ["all"])
    if args.cmd == "serve":
        return serve(args)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if args.cmd in ("all", "models", "cache") and not (args.reuse and (work / "train.json").is_file()):
        info = train_target(work, args.target_seconds)
        info["sizes"] = (args.prompts, args.new_tokens)
        info.update(train_drafter(work, info, args.drafter_seconds))
        parts.write_json(work / "train.json", {k: v for k, v in info.items() if k not in ("train", "held")})
    if args.cmd == "cache":
        rows = cache_case(args)
        text = parts.cache_table(rows)
        (work / f"cache-{rows[0].release if rows else 'none'}-{args.runner}.md").write_text(text + "\n")
        print(text)
        return 0 if len(rows) == 4 else 1
    if args.cmd in ("all", "matrix"):
        rows = matrix(args)
        text = parts.table(rows)
        (work / f"table-{rows[0].release if rows else 'none'}-{args.runner}.md").write_text(text + "\n")
        summary = json.loads((work / "train.json").read_text())
        print(f"offline (held-out): mean accepted length {summary['offline_mean_len']}, "
              f"per position {summary['offline_per_pos']}")
        print(text)
        return 0 if rows and all(r.drafts for r in rows) and not math.isnan(rows[0].mean_len) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
