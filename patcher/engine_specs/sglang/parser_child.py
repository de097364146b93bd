"""Sent whole to the engine's interpreter (``python -c``): SGLang's own parser reads a server command.

Calls the release's ``prepare_server_args`` (what ``python -m sglang.launch_server`` and
``sglang serve`` call: its option table, argparse's prefixes, the ``--config`` file merge where
the release has it, ``from_cli_args``' mapping onto the fields) with ``ServerArgs.__post_init__``
replaced by a recorder, so the fields are read and the GPU and model checks never run. Then the
release's start-up configuration runs on the same line, on a stand-in GPU (``_startup``). Prints
one line per command line asked (several share one import): the marker, then JSON with the values
of the options doctor reads, and the start-up's answer under ``_startup``.

Sent after parser_child_common.py, whose names it uses (Recorded, run).
"""

import functools
import importlib
import os
import pkgutil
import sys
import tempfile
import types
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # sent after parser_child_common.py, which defines them
    from patcher.engine_specs.parser_child_common import Recorded, launch_environ, option_table, plain, run

# The GPU the start-up configuration is shown, by compute capability major (doctor's --gpu, else
# nvidia-smi's, else Hopper, the usual Kimi-K2 host): capability, name, GiB. SGLang picks backends,
# graph sizes and memory fractions from these; 8 of them, the usual Kimi-K2 node.
GPUS = {"9": ((9, 0), "NVIDIA H100 80GB HBM3", 80), "10": ((10, 0), "NVIDIA B200", 180),
        "12": ((12, 0), "NVIDIA RTX PRO 6000 Blackwell Server Edition", 96)}
GPU_COUNT = 8
# Imported before the GPU is shown: their import-time checks (``is_cuda()`` at module level) must
# see this host, or they import CUDA kernels that are not here. A module the release imports later
# under the stand-in and fails on is "unavailable", never a refusal.
WARM = ("sglang.srt.configs.model_config", "sglang.srt.speculative.spec_info",
        "sglang.srt.speculative.spec_registry")
# The stand-in GPUs as ``nvidia-smi --query-gpu=... --format=csv,noheader[,nounits]`` reports them:
# releases to 0.5.22 read the memory of the GPUs from it during start-up (get_nvgpu_memory_capacity),
# and a build host has no nvidia-smi. Put first on PATH while the start-up runs; asked anything else,
# it fails as a missing tool would, and the start-up is "unavailable", never a refusal.
NVIDIA_SMI = """#!/bin/sh
q=""
for a in "$@"; do case "$a" in --query-gpu=*) q="${a#--query-gpu=}";; esac; done
[ -n "$q" ] || { echo "kimi-patcher's stand-in nvidia-smi answers --query-gpu only" >&2; exit 1; }
i=0
while [ $i -lt %(count)d ]; do
  out=""
  for f in $(echo "$q" | tr ',' ' '); do
    case "$f" in
      memory.total|memory.free) v=%(mib)d;; memory.used) v=0;; name) v="%(name)s";;
      compute_cap) v=%(cap)s;; index) v=$i;; count) v=%(count)d;; *) v="[N/A]";;
    esac
    out="${out:+$out, }$v"
  done
  echo "$out"; i=$((i + 1))
done
"""


def _stand_in_smi(folder, capability, name, gib):
    path = os.path.join(folder, "nvidia-smi")
    with open(path, "w") as fh:
        fh.write(NVIDIA_SMI % {"count": GPU_COUNT, "mib": gib * 1024, "name": name,
                               "cap": f"{capability[0]}.{capability[1]}"})
    os.chmod(path, 0o755)


def parse(line, dests, server_args):
    recorded = {}

    def record(self, *args, **kwargs):
        recorded.update({d: getattr(self, d) for d in dests if hasattr(self, d)})
        raise Recorded

    # The fields as ServerArgs.from_cli_args hands them to the record (its own mapping, e.g.
    # --tensor-parallel-size onto tp_size), before __post_init__'s GPU and model checks. From
    # 0.5.20 the record is a msgspec Struct that resolves nothing at construction (its
    # __post_init__ is fixed when the class is made): the returned record is read instead.
    real = server_args.ServerArgs.__dict__.get("__post_init__")
    server_args.ServerArgs.__post_init__ = record
    try:
        made = server_args.prepare_server_args(list(line["argv"]))
        recorded.update({d: getattr(made, d) for d in dests if hasattr(made, d)})
    except Recorded:
        pass
    finally:
        if real is not None:
            server_args.ServerArgs.__post_init__ = real
    recorded["_startup"] = _startup(line, server_args)
    return recorded


