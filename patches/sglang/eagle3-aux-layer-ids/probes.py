"""Probes for sglang/eagle3-aux-layer-ids. Each check(module) raises AssertionError.

The target is the real DeepseekV3ForCausalLM built with object.__new__ (no weights, no GPU).
The expected layers are computed here from 0.5.13's rule, not read from the engine:
ids starting at 1 are "output of layer X" and shift by one; any other list is the
capture-before-layer index and is taken as given; no ids means [2, N//2, N-3].

The graph probe runs the engine's own start-up code on stand-ins: the statements of
ModelRunner.initialize() that configure the capture, warm up and build the graphs (in their
real order), the real ModelRunner._dummy_run up to its buffer set-up, and the real
CudaGraphRunner.__init__ up to self.capture(), with everything that would need a GPU
replaced by inert stand-ins. The hook must be called once, with the drafter's ids (never
without ids, which means the default), and what the model captures at every dummy pass,
every graph capture and at the end must be the rule's answer.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import textwrap
import types
from types import SimpleNamespace

KIMI_LAYERS = 61
DEFAULT = [2, KIMI_LAYERS // 2, KIMI_LAYERS - 3]  # [2, 30, 58]
# One list starting at 1, two not; none of their expected captures is the default, except
# [2, 30, 58] itself, which tells the 0.5.13 rule from the old "+1 always" one.
STARTS_AT_1 = [1, 20, 40]
NOT_AT_1 = [5, 20, 40]
SPECULATORS_DEFAULT = [2, 30, 58]


def expected_capture(ids):
    """0.5.13's DeepseekV2ForCausalLM.set_eagle3_layers_to_capture, restated."""
    if ids is None:
        return list(DEFAULT)
    if ids and ids[0] == 1:
        return [i + 1 for i in ids]
    return list(ids)


def _bare(cls, **attrs):
    obj = object.__new__(cls)
    for k, v in attrs.items():
        object.__setattr__(obj, k, v)  # bypass nn.Module.__setattr__ (no __init__ ran)
    return obj


def _target(ds_module):
    """A Kimi-K2-sized DeepseekV3ForCausalLM as __init__ leaves it: nothing captured yet."""
    return _bare(
        ds_module.DeepseekV3ForCausalLM,
        pp_group=SimpleNamespace(is_last_rank=True),
        config=SimpleNamespace(num_hidden_layers=KIMI_LAYERS),
        model=SimpleNamespace(layers_to_capture=[]),
        capture_aux_hidden_states=False,
    )


def _captured(lm):
    return (lm.capture_aux_hidden_states, list(lm.model.layers_to_capture))


def explicit_ids_follow_0513_rule(module) -> None:
    for ids in (STARTS_AT_1, NOT_AT_1, SPECULATORS_DEFAULT, None):
        lm = _target(module)
        lm.set_eagle3_layers_to_capture(None if ids is None else list(ids))
        want = (True, expected_capture(ids))
        assert _captured(lm) == want, (
            f"set_eagle3_layers_to_capture({ids}) captures {_captured(lm)}, 0.5.13's rule says {want}"
        )


# ----------------------------------------------------------------- inert stand-ins


