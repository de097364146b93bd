"""On the GPU host only (benchmarks/gpu_vllm/device_doctor.sh puts this folder on PYTHONPATH): inert
stand-ins for the OpenAI server's dependencies that the gpu-vllm toolkit does not carry.

`vllm serve`'s parser (vllm.entrypoints.cli.serve), which both the engine run and doctor's children read
the line with, imports the API server's modules at import time; the toolkit carries the offline
`LLM` path only (its README: uvicorn, ijson, mistral_common... not carried). A name below is stubbed
only where the image really lacks it (the real package always wins), and each stub is said once on
stderr. Stubs are inert (any attribute, call or subscript gives another stub), as the toolkit's
check_imports.py makes them; none of these is on the offline `LLM` path a row runs.
"""

import importlib.abc
import importlib.machinery
import sys
import types

SERVER_ONLY = ("uvicorn", "uvloop", "watchfiles", "ijson", "mistral_common", "model_hosting_container_standards",
               "prometheus_fastapi_instrumentator", "aiohttp")
# Any other absent package is stubbed only for the server's own modules (one device call each found so).
SERVER_MODULES = ("vllm.entrypoints.", "vllm.tool_parsers.", "vllm.reasoning.", "vllm.connections")


def _importer() -> str:
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if not name.startswith(("importlib", "_frozen_importlib", __name__)):
            return name
        frame = frame.f_back
    return ""


class _Any(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Any(name, (), {})

    def __getitem__(cls, item):
        return cls

    def __call__(cls, *a, **k):
        return cls


class _Module(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Any(name, (), {})


class _Loader(importlib.abc.Loader):
    def create_module(self, spec):
        module = _Module(spec.name)
        module.__path__ = []  # a package: its submodules are stubs too
        return module

    def exec_module(self, module):
        pass


class _Finder(importlib.abc.MetaPathFinder):
    said: set = set()

    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if "." in name:  # a submodule: a stub exactly where its package is one
            return self._stub(name) if isinstance(sys.modules.get(top), _Module) else None
        if top not in SERVER_ONLY and not _importer().startswith(SERVER_MODULES):
            return None
        if importlib.machinery.PathFinder.find_spec(name) is not None:
            return None  # the image has it: the real one
        if top not in self.said:
            self.said.add(top)
            print(f"gpu-harness: stub for {top} (not in the image; API server only)", file=sys.stderr)
        return self._stub(name)

    @staticmethod
    def _stub(name):
        return importlib.machinery.ModuleSpec(name, _Loader(), is_package=True)


sys.meta_path.append(_Finder())
