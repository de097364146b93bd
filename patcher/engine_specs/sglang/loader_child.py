"""Sent whole to the engine's interpreter (``python -c``): SGLang's own loader reads a drafter checkpoint.

Builds the drafter as the EAGLE worker's model runner does: the launch line read by
``prepare_server_args``, the drafter's ``ModelConfig.from_server_args(..., is_draft_model=True)``
(SGLang's own reading of config.json), the class ``get_model_architecture`` resolves, constructed
by ``_initialize_model``; then ``DefaultModelLoader.load_weights_and_postprocess`` feeds it the
checkpoint, and the worker's ``set_embed`` / ``set_embed_and_head`` put in the target's weights.

Stand-ins, each because a build host has no GPU (none changes a parameter's name or shape):
- the meta device instead of CUDA (true shapes, no memory);
- without CUDA, ``SGLANG_USE_CPU_ENGINE=1``: SGLang's CPU engine path builds the same modules
  without importing GPU kernels at construction (releases before 0.5.8 then take vLLM's activation
  and norm modules, which a host without vLLM lacks: those say they cannot be asked);
- ``ServerArgs.__post_init__`` is not run: it checks the GPU and the target (the parser child
  reads the line the same way);
- where ``sgl_kernel`` (SGLang's kernel library) does not import, an inert stand-in: the CPU engine
  path of 0.5.2x imports its CPU ops at module level; building and loading on meta calls none of
  them (a call raises);
- one process group of one rank over gloo (tensor parallel 1: full shapes; sharding splits them
  the same way on every rank);
- ``torch.cuda.synchronize`` / ``empty_cache`` are no-ops while the target's weights are shared
  (``set_embed`` calls them);
- the rotary embedding built as on a GPU (``get_rope``, not the CPU engine's ``get_rope_cpu``, which
  asserts a DeepSeek YaRN scaling a GPU server does not need): it holds buffers, never a parameter.

Sent after loader_child_common.py, whose names it uses (Refused, run).
"""

import os
import tempfile
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # sent after loader_child_common.py, which defines them
    from patcher.engine_specs.loader_child_common import Refused, bare_target, run

STATE: dict = {}  # what build leaves for capture: the server args


def _kernels_stand_in():
    """``sgl_kernel`` where it does not import: a package whose every name is a function that raises."""
    import importlib.abc
    import importlib.machinery
    import importlib.util
    import sys
    import types

    try:
        if importlib.util.find_spec("sgl_kernel") is not None:
            return
    except (ImportError, ValueError):
        pass

    class Kernel:
        """A name of sgl_kernel: its attributes are names too, and calling one raises."""

        def __init__(self, name):
            self._name = name

        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return Kernel(f"{self._name}.{name}")

        def __call__(self, *args, **kwargs):
            raise RuntimeError(f"{self._name}: no kernel runs while the loader is asked")

    class Inert(types.ModuleType):
        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return Kernel(f"{self.__name__}.{name}")

    class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, fullname, path=None, target=None):
            if fullname.partition(".")[0] == "sgl_kernel":
                return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
            return None

        def create_module(self, spec):
            module = Inert(spec.name)
            module.__path__ = []
            return module

        def exec_module(self, module):
            pass

    sys.meta_path.append(Finder())


def _rope_as_on_gpu():
    """``get_rope_wrapper`` takes the CPU engine's ``get_rope_cpu`` for device "cpu"; on a GPU it
    calls ``get_rope``. The wrapper looks the name up in its module when called: point it there."""
    try:
        from sglang.srt.layers.rotary_embedding import get_rope_wrapper
    except ImportError:  # a release without the wrapper builds get_rope itself
        return
    import sys

    module = sys.modules[get_rope_wrapper.__module__]
    gpu = getattr(module, "get_rope", None)
    if gpu is None or not hasattr(module, "get_rope_cpu"):
        return

    def as_on_gpu(head_size, rotary_dim, max_position, base, is_neox_style=True, rope_scaling=None,
                  dtype=None, partial_rotary_factor=1.0, device=None):  # get_rope_cpu's parameters
        return gpu(head_size, rotary_dim, max_position, base, is_neox_style, rope_scaling, dtype,
                   partial_rotary_factor)  # what the wrapper hands get_rope on a GPU

    module.get_rope_cpu = as_on_gpu


