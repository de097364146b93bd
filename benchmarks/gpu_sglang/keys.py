#!/usr/bin/env python3
"""GPU proof (issue 43, item 3): a drafter's tensors, as a training tool names them, are loaded as
trained by a real SGLang engine, or refused loudly; never random weights in silence.

For each drafter layout (the tiny pair of make_models.py; its decoder keys renamed as each tool
writes them), a fresh process starts ``sglang.Engine`` with EAGLE-3 and, inside the scheduler
process, right after the draft model is loaded, compares every tensor of the checkpoint with the
parameter the engine holds for it (SGLang's own name mapping: ``layers.0.`` and ``midlayer.``):
``KEYS layout=... loaded=N/M equal=K/M missing=[...]``. A load that raises prints
``KEYS layout=... refused=<error>``. Nothing is generated: the question is what the engine holds.

    keys.py TARGET DRAFTER --layout layers0|midlayer|typo [--timeout 240]
"""

import argparse
import json
import os
import shutil
import sys
import tempfile

PROBE = "GPUSG_KEYS_PROBE"  # "<layout>|<checkpoint folder>" in the scheduler's environment


def _checkpoint(folder):
    from safetensors.torch import load_file

    return load_file(os.path.join(folder, "model.safetensors"))


def _compare(model, folder, layout):
    """The checkpoint's tensors against the drafter's parameters, each by the name SGLang maps it to."""
    params = dict(model.named_parameters())
    tensors = _checkpoint(folder)
    equal, missing = 0, []
    # SGLang fuses q/k/v into qkv_proj and gate/up into gate_up_proj: those have no parameter of
    # their own name to compare; every other tensor maps one to one.
    fused = ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj")
    tensors = {k: v for k, v in tensors.items() if k not in ("d2t", "t2d") and not any(f in k for f in fused)}
    for name, t in tensors.items():
        names = {name, name.replace("layers.0.", "midlayer."), name.replace("midlayer.", "layers.0.")}
        cands = [n for n in params if any(n == x or n.endswith("." + x) for x in names)]
        if not cands:
            missing.append(name)
            continue
        p = params[cands[0]].detach().float().cpu()
        if p.shape == t.shape and bool((p - t.float()).abs().max() < 1e-3):
            equal += 1
        else:
            missing.append(name + " (differs)")
    print(f"KEYS layout={layout} equal={equal}/{len(tensors)} not_loaded={json.dumps(missing)}", flush=True)


def _install_probe():
    import importlib.abc
    import importlib.util

    layout, folder = os.environ[PROBE].split("|", 1)
    target = "sglang.srt.model_executor.model_runner"

    def patch(mod):
        orig = mod.ModelRunner.load_model

        def wrapped(self, *a, **k):
            out = orig(self, *a, **k)
            if getattr(self, "is_draft_worker", False):
                try:
                    _compare(self.model, folder, layout)
                except Exception as e:  # noqa: BLE001 - the probe must not break the run
                    print(f"KEYS probe failed: {e!r}", flush=True)
            return out

        mod.ModelRunner.load_model = wrapped

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, tgt=None):
            if name != target:
                return None
            sys.meta_path.remove(self)
            try:
                spec = importlib.util.find_spec(name)
            finally:
                sys.meta_path.insert(0, self)
            orig_exec = spec.loader.exec_module

            def exec_module(module):
                orig_exec(module)
                patch(module)

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, Finder())


if os.environ.get(PROBE):
    _install_probe()


def laid_out(drafter, layout, dest):
    """The drafter with its decoder keys as ``layout`` names them: speculators' ``layers.0.*``
    (as make_models writes it), SpecForge's ``midlayer.*``, or one key no loader knows (a tool's
    name drift: ``mlp.down_proj`` written ``mlp.down_prj``)."""
    from safetensors.torch import save_file

    shutil.copytree(drafter, dest)
    tensors = _checkpoint(drafter)
    if layout == "midlayer":
        tensors = {k.replace("layers.0.", "midlayer.", 1): v for k, v in tensors.items()}
    elif layout == "typo":
        tensors = {k.replace("mlp.down_proj", "mlp.down_prj"): v for k, v in tensors.items()}
    save_file(tensors, os.path.join(dest, "model.safetensors"), metadata={"format": "pt"})
    return dest


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("target")
    ap.add_argument("drafter")
    ap.add_argument("--layout", choices=("layers0", "midlayer", "typo"), required=True)
    args = ap.parse_args()
    folder = laid_out(args.drafter, args.layout, os.path.join(tempfile.mkdtemp(), args.layout))
    os.environ[PROBE] = f"{args.layout}|{folder}"  # inherited by the spawned scheduler
    _install_probe()
    import sglang

    kw = dict(model_path=args.target, speculative_algorithm="EAGLE3", speculative_draft_model_path=folder,
              speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4,
              attention_backend="triton", mem_fraction_static=0.5, disable_cuda_graph=True,
              sampling_backend="pytorch", grammar_backend="none", random_seed=0)
    try:
        engine = sglang.Engine(**kw)
    except Exception as e:  # noqa: BLE001 - a refusal at load is the answer for some layouts
        print(f"KEYS layout={args.layout} refused={type(e).__name__}: {str(e)[:300]}", flush=True)
        return 0
    print(f"KEYS layout={args.layout} started", flush=True)
    engine.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
