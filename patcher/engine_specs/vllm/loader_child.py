"""Sent whole to the engine's interpreter (``python -c``): vLLM's own loader reads a drafter checkpoint.

Builds the drafter as the EAGLE proposer does: the launch line read by ``vllm serve``'s parser,
``EngineArgs.create_engine_config`` (the release's own speculative config: its reading of the
drafter's config.json, its speculators conversion, the architecture it resolves, and its refusals
of the launch), ``initialize_model`` on the draft model config; then ``DefaultModelLoader.load_weights``
feeds it the checkpoint (with vLLM's own strict tracking of weights no key filled, where the
release has it), and the proposer's sharing of the target's embedding and head runs after it.

Stand-ins, each because a build host has no GPU (none changes a parameter's name or shape):
- the meta device (true shapes, no memory);
- vLLM's CPU platform where no platform is found (as its CLI does for ``vllm bench``), with its
  ``check_and_update_config`` not run: that is the device's own adjustment of kernels, backends and
  graphs, and the CPU platform's refuses a CPU without Triton;
- one process group of one rank over gloo (tensor parallel 1: full shapes; sharding splits them
  the same way on every rank);
- ``torch.equal`` answers False while the target's weights are shared: meta tensors hold no
  values, and a drafter's own copy is kept unless equal to the target's (then either is the same);
- without a target folder, the drafter's own folder stands in as the model (its vocabulary and a
  one-layer "target"): what the draft model builds depends on the target only through the
  vocabulary size (the d2t table) and the layer numbering of its attention.

Sent after loader_child_common.py, whose names it uses (Refused, run).
"""

import os
import tempfile
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # sent after loader_child_common.py, which defines them
    from patcher.engine_specs.loader_child_common import Refused, bare_target, run, words

STATE: dict = {}  # what build leaves for load and share: the engine config, the draft config, the loader


def _cpu_platform():
    from vllm import platforms

    current = platforms.current_platform
    unspecified = getattr(type(current), "is_unspecified", None)
    if unspecified(current) if callable(unspecified) else type(current).__name__ == "UnspecifiedPlatform":
        from vllm.platforms.cpu import CpuPlatform

        current = CpuPlatform()
        platforms.current_platform = current
    current.check_and_update_config = lambda *a, **k: None


def _engine_config(req):
    import vllm.entrypoints.cli.serve as serve
    from vllm.engine.arg_utils import EngineArgs

    top = serve.FlexibleArgumentParser(prog="vllm")
    serve.ServeSubcommand().subparser_init(top.add_subparsers(dest="subparser"))
    args = top.parse_args(["serve", *req["argv"]])
    if getattr(args, "model_tag", None) is not None:
        args.model = args.model_tag
    engine_args = EngineArgs.from_cli_args(args)
    engine_args.tensor_parallel_size = 1  # one rank here: full shapes
    engine_args.pipeline_parallel_size = 1
    try:
        return engine_args.create_engine_config()
    except (ValueError, TypeError) as exc:  # the release refuses the launch's configuration
        raise Refused(words(exc)) from exc


def _one_rank(config):
    import torch.distributed as dist
    from vllm.config import set_current_vllm_config
    from vllm.distributed import parallel_state as ps

    if dist.is_initialized():
        return
    store = tempfile.NamedTemporaryFile(prefix="kimi-patcher-", delete=False).name
    os.unlink(store)
    with set_current_vllm_config(config):
        ps.init_distributed_environment(world_size=1, rank=0, local_rank=0,
                                        distributed_init_method=f"file://{store}", backend="gloo")
        ps.ensure_model_parallel_initialized(1, 1)


def build(req):
    STATE.clear()  # nothing of the previous drafter's
    import torch

    _cpu_platform()
    config = _engine_config(req)
    speculative = config.speculative_config
    if speculative is None or speculative.draft_model_config is None:
        raise Refused("the launch builds no draft model (no speculative config with a draft model)")
    draft = speculative.draft_model_config
    STATE["engine"] = config  # the target's side, before the draft's overrides
    if hasattr(speculative, "apply_draft_overrides"):  # the draft's own overrides (kv cache dtype...)
        config = speculative.apply_draft_overrides(config)
    _one_rank(config)
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.model_loader import get_model_loader
    from vllm.model_executor.model_loader.utils import initialize_model

    STATE.update(config=config, draft=draft, loader=get_model_loader(config.load_config))
    old = torch.get_default_dtype()
    torch.set_default_dtype(draft.dtype)
    try:
        with set_current_vllm_config(config), torch.device(req.get("device", "meta")):
            return initialize_model(vllm_config=config, model_config=draft)
    finally:
        torch.set_default_dtype(old)


def load(model, weights):
    import time

    from vllm.config import set_current_vllm_config

    loader = STATE["loader"]
    loader.get_all_weights = lambda model_config, model: weights
    loader.counter_before_loading_weights = time.perf_counter()
    with set_current_vllm_config(STATE["config"]):
        loader.load_weights(model, STATE["draft"])


