"""Run inside a CPU env's interpreter: what the release's own loader really did with real tensors.

The truth the grid (tests/test_drafter_loader.py) compares the check with. The drafter is built as
the product's loader child builds it (its ``build``, on the CPU with real memory, tiny shapes),
but its weights are read from the safetensors files by the release's own iterator and load path
(SGLang: ``DefaultModelLoader._get_all_weights`` and ``load_weights_and_postprocess``; vLLM:
``DefaultModelLoader.load_weights``, strict tracking included), and nothing is recorded on the
way: afterwards each parameter's values are compared with the checkpoint's tensors (random, so
a match tells which tensor filled which rows) and with the target's (the engine's sharing, run
with recognisable values). stdin: JSON {"engine", "child": script text, "asks": [request]};
one JSON line per ask on stdout: {"error"} or {"params": {name: {"rows", "filled", "target"}},
"found": [checkpoint keys whose values some parameter holds]}.
"""

import json
import re
import sys
import traceback


def _child(text):
    ns = {"__name__": "kimi_patcher_loader_child"}
    exec(compile(re.sub(r"\nrun\(build, load, share(, capture)?\)", "\n", text), "<loader child>", "exec"), ns)
    return ns


def _read(files):
    from safetensors.torch import load_file

    out = {}
    for f in files:
        out.update(load_file(f))
    return out


def _load_sglang(ns, model, req):
    import torch
    from sglang.srt.configs.load_config import LoadConfig
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.model_loader.loader import DefaultModelLoader

    args = ns["_server_args"](req)
    config = ModelConfig.from_server_args(args, model_path=req["drafter"], is_draft_model=True)
    loader = DefaultModelLoader(LoadConfig())
    DefaultModelLoader.load_weights_and_postprocess(model, loader._get_all_weights(config, model),
                                                    torch.device("cpu"))


def _load_vllm(ns, model, req):
    import time

    from vllm.config import set_current_vllm_config

    loader = ns["STATE"]["loader"]
    loader.counter_before_loading_weights = time.perf_counter()
    with set_current_vllm_config(ns["STATE"]["config"]):
        loader.load_weights(model, ns["STATE"]["draft"])


def _rows(p, c):
    """Row offsets where checkpoint tensor ``c`` sits whole inside parameter ``p`` (both 2-D)."""
    import torch

    if c.shape[1] != p.shape[1] or c.shape[0] > p.shape[0]:
        return []
    first = (p == c[0]).all(dim=1).nonzero().flatten().tolist()
    return [r for r in first if torch.equal(p[r:r + c.shape[0]], c)]


def _2d(t):
    t = t.detach()
    if t.dim() == 0:
        return t.reshape(1, 1)
    return t.reshape(t.shape[0], -1)


def judge(ns, engine, req):
    import torch

    try:
        model = ns["build"](dict(req, device="cpu"))
    except ns["Refused"] as exc:  # the release refuses the drafter before loading
        return {"error": str(exc)[:600], "stage": "build"}
    except Exception as exc:  # the stand-ins cannot build it here: the loader cannot be asked
        return {"error": f"{type(exc).__name__}: {exc}"[:600], "stage": "unavailable"}
    ckpt = _read(req["files"])
    {"sglang": _load_sglang, "vllm": _load_vllm}[engine](ns, model, req)
    params = dict(model.named_parameters(remove_duplicate=False))
    after = {}
    found = set()
    target = set(ns["share"](model, req))  # what the worker replaces by the target's after the load
    for name, p in params.items():
        pp = _2d(p.float() if p.is_floating_point() else p)
        covered = torch.zeros(pp.shape[0], dtype=torch.bool)
        rows = []
        for key, c in ckpt.items():
            cc = _2d(c.to(p.dtype).float() if p.is_floating_point() else c.to(p.dtype))
            for r in _rows(pp, cc):
                covered[r:r + cc.shape[0]] = True
                rows.append([key, r])
                found.add(key)
        owner = model.get_submodule(name.rsplit(".", 1)[0]) if "." in name else model
        org = getattr(owner, "org_vocab_size", None)
        need = org if isinstance(org, int) and 0 < org < pp.shape[0] else pp.shape[0]
        after[name] = {"rows": rows, "filled": float(covered[:need].float().mean()), "target": name in target}
    # what the model keeps outside its parameters (SGLang's hot_token_id from d2t)
    for module in model.modules():
        for value in vars(module).values():
            if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
                for key, c in ckpt.items():
                    if c.dtype == torch.int64 and value.shape == c.shape:
                        if torch.equal(value - torch.arange(value.shape[0]), c) or torch.equal(value, c):
                            found.add(key)
    return {"params": after, "found": sorted(found)}


def main():
    req = json.loads(sys.stdin.read())
    ns = _child(req["child"])
    for one in req["asks"]:
        try:
            out = judge(ns, req["engine"], one)
        except BaseException as exc:  # the release refuses: its own words
            out = {"error": f"{type(exc).__name__}: {exc}"[:600], "where": traceback.format_exc(limit=-1)[-300:]}
        print("@@oracle@@ " + json.dumps(out), flush=True)


main()
