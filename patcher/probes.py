"""Behavioural probes, all of one engine in ONE fresh interpreter of the target environment.

A probe imports the patched module and calls a check from its family's probes.py on
it. Three outcomes besides "passed": "failed" (the check or the import raised), and
"not importable here" when a dependency outside the engine is missing (a CPU-only
build stage without CUDA libraries, say), which ``--strict`` makes fatal. The runner
also checks that the module came from the file we patched: a second copy earlier on
sys.path is the classic "the patch did not take effect".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .engines import Install
from .plan import State, Status

MARK = "KIMI-PATCHER-PROBES "

_RUNNER = r'''
import importlib, importlib.util, json, os, sys, traceback
req = json.loads(sys.argv[1])
sys.path[:0] = req["prepend"]
real_stdout, sys.stdout = sys.stdout, sys.stderr  # engine chatter must not corrupt our JSON
results = []
for i, p in enumerate(req["probes"]):
    r = {"id": p["id"], "family": p["family"]}
    try:
        for pre in p["preload"]:
            importlib.import_module(pre)
        mod = importlib.import_module(p["module"])
    except ModuleNotFoundError as e:
        inside = (e.name or "").split(".")[0] == req["engine"]
        r.update(status="failed" if inside else "not importable",
                 detail=("module %s is missing from the engine" if inside else "missing module %s") % e.name)
    except (ImportError, OSError) as e:
        r.update(status="not importable", detail="%s: %s" % (type(e).__name__, str(e).splitlines()[0][:300]))
    except BaseException as e:
        r.update(status="failed", detail="importing %s raised %s: %s" % (p["module"], type(e).__name__, str(e)[:300]))
    else:
        r["file"] = getattr(mod, "__file__", None)
        try:
            spec = importlib.util.spec_from_file_location("_kimi_probe_%d" % i, p["file"])
            checks = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(checks)
            getattr(checks, p["check"])(mod)
            r["status"] = "passed"
        except AssertionError as e:
            r.update(status="failed", detail=str(e) or "assertion failed")
        except BaseException as e:
            tb = traceback.extract_tb(e.__traceback__)[-1]
            r.update(status="failed", detail="%s: %s (%s:%d)" % (type(e).__name__, str(e)[:300],
                                                                   os.path.basename(tb.filename), tb.lineno))
    results.append(r)
real_stdout.write("\n''' + MARK + r'''" + json.dumps(results) + "\n")
'''


def _module_file(install: Install, module: str) -> set[Path]:
    base = install.site / Path(*module.split("."))
    return {base.with_suffix(".py"), base / "__init__.py"}


def selected(statuses: list[Status]) -> list[tuple[Status, dict]]:
    out = []
    for st in statuses:
        tag = st.variant if st.state is State.APPLIED else st.upstream_id if st.state is State.UPSTREAM else None
        if tag is None:
            continue
        for p in st.family.probes:
            if tag in p.when:
                out.append((st, {"id": p.id, "family": st.family.id, "module": p.module, "preload": list(p.preload),
                                 "file": str(st.family.folder / "probes.py"), "check": p.check}))
    return out


def run(install: Install, statuses: list[Status], timeout: float = 180.0) -> None:
    """Run the probes of every applied/upstream family; results land in each Status."""
    todo = selected(statuses)
    if not todo:
        return
    python = install.python or sys.executable
    prepend = [] if install.python else [str(install.site)]
    req = {"engine": install.engine, "prepend": prepend, "probes": [p for _, p in todo]}
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               PYTHONDONTWRITEBYTECODE="1")  # verify is read-only, probes included
    try:
        proc = subprocess.run([python, "-c", _RUNNER, json.dumps(req)], capture_output=True, text=True,
                              timeout=timeout, env=env, stdin=subprocess.DEVNULL)
        line = next((ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith(MARK)), None)
        results = json.loads(line[len(MARK):]) if line else None
        crash = (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]
    except subprocess.TimeoutExpired:
        results, crash = None, f"timed out after {timeout:.0f} s"
    if results is None:
        results = [dict(p, status="failed", detail=f"probe interpreter died: {crash}") for _, p in todo]
    for (st, p), r in zip(todo, results):
        f = r.get("file")
        if r["status"] == "passed" and f and Path(os.path.realpath(f)) not in {
                Path(os.path.realpath(x)) for x in _module_file(install, p["module"])}:
            r.update(status="failed", detail=f"{p['module']} was imported from {f}, not from the patched "
                     f"install at {install.site}: another copy comes first on sys.path")
        st.probes.append({"id": r["id"], "module": p["module"], "status": r["status"],
                          "detail": r.get("detail", "")})