def _startup(line, server_args):
    """The release's own start-up configuration of the line (issue 53): ``ServerArgs.__post_init__``
    (to 0.5.19) or ``resolve_once`` (from 0.5.20), which choose the attention backend, resolve the
    speculative algorithm (NEXTN to EAGLE, the draft model of an MTP target), choose steps, top-k
    and draft tokens, and refuse what the server would refuse, before any weight or device is used.
    Stand-in: torch.cuda and nvidia-smi answer as a GPU host would (GPUS; nothing is allocated), since
    a build host has none and SGLang's defaults depend on it. Everything is put back afterwards."""
    import torch

    for name in WARM + tuple(_arg_group_modules()):
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a module the release lacks or cannot import here
            pass
    major = str(line.get("gpu") or "9")
    generic = ((int(major), 0), "NVIDIA GPU", 80) if major.isdigit() else GPUS["9"]
    capability, gpu_name, gib = GPUS.get(major, generic)
    props = types.SimpleNamespace(total_memory=gib << 30, major=capability[0], minor=capability[1], name=gpu_name,
                                  multi_processor_count=132)
    shown = {"is_available": lambda: True, "device_count": lambda: GPU_COUNT, "current_device": lambda: 0,
             "get_device_capability": lambda *a, **k: capability, "get_device_name": lambda *a, **k: gpu_name,
             "get_device_properties": lambda *a, **k: props, "mem_get_info": lambda *a, **k: (gib << 30, gib << 30)}
    saved = {name: torch.cuda.__dict__.get(name) for name in shown}
    saved_cuda = torch.version.cuda
    assumed = "" if line.get("gpu") else "; assumed: --gpu names yours"
    device = f"{GPU_COUNT} stand-in {gpu_name} (compute capability {capability[0]}.{capability[1]}{assumed})"
    smi = tempfile.TemporaryDirectory(prefix="kimi-patcher-gpu-")
    try:
        with launch_environ(line):
            _stand_in_smi(smi.name, capability, gpu_name, gib)
            os.environ["PATH"] = smi.name + os.pathsep + os.environ.get("PATH", "")
            for name, fn in shown.items():
                setattr(torch.cuda, name, fn)
            torch.version.cuda = torch.version.cuda or "12.8"
            _forget()
            made = server_args.prepare_server_args(list(line["argv"]))  # __post_init__ runs, to 0.5.19
            if hasattr(made, "resolve_once"):
                made.resolve_once()
            view = getattr(server_args, "resolving_view", None)
            got = view(made) if view is not None else made
            return {"status": "configured", "target": _text(got, "model_path"),
                    "method": _text(got, "speculative_algorithm"),
                    "draft": _text(got, "speculative_draft_model_path"),
                    "tokens": _number(got, "speculative_num_draft_tokens"),
                    "steps": _number(got, "speculative_num_steps"), "topk": _number(got, "speculative_eagle_topk"),
                    "backend": _text(got, "attention_backend"), "device": device,
                    "fusion": _flag(got, "enable_flashinfer_allreduce_fusion")}
    except (ValueError, AssertionError, TypeError) as exc:  # the release's own refusal, in its words
        return {"status": "refused", "error": plain(f"{type(exc).__name__}: {exc}"), "device": device}
    except Exception as exc:  # noqa: BLE001 - a model it cannot read here, a GPU call the stand-in lacks
        return {"status": "unavailable", "error": plain(f"{type(exc).__name__}: {exc}")}
    finally:
        smi.cleanup()
        for name, fn in saved.items():
            if fn is None:
                torch.cuda.__dict__.pop(name, None)
            else:
                setattr(torch.cuda, name, fn)
        torch.version.cuda = saved_cuda
        _forget()


def _arg_group_modules():
    try:
        import sglang.srt.arg_groups as groups
    except Exception:  # noqa: BLE001 - a release without them
        return []
    return [f"{groups.__name__}.{m.name}" for m in pkgutil.iter_modules(groups.__path__)]


def _forget():
    """SGLang caches what it asked of the device (``is_cuda``, the platform): forget it, so the
    start-up sees the stand-in and the next parse this host again."""
    for name, module in list(sys.modules.items()):
        if name.startswith("sglang"):
            for value in list(vars(module).values()):
                if isinstance(value, functools._lru_cache_wrapper):
                    value.cache_clear()
    platforms = sys.modules.get("sglang.srt.platforms")
    if platforms is not None and hasattr(platforms, "_current_platform"):
        platforms._current_platform = None


def _text(args, name):
    value = getattr(args, name, None)
    return None if value is None else str(value)


def _flag(args, name):
    value = getattr(args, name, None)
    return value if isinstance(value, bool) else None


def _number(args, name):
    value = getattr(args, name, None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def table(entry, server_args):
    """Every option string of the parser prepare_server_args builds, and the ones of each dest."""
    import argparse

    seen = {}
    parse_args = argparse.ArgumentParser.parse_args

    def capture(self, *args, **kwargs):
        seen["parser"] = self
        raise Recorded

    argparse.ArgumentParser.parse_args = capture
    try:
        server_args.prepare_server_args(["--model-path", "x"])
    except Recorded:
        pass
    finally:
        argparse.ArgumentParser.parse_args = parse_args
    parser = seen["parser"]
    return option_table(parser)


def load():
    from sglang.srt import server_args

    return server_args


run(load, parse, table)