class _AnyMeta(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Any()


class _Any(metaclass=_AnyMeta):
    """Whatever GPU-side code asks for: callable, indexable, iterable (two items), falsy."""

    def __init__(self, *a, **k):
        pass

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Any()

    def __call__(self, *a, **k):
        return _Any()

    def __getitem__(self, k):
        return _Any()

    def __setitem__(self, k, v):
        pass

    def __iter__(self):
        return iter((_Any(), _Any()))

    def __len__(self):
        return 2

    def __bool__(self):
        return False

    def __index__(self):
        return 1

    def __int__(self):
        return 1

    def __float__(self):
        return 1.0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __lt__(self, other):
        return False

    __le__ = __gt__ = __ge__ = __lt__

    def __eq__(self, other):
        return other is self

    def __hash__(self):
        return id(self)

    def _num(self, *other):
        return _Any()

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _num
    __floordiv__ = __rfloordiv__ = __truediv__ = __rtruediv__ = __mod__ = __neg__ = _num
    __or__ = __ror__ = __and__ = __rand__ = _num


class _Stop(BaseException):
    """Raised where the probe has seen what it needs; not an Exception, so no handler eats it."""


class _Fallback:
    """Named attributes, then _Any for every other one."""

    def __init__(self, **attrs):
        self.__dict__.update(attrs)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Any()


def _code_names(code) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


def _inert_globals(fn) -> dict:
    """fn's module globals with every global it names replaced by an inert stand-in."""
    g = dict(fn.__globals__)
    for name in _code_names(fn.__code__):
        if name in g:
            g[name] = type(name, (_Any,), {}) if isinstance(g[name], type) else _Any()
    return g


def _rebind(fn, g):
    new = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)
    new.__kwdefaults__ = fn.__kwdefaults__  # 0.5.12+: keyword-only arguments with defaults
    return new


# --------------------------------------------------------------- the start-up path


def _graph_runner_init(cgr_module, runner, snapshots):
    """Run the real CudaGraphRunner.__init__ until it starts capturing."""
    base = cgr_module.CudaGraphRunner

    def capture(self, *a, **k):
        snapshots["graphs"].append(_captured(runner.model))
        raise _Stop

    def inert(self, *a, **k):
        return _Any()

    methods = {}
    for klass in reversed(base.__mro__[:-1]):
        for name, value in vars(klass).items():
            if inspect.isfunction(value) and name != "__init__":
                methods[name] = inert
    methods["capture"] = capture
    sub = type("ProbeCudaGraphRunner", (base,), methods)
    view = _Fallback(
        model=runner.model,
        spec_algorithm=runner.spec_algorithm,
        is_draft_worker=False,
        eagle_use_aux_hidden_state=True,
        device="cuda",
        server_args=_Fallback(speculative_num_draft_tokens=4, disable_cuda_graph=False),
    )
    init = _rebind(base.__init__, _inert_globals(base.__init__))
    try:
        init(object.__new__(sub), view)
    except _Stop:
        return
    raise AssertionError("CudaGraphRunner.__init__ returned without reaching self.capture()")


def _dummy_pass(mr_module, runner, snapshots):
    """Run the real ModelRunner._dummy_run (0.5.6+) until it builds its input buffers."""
    fn = getattr(mr_module.ModelRunner, "_dummy_run", None)
    if fn is None:
        return

    def stop(*a, **k):
        snapshots["dummy"].append(_captured(runner.model))
        raise _Stop

    g = dict(fn.__globals__)
    never = lambda *a, **k: False  # noqa: E731 - no DP attention / gathered buffers here
    g.update(require_mlp_tp_gather=stop, require_gathered_buffer=never, require_mlp_sync=never,
             set_torch_compile_config=lambda *a, **k: None)
    try:
        _rebind(fn, g)(runner, 1)
    except _Stop:
        return
    raise AssertionError("ModelRunner._dummy_run returned without reaching its buffer set-up")


_START_UP_CALLS = {"set_eagle3_layers_to_capture", "init_aux_hidden_state_capture", "kernel_warmup",
                   "init_device_graphs"}


def _start_up_statements(initialize) -> ast.Module:
    """initialize()'s top-level statements that configure capture, warm up or build graphs."""
    fn = ast.parse(textwrap.dedent(inspect.getsource(initialize))).body[0]
    keep = [
        stmt for stmt in fn.body
        if any(isinstance(n, ast.Attribute) and n.attr in _START_UP_CALLS for n in ast.walk(stmt))
    ]
    assert keep, "ModelRunner.initialize() neither configures aux capture nor builds graphs"
    wrapper = ast.parse("def _start_up(self, server_args):\n    pass\n")
    wrapper.body[0].body = keep
    return ast.fix_missing_locations(wrapper)


