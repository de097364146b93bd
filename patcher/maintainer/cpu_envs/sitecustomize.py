"""Import-only shims for the CPU test environments of patcher/maintainer/cpu_env.py.

This file is copied into the site-packages of those test venvs only (never into a
real engine install). Python runs it at every interpreter start in that venv, so
each shim is per process and touches nothing until the module it is about is
imported. None of them makes a kernel run: everything they stand in for raises
when it is called. They exist so that our probes can *import* the engine modules
we patch on a machine with no GPU and with the CPU build of torch.

``SHIMS`` is rewritten by cpu_env.py with the shims the env's line needs.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types

SHIMS: frozenset[str] = frozenset()  # set per line by patcher/maintainer/cpu_env.py


# --- torchvision --------------------------------------------------------------
# PyPI's torchvision is built against a CUDA torch; beside the CPU torch its _C
# extension does not load, and ``torchvision/__init__`` then dies in
# ``_meta_registrations`` with "operator torchvision::nms does not exist".
# SGLang imports torchvision unconditionally (multimodal utils). An empty
# ``_meta_registrations`` lets the rest of torchvision import; its ops stay
# unusable (they would be anyway: the extension is not loaded).
def _torchvision_shim() -> None:
    sys.modules.setdefault(
        "torchvision._meta_registrations",
        types.ModuleType("torchvision._meta_registrations"),
    )


# --- sgl_kernel (and vllm for SGLang <= 0.5.7) ----------------------------------
# Old SGLang (<= 0.5.9) imports ``sgl_kernel`` unconditionally on non-NPU/HIP
# platforms (e.g. layers/moe/moe_runner/deep_gemm.py). The real package cannot
# load without libcuda/libnvrtc. SGLang <= 0.5.7 additionally falls back to
# ``from vllm.model_executor.layers.activation import GeluAndMul, SiluAndMul``
# (layers/activation.py, layernorm.py) on a CPU without AMX; the SGLang test envs
# hold no vLLM, so that name is stubbed too for those releases only.
# This finder sits at the *end* of sys.meta_path, so it only answers when no real
# package of that name is importable, and it serves inert modules whose every
# attribute is a stub class: subclassable, attribute access yields more stubs,
# and calling one raises.
class _StubMeta(type):
    def __call__(cls, *args, **kwargs):
        raise RuntimeError(f"{cls.__qualname__} is a CPU test stub (its package is not installed)")

    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _stub(f"{cls.__qualname__}.{name}")


def _any_schema(cls, source, handler):
    # vLLM <= 0.16 declares pydantic fields typed with openai_harmony classes: a stub
    # stands for "anything" there, so the model class can still be built at import.
    from pydantic_core import core_schema

    return core_schema.any_schema()


def _stub(qualname: str) -> type:
    module = qualname.rsplit(".", 1)[0]
    return _StubMeta(qualname.rsplit(".", 1)[-1], (), {"__qualname__": qualname, "__module__": module,
                                                       "__get_pydantic_core_schema__": classmethod(_any_schema)})


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = _stub(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, roots):
        self.roots = frozenset(roots)

    def find_spec(self, fullname, path=None, target=None):
        if fullname.partition(".")[0] in self.roots:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _StubModule(spec.name)
        module.__path__ = []  # a package, so any submodule import lands here too
        module.__version__ = "0.0.0+cpustub"
        return module

    def exec_module(self, module):
        pass


# --- torch.ops._C placeholders --------------------------------------------------
# vLLM's fusion passes (compilation/collective_fusion.py, passes/fusion/*, via
# matcher_utils.py and fusion.py) read ``torch.ops._C.<op>.default`` at import
# time, e.g. to build pattern tables. Those ops come from vllm/_C.abi3.so, which
# cannot load beside the CPU torch (and is deleted from the test env). When
# ``vllm.compilation`` is first imported we define the ops named below as
# schema-only placeholders (overload ``default``, plus ``out`` where vLLM reads
# it: scaled_fp4_quant in 0.33), each only if it does not already exist. They
# have no kernel, so calling one raises "Could not run '_C::<op>' ...".
# The list is every torch.ops._C.<op> that vllm/compilation references in
# 0.11.1 .. 0.33.0.
_C_OPS = (
    "cutlass_scaled_mm", "dynamic_per_token_scaled_fp8_quant", "dynamic_scaled_fp8_quant",
    "fused_add_rms_norm", "fused_add_rms_norm_static_fp8_quant", "fused_qk_norm_rope",
    "per_token_group_fp8_quant", "rms_norm", "rms_norm_dynamic_per_token_quant",
    "rms_norm_per_block_quant", "rms_norm_static_fp8_quant", "rotary_embedding",
    "scaled_fp4_quant", "silu_and_mul", "silu_and_mul_nvfp4_quant",
    "silu_and_mul_per_block_quant", "silu_and_mul_quant", "static_scaled_fp8_quant",
)
_C_OUT_OPS = ("scaled_fp4_quant",)
_C_LIB = None  # keeps the torch.library.Library alive (its ops vanish with it)


def _define_c_ops() -> None:
    global _C_LIB
    import torch

    missing = [op for op in _C_OPS if not hasattr(torch.ops._C, op)]
    if not missing:
        return
    _C_LIB = torch.library.Library("_C", "FRAGMENT")
    for op in missing:
        _C_LIB.define(f"{op}(Tensor[] args) -> ()")
        if op in _C_OUT_OPS:
            _C_LIB.define(f"{op}.out(Tensor[] args, *, Tensor(a!) out) -> Tensor(a!)")


class _VllmCompilationHook(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname == "vllm.compilation":
            sys.meta_path.remove(self)
            _define_c_ops()
        # the normal finders import the module itself


# --- numba (vLLM's n-gram proposer) ---------------------------------------------
# vllm/v1/spec_decode/ngram_proposer.py does ``from numba import jit, njit, ...`` and
# decorates functions at import time; gpu_model_runner.py imports it unconditionally.
# numba is not in the CPU locks (it pins its own numpy range). Only when no real numba
# is importable, the decorators hand the function back unchanged: the n-gram kernels
# are then plain Python that no probe calls.
def _numba_shim() -> None:
    import importlib.util

    if importlib.util.find_spec("numba") is not None:
        return
    numba = types.ModuleType("numba")

    def jit(*args, **kwargs):
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]
        return lambda fn: fn

    vars(numba).update(__version__="0.0.0+cpustub", jit=jit, njit=jit, prange=range,
                       get_num_threads=lambda: 1, set_num_threads=lambda n: None)
    sys.modules["numba"] = numba


# Packages vLLM's GPU model runner imports at module level (structured outputs, harmony
# chat format, GGUF quantisation; fastapi on 0.14.x, through its serving utilities) that a CPU
# lock does not carry on every line: served by
# the stub finder above, which answers only when no real package of that name exists.
_VLLM_RUNNER_STUB_ROOTS = frozenset({"llguidance", "openai_harmony", "gguf", "diskcache", "xgrammar", "mistral_common",
                                     "fastapi"})


if "torchvision" in SHIMS:
    _torchvision_shim()
if "torch_cpu_amx" in SHIMS:
    # SGLang <= 0.5.2 calls torch._C._cpu._is_amx_tile_supported() at import time; torch
    # 2.13 renamed it. The answer on this CPU is irrelevant to the probes: say no.
    import torch

    if not hasattr(torch._C._cpu, "_is_amx_tile_supported"):
        torch._C._cpu._is_amx_tile_supported = lambda: False
if SHIMS & ({"sgl_kernel", "vllm"} | _VLLM_RUNNER_STUB_ROOTS):
    sys.meta_path.append(_StubFinder(SHIMS & ({"sgl_kernel", "vllm"} | _VLLM_RUNNER_STUB_ROOTS)))
if "numba" in SHIMS:
    _numba_shim()
if "torch_ops_C" in SHIMS:
    sys.meta_path.insert(0, _VllmCompilationHook())