def _server_args(req):
    from sglang.srt import server_args as sa

    real = sa.ServerArgs.__dict__.get("__post_init__")
    sa.ServerArgs.__post_init__ = lambda self, *a, **k: None
    try:
        args = sa.prepare_server_args(list(req["argv"]))
    finally:
        if real is not None:
            sa.ServerArgs.__post_init__ = real
    for field in ("decrypted_config_file", "decrypted_draft_config_file"):  # set by __post_init__
        if not hasattr(args, field):
            setattr(args, field, None)
    for width in ("tp_size", "pp_size", "dp_size", "ep_size"):  # one rank here: full shapes
        if getattr(args, width, None) not in (None, 1):
            setattr(args, width, 1)
    if hasattr(sa, "set_global_server_args_for_scheduler"):
        sa.set_global_server_args_for_scheduler(args)
    try:  # 0.5.23: the process's place in the topology is published before any group is built
        from sglang.srt.runtime_context import SpawnRanks, publish
    except ImportError:
        pass
    else:
        publish(args, role="scheduler", ranks=SpawnRanks(world_rank=0, dp_rank=None, gpu_id=None))
    return args


def _one_rank():
    import inspect

    import torch.distributed as dist
    from sglang.srt.distributed import parallel_state as ps

    if dist.is_initialized():
        return
    store = tempfile.NamedTemporaryFile(prefix="kimi-patcher-", delete=False).name
    os.unlink(store)
    ps.init_distributed_environment(backend="gloo", world_size=1, rank=0, local_rank=0,
                                    distributed_init_method=f"file://{store}")
    # before 0.5.23 the sizes are arguments; from it they come from the server args' topology
    wants = inspect.signature(ps.initialize_model_parallel).parameters
    ps.initialize_model_parallel(**({"tensor_model_parallel_size": 1} if "tensor_model_parallel_size" in wants else {}))


def build(req):
    STATE.clear()  # nothing of the previous drafter's
    import inspect

    import torch

    if not torch.cuda.is_available():  # a build host: SGLang's CPU engine path (module docstring)
        os.environ.setdefault("SGLANG_USE_CPU_ENGINE", "1")
        _kernels_stand_in()
        _rope_as_on_gpu()
    from sglang.srt.configs.load_config import LoadConfig
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.model_loader import loader
    from sglang.srt.model_loader.utils import get_model_architecture, set_default_torch_dtype

    args = _server_args(req)
    STATE["args"] = args
    _one_rank()
    config = ModelConfig.from_server_args(args, model_path=req["drafter"], is_draft_model=True)
    try:
        get_model_architecture(config)
    except ValueError as exc:  # the registry has no class for the drafter: the server stops here
        raise Refused(str(exc)) from exc
    load_config = LoadConfig()
    kwargs = {}
    if "quant_config" in inspect.signature(loader._initialize_model).parameters:
        get_quant = getattr(loader, "_get_quantization_config", None)
        kwargs["quant_config"] = get_quant(config, load_config) if get_quant else None
    with set_default_torch_dtype(config.dtype), torch.device(req.get("device", "meta")):
        return loader._initialize_model(config, load_config, **kwargs)


def load(model, weights):
    """The model's own ``load_weights``, as ``DefaultModelLoader.load_weights_and_postprocess`` calls
    it; the quantisation post-processing after it moves weights to the device and maps no key."""
    model.load_weights(weights)


