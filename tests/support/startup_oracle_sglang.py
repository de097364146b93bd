"""Run in an SGLang release's interpreter by tests/test_startup_grid.py: the truth of each generated
launch, by the release's own ``ServerArgs`` post-processing called through its Python API.

Reads {"target": ..., "drafter": ...} on stdin. Generates the cases from the release: every
``--speculative-algorithm`` choice its parser declares (from 0.5.20, where it takes any registered
name: the members of its ``SpeculativeAlgorithm``, and NEXTN), with and without the drafter; and,
for EAGLE3 with the drafter, every other ``--speculative-*`` option the parser declares, given the
values ``_option_cases`` picks from its type. Each is
``ServerArgs(model_path=..., tp_size=8, speculative_algorithm=..., ...)`` (``__post_init__`` runs
in it, to 0.5.19; ``resolve_once()`` after, from 0.5.20): not the CLI doctor's child reads the line
with. Prints one ``@@startup@@ {json}`` line per case.

Stand-in, written here on its own (a build host has no GPU): torch.cuda answers as 8 Hopper GPUs
of 80 GiB, and so does an ``nvidia-smi`` first on PATH (releases to 0.5.22 ask it the memory); SGLang's
cached device answers are forgotten before each case; modules whose import asks the device are
imported before the stand-in.
"""

import argparse
import functools
import importlib
import json
import os
import sys
import tempfile
import types

MARK = "@@startup@@ "


def _forget():
    for name, module in list(sys.modules.items()):
        if name.startswith("sglang"):
            for value in list(vars(module).values()):
                if isinstance(value, functools._lru_cache_wrapper):
                    value.cache_clear()
    platforms = sys.modules.get("sglang.srt.platforms")
    if platforms is not None and hasattr(platforms, "_current_platform"):
        platforms._current_platform = None


def _option_cases(parser):
    """Every other speculative option the parser declares, given values its type takes that a
    start-up may refuse: (option string, field, value as written, value as the field holds it).
    Numbers: 0, -1 and a value of ordinary size; choices: each; flags: on. Free text (paths,
    revisions) is left out: nothing of it is checked before a file is read."""
    out = []
    for action in parser._actions:
        dest = action.dest
        if not dest.startswith("speculative_") or dest in ("speculative_algorithm", "speculative_draft_model_path"):
            continue
        option = max(action.option_strings, key=len)
        if action.choices:
            out += [(option, dest, str(c), c) for c in action.choices]
        elif action.nargs == 0:  # a flag
            out.append((option, dest, None, True))
        elif action.type in (int, float):
            out += [(option, dest, str(v), action.type(v)) for v in ("0", "-1", "7")]
    return out


def main():
    req = json.loads(sys.stdin.read())
    import pkgutil

    from sglang.srt import server_args

    try:
        import sglang.srt.arg_groups as groups

        hooks = [f"{groups.__name__}.{m.name}" for m in pkgutil.iter_modules(groups.__path__)]
    except ImportError:  # before 0.5.13: server_args.py holds them
        hooks = []
    for name in ("sglang.srt.configs.model_config", "sglang.srt.speculative.spec_info",
                 "sglang.srt.speculative.spec_registry", *hooks):
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001
            pass
    parser = argparse.ArgumentParser()
    server_args.ServerArgs.add_cli_args(parser)
    action = next(a for a in parser._actions if a.dest == "speculative_algorithm")
    algorithms = set(action.choices or ())
    if not algorithms:  # from 0.5.20 a registry: the enum's members, and the aliases the help names
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

        algorithms = {m.name for m in SpeculativeAlgorithm if m.name != "NONE"} | {"NEXTN"}
    import torch

    props = types.SimpleNamespace(total_memory=80 << 30, major=9, minor=0, name="H100", multi_processor_count=132)
    for name, fn in {"is_available": lambda: True, "device_count": lambda: 8, "current_device": lambda: 0,
                     "get_device_capability": lambda *a, **k: (9, 0), "get_device_name": lambda *a, **k: "H100",
                     "get_device_properties": lambda *a, **k: props,
                     "mem_get_info": lambda *a, **k: (80 << 30, 80 << 30)}.items():
        setattr(torch.cuda, name, fn)
    torch.version.cuda = torch.version.cuda or "12.8"
    smi = tempfile.mkdtemp()
    with open(os.path.join(smi, "nvidia-smi"), "w") as fh:  # 8 lines of "81920" (or the name, for a name query)
        fh.write('#!/bin/sh\ncase "$*" in *name*) v="NVIDIA H100 80GB HBM3";; *) v=81920;; esac\n'
                 'for i in 1 2 3 4 5 6 7 8; do echo "$v"; done\n')
    os.chmod(os.path.join(smi, "nvidia-smi"), 0o755)
    os.environ["PATH"] = smi + os.pathsep + os.environ.get("PATH", "")
    cases = [({"algorithm": algorithm, "draft": with_draft}, {}) for algorithm in sorted(algorithms)
             for with_draft in (True, False)]
    cases += [({"algorithm": "EAGLE3", "draft": True, "option": option, "value": text}, {dest: value})
              for option, dest, text, value in _option_cases(parser)]
    for case, extra in cases:
        algorithm, with_draft = case["algorithm"], case["draft"]
        _forget()
        kwargs = {"model_path": req["target"], "tp_size": 8, "speculative_algorithm": algorithm, **extra}
        if with_draft:
            kwargs["speculative_draft_model_path"] = req["drafter"]
        try:
            made = server_args.ServerArgs(**kwargs)
            if hasattr(made, "resolve_once"):
                made.resolve_once()
            view = getattr(server_args, "resolving_view", None)
            got = view(made) if view is not None else made
            out = {"status": "configured", "method": got.speculative_algorithm}
        except (ValueError, AssertionError, TypeError) as exc:
            out = {"status": "refused", "error": f"{type(exc).__name__}: {exc}"[:300]}
        except Exception as exc:  # noqa: BLE001 - what this host cannot build
            out = {"status": "unavailable", "error": f"{type(exc).__name__}: {exc}"[:300]}
        print(MARK + json.dumps({**case, **out}), flush=True)


if __name__ == "__main__":
    main()