def _target():
    """A target whose embedding and head are recognisable once the proposer shares them."""
    from torch import nn

    class Shared(nn.Module):
        weight = None  # not a tensor: the proposer's equality test reads "distinct" and keeps a drafter's own

    class Target(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = nn.Module()
            self.model.embed_tokens = Shared()
            self.lm_head = Shared()

    target = Target()
    return target, (target.model.embed_tokens, target.lm_head)


class _Proposer:
    """The proposer the sharing methods run on: the loaded model and the config; any other field
    of the proposer (its buffers, its options) reads as the speculative config's, else off."""

    def __init__(self, model, config):
        self.model, self.vllm_config = model, config
        self.speculative_config = config.speculative_config
        self.method = config.speculative_config.method

    def __getattr__(self, name):
        return getattr(self.speculative_config, name, False)


def share(model, req):
    """The proposer after the load, as this release does it: the v2 runner's ``load_eagle_model``
    or the v1 proposer's ``_maybe_share_embeddings`` / ``_maybe_share_lm_head`` (with the loaded
    model in place of ``get_model``'s), or, on releases whose proposer does it inline (before
    0.17), its rule: the embedding shared when its shape is the target's, an EAGLE-3 head kept.
    Returns the parameters that now hold the target's weights."""
    import importlib

    import torch

    names = dict(model.named_parameters(remove_duplicate=False))
    target, sentinels = _target()
    equal = torch.equal
    torch.equal = lambda *a, **k: False
    try:
        proposer = None
        for where in ("vllm.v1.spec_decode.llm_base_proposer", "vllm.v1.spec_decode.eagle"):
            try:
                mod = importlib.import_module(where)
            except ImportError:
                continue
            proposer = next((c for c in vars(mod).values() if isinstance(c, type)
                             and hasattr(c, "_maybe_share_embeddings") and hasattr(c, "_maybe_share_lm_head")), None)
            if proposer is not None:
                break
        if proposer is not None:
            fake = _Proposer(model, STATE["config"])
            proposer._maybe_share_embeddings(fake, target)
            proposer._maybe_share_lm_head(fake, target)
        else:
            try:
                utils = importlib.import_module("vllm.v1.worker.gpu.spec_decode.eagle.utils")
            except ImportError:
                utils = None
            if utils is not None and hasattr(utils, "load_eagle_model"):
                utils.get_model = lambda **kw: model
                utils.load_eagle_model(target, STATE["config"])
            else:
                embed = getattr(model.model, "embed_tokens", None)
                own = getattr(model, "has_own_embed_tokens", None)
                if embed is not None and (own is None or not own):
                    del model.model.embed_tokens
                    model.model.embed_tokens = sentinels[0]
    finally:
        torch.equal = equal
    out = set()
    for name in names:
        path = name.rsplit(".", 1)[0]
        try:
            module = model.get_submodule(path)
        except AttributeError:
            continue
        if any(module is s for s in sentinels):
            out.add(name)
    return out



def _registered(callee, keywords, text):
    """The class a wrapper's ``init_vllm_registered_model(..., hf_config=..., architectures=[...])``
    builds, as that function resolves it: the engine config with the text config and those
    architectures, through the release's registry."""
    import ast

    from vllm.model_executor.model_loader.utils import get_model_architecture

    if isinstance(callee, type) or "architectures" not in keywords:
        return callee
    config = STATE["engine"].with_hf_config(text, architectures=ast.literal_eval(keywords["architectures"]))
    return get_model_architecture(config.model_config)[0]


def capture(req):
    """The layers the target captures for this drafter, per model runner, by the release's code: the
    v1 runner's ``_setup_eagle3_aux_hidden_state_outputs`` (or, before it was a method, its
    ``_get_eagle3_aux_layers_from_config`` and the model's default, as ``load_model`` calls them),
    the v2 runner's ``set_eagle3_aux_hidden_state_layers``; each on the target class the release
    resolves, whose ``set_aux_hidden_state_layers`` records the layers."""
    import importlib

    import torch
    from vllm.model_executor.model_loader.utils import get_model_architecture

    config = STATE["engine"]
    cls, _ = get_model_architecture(config.model_config)
    hf = config.model_config.hf_config
    text = hf.get_text_config() if hasattr(hf, "get_text_config") else hf
    layers = int(text.num_hidden_layers)
    out = {}
    try:
        v1 = importlib.import_module("vllm.v1.worker.gpu_model_runner").GPUModelRunner
    except (ImportError, AttributeError):
        v1 = None
    if v1 is not None and hasattr(v1, "_get_eagle3_aux_layers_from_config"):
        bare, decoder = bare_target(torch, cls, hf, layers, _registered)
        runner = v1.__new__(v1)
        runner.speculative_config, runner.use_aux_hidden_state_outputs, runner.model = \
            config.speculative_config, True, bare
        runner.get_model = lambda: bare
        if hasattr(v1, "_setup_eagle3_aux_hidden_state_outputs"):
            runner._setup_eagle3_aux_hidden_state_outputs()
        else:
            bare.set_aux_hidden_state_layers(runner._get_eagle3_aux_layers_from_config()
                                             or bare.get_eagle3_default_aux_hidden_state_layers())
        out["v1"] = list(decoder.aux_hidden_state_layers)
    elif v1 is not None:
        out["v1"] = "the v1 runner reads the aux ids inline (no method to ask)"
    try:
        v2 = importlib.import_module("vllm.v1.worker.gpu.spec_decode.eagle.eagle3_utils")
    except ImportError:
        v2 = None
    if v2 is not None and hasattr(v2, "set_eagle3_aux_hidden_state_layers"):
        bare, decoder = bare_target(torch, cls, hf, layers, _registered)
        v2.set_eagle3_aux_hidden_state_layers(bare, config.speculative_config)
        out["v2"] = list(decoder.aux_hidden_state_layers)
    return out


run(build, load, share, capture)