def share(model, req):
    """The EAGLE worker after the load: the target's embedding (``set_embed``), or its embedding and
    head where the drafter takes its head from the target (``load_lm_head_from_target``). Returns the
    parameters that now hold the target's weights."""
    import torch

    embed = torch.nn.Parameter(torch.empty(0, device="meta"), requires_grad=False)
    head = torch.nn.Parameter(torch.empty(0, device="meta"), requires_grad=False)
    sync, empty = torch.cuda.synchronize, torch.cuda.empty_cache
    torch.cuda.synchronize = torch.cuda.empty_cache = lambda *a, **k: None
    try:
        if getattr(model, "load_lm_head_from_target", False) and hasattr(model, "set_embed_and_head"):
            model.set_embed_and_head(embed, head)
        elif hasattr(model, "set_embed"):
            model.set_embed(embed)
    finally:
        torch.cuda.synchronize, torch.cuda.empty_cache = sync, empty
    return {name for name, p in model.named_parameters(remove_duplicate=False) if p is embed or p is head}



def _eagle3_block(module):
    """The release's own statements that read the aux ids when they sit inline in the model runner
    (before 0.5.16): the ``if`` on ``is_eagle3()`` that names them, as a function of the runner and
    the server args, compiled in the runner module's namespace."""
    import ast
    import inspect
    import textwrap

    tree = ast.parse(textwrap.dedent(inspect.getsource(module.ModelRunner)))
    blocks = [n for n in ast.walk(tree) if isinstance(n, ast.If) and "is_eagle3" in ast.unparse(n.test)
              and "eagle_aux_hidden_state_layer_ids" in ast.unparse(n)]
    if not blocks:
        raise LookupError("the model runner has no is_eagle3() block that reads eagle_aux_hidden_state_layer_ids")
    source = "def _kp_block(self, server_args):\n" + textwrap.indent(ast.unparse(blocks[0]), "    ")
    namespace = dict(vars(module))
    exec(compile(source, inspect.getsourcefile(module.ModelRunner) or "<model_runner>", "exec"), namespace)
    return namespace["_kp_block"]


def capture(req):
    """The layers the target captures for this drafter: the release's model runner reads the ids
    from the drafter's config (its resolver from 0.5.16, its inline block before), and the target
    class's ``set_eagle3_layers_to_capture`` turns them into ``layers_to_capture``."""
    import torch
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.model_executor import model_runner
    from sglang.srt.model_loader.utils import get_model_architecture
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    args = STATE["args"]
    target = ModelConfig.from_server_args(args)
    cls, _ = get_model_architecture(target)
    text = getattr(target, "hf_text_config", target.hf_config)
    bare, decoder = bare_target(torch, cls, target.hf_config, int(text.num_hidden_layers))
    algorithm = SpeculativeAlgorithm.from_string(args.speculative_algorithm)
    try:
        from sglang.srt.model_executor.model_runner_components import spec_aux_hidden_state as resolver
    except ImportError:
        resolver = None
    if resolver is not None:
        got = resolver.resolve_spec_aux_hidden_state_config(server_args=args, model_config=target,
                                                            spec_algorithm=algorithm, is_draft_worker=False)
        use, ids = got.eagle_use_aux_hidden_state, got.eagle_aux_hidden_state_layer_ids
    else:
        runner = model_runner.ModelRunner.__new__(model_runner.ModelRunner)  # its methods, no __init__
        runner.spec_algorithm, runner.is_draft_worker, runner.model = algorithm, False, bare
        runner.server_args, runner.model_config = args, target
        _eagle3_block(model_runner)(runner, args)
        if hasattr(decoder, "layers_to_capture"):  # the block called the setter itself
            return {"": list(decoder.layers_to_capture)}
        use = getattr(runner, "eagle_use_aux_hidden_state", True)
        ids = getattr(runner, "eagle_aux_hidden_state_layer_ids", None)
    if not use:
        return {"": []}
    bare.set_eagle3_layers_to_capture(ids)  # as the runner calls it (init_aux_hidden_state_capture)
    return {"": list(decoder.layers_to_capture)}


run(build, load, share, capture)