def _run_start_up(mr_module, cgr_module, ds_module, spec_module, ids):
    ModelRunner = mr_module.ModelRunner
    lm = _target(ds_module)
    snapshots: dict = {"dummy": [], "graphs": [], "calls": []}
    hook = lm.set_eagle3_layers_to_capture

    def recording_hook(layer_ids=None):
        snapshots["calls"].append(None if layer_ids is None else list(layer_ids))
        return hook(layer_ids)

    object.__setattr__(lm, "set_eagle3_layers_to_capture", recording_hook)
    server_args = _Fallback(speculative_draft_model_path="drafter", speculative_draft_model_revision=None,
                            enable_torch_compile=False, enable_return_hidden_states=False,
                            speculative_num_draft_tokens=4, forward_hooks=None)
    runner = _bare(
        # Attributes the start-up statements read and the probe does not care about (feature
        # switches such as enable_hisparse on 0.5.12+) read as off.
        type("ProbeModelRunner", (ModelRunner,), {"__getattr__": _Fallback.__getattr__}),
        model=lm,
        device="cuda",
        spec_algorithm=spec_module.SpeculativeAlgorithm.EAGLE3,
        is_draft_worker=False,
        is_generation=True,
        eagle_use_aux_hidden_state=True,
        eagle_aux_hidden_state_layer_ids=list(ids),
        dflash_use_aux_hidden_state=False,
        server_args=server_args,
        attn_backend=_Any(),
    )
    for name in ("init_cublas", "init_attention_backend", "_pre_initialize_flashinfer_allreduce_workspace"):
        object.__setattr__(runner, name, lambda *a, **k: None)
    object.__setattr__(runner, "kernel_warmup", lambda: _dummy_pass(mr_module, runner, snapshots))

    def init_device_graphs():
        _graph_runner_init(cgr_module, runner, snapshots)

    object.__setattr__(runner, "init_device_graphs", init_device_graphs)

    class DraftConfig:  # 0.5.1-0.5.7 read the drafter's ids inside initialize()
        @staticmethod
        def from_server_args(*a, **k):
            return SimpleNamespace(hf_config=SimpleNamespace(
                eagle_config={"eagle_aux_hidden_state_layer_ids": list(ids)}))

    g = dict(ModelRunner.initialize.__globals__)
    g["ModelConfig"] = DraftConfig
    exec(compile(_start_up_statements(ModelRunner.initialize), mr_module.__file__, "exec"), g)
    g["_start_up"](runner, server_args)
    snapshots["end"] = [_captured(lm)]
    return snapshots


def ids_survive_graph_capture_and_dummy_run(module) -> None:
    cgr_module = importlib.import_module("sglang.srt.model_executor.cuda_graph_runner")
    ds_module = importlib.import_module("sglang.srt.models.deepseek_v2")
    spec_module = importlib.import_module("sglang.srt.speculative.spec_info")
    has_dummy_run = hasattr(module.ModelRunner, "_dummy_run")  # 0.5.6+
    for ids in (STARTS_AT_1, NOT_AT_1):
        want = (True, expected_capture(ids))
        seen = _run_start_up(module, cgr_module, ds_module, spec_module, ids)
        # As 0.5.11+: the drafter's ids are applied once, never replaced by an argument-less call.
        assert seen["calls"] == [list(ids)], (
            f"drafter ids {ids}: start-up called set_eagle3_layers_to_capture with {seen['calls']} "
            "(None = the default layers)"
        )
        assert seen["graphs"], "initialize() did not build the CUDA graph runner"
        assert seen["dummy"] or not has_dummy_run, "the warm-up did not run the dummy pass"
        for moment in ("dummy", "graphs", "end"):
            for got in seen[moment]:
                assert got == want, (
                    f"drafter ids {ids}: at the {moment} step the target captures {got}, "
                    f"0.5.13's rule says {want}"
                )
