"""Behavioural probes, each group in its own fresh interpreter of the target environment.

A probe imports the patched module and calls a check from its family's probes.py on
it. Probes that import the same module after the same preloads share one interpreter;
every other pair is isolated, because a failed import leaves a half-imported package in
``sys.modules`` (SGLang >= 0.5.11 without numpy: the first probe is "missing module numpy",
every later one "KeyError: 'sglang'"). So a probe's outcome does not depend on which
probes ran before it. Groups run concurrently, up to one per CPU, within one total timeout.

Three outcomes besides "passed": "failed" (the check or the import raised, the interpreter
died or timed out), and "not importable here" when a dependency outside the engine is missing (a CPU-only
build stage without CUDA libraries, say), which ``--strict`` makes fatal. The runner
also checks that the module came from the file we patched: a second copy earlier on
sys.path is the classic "the patch did not take effect".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .engines import Install
from .plan import State, Status

MARK = "KIMI-PATCHER-PROBES "

_RUNNER = r'''
import importlib, importlib.util, json, os, sys, traceback
req = json.loads(sys.argv[1])
sys.path[:0] = req["prepend"]
real_stdout, sys.stdout = sys.stdout, sys.stderr  # engine chatter must not corrupt our JSON
first = req["probes"][0]  # every probe of a request imports the same module after the same preloads
failure = {}
try:  # imported once: a second attempt would meet what the failed first one left in sys.modules
    for pre in first["preload"]:
        importlib.import_module(pre)
    mod = importlib.import_module(first["module"])
except ModuleNotFoundError as e:
    inside = (e.name or "").split(".")[0] == req["engine"]
    failure = dict(status="failed" if inside else "not importable",
                   detail=("module %s is missing from the engine" if inside else "missing module %s") % e.name)
except (ImportError, OSError) as e:
    line = (str(e).splitlines() or [""])[0][:300]
    failure = dict(status="not importable", detail="%s: %s" % (type(e).__name__, line))
except BaseException as e:
    failure = dict(status="failed",
                   detail="importing %s raised %s: %s" % (first["module"], type(e).__name__, str(e)[:300]))
results = []
for i, p in enumerate(req["probes"]):
    r = dict(failure)
    if not failure:
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


def groups(todo: list[tuple[Status, dict]]) -> list[list[int]]:
    """Indices of ``todo`` that share an interpreter: same module, same preloads. Sorted, so the
    order probes are declared or selected in never changes what runs together or in what order."""
    by_key: dict[tuple, list[int]] = {}
    for i, (_, p) in enumerate(todo):
        by_key.setdefault((p["module"], tuple(p["preload"])), []).append(i)
    return [sorted(ix, key=lambda i: (todo[i][1]["family"], todo[i][1]["id"])) for _, ix in sorted(by_key.items())]


def run(install: Install, statuses: list[Status], timeout: float = 180.0) -> None:
    """Run the probes of every applied/upstream family; results land in each Status.

    ``timeout`` bounds the whole run (wall clock), not each interpreter."""
    todo = selected(statuses)
    if not todo:
        return
    deadline = time.monotonic() + timeout
    batches = groups(todo)
    with ThreadPoolExecutor(max(1, min(len(batches), os.cpu_count() or 1))) as pool:
        outcomes = list(pool.map(lambda ix: _interpreter(install, [todo[i][1] for i in ix], deadline, timeout),
                                 batches))
    results: dict[int, dict] = {}
    for ix, got in zip(batches, outcomes):
        results.update(zip(ix, got))
    for i, (st, p) in enumerate(todo):
        r = results[i]
        f = r.get("file")
        if r["status"] == "passed" and f and Path(os.path.realpath(f)) not in {
                Path(os.path.realpath(x)) for x in _module_file(install, p["module"])}:
            r.update(status="failed", detail=f"{p['module']} was imported from {f}, not from the patched "
                     f"install at {install.site}: another copy comes first on sys.path")
        st.probes.append({"id": p["id"], "module": p["module"], "status": r["status"],
                          "detail": r.get("detail", "")})


def _interpreter(install: Install, probes: list[dict], deadline: float, timeout: float) -> list[dict]:
    """Results of ``probes`` (one module) from one fresh interpreter; "failed" for each if it dies."""
    python = install.python or sys.executable
    prepend = [] if install.python else [str(install.site)]
    req = {"engine": install.engine, "prepend": prepend, "probes": probes}
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               PYTHONDONTWRITEBYTECODE="1")  # verify is read-only, probes included
    left = deadline - time.monotonic()
    results = None
    if left <= 0:
        crash = f"timed out: the {timeout:.0f} s for all probes ran out before this one started"
    else:
        try:
            proc = subprocess.run([python, "-c", _RUNNER, json.dumps(req)], capture_output=True, text=True,
                                  timeout=left, env=env, stdin=subprocess.DEVNULL)
            results = _parse(proc.stdout, len(probes))
            crash = f"exit {proc.returncode}: " + (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]
        except subprocess.TimeoutExpired:
            crash = f"timed out after {timeout:.0f} s (--probe-timeout, for all probes)"
        except OSError as exc:
            crash = f"cannot start {python}: {exc.strerror or exc}"
    if results is None:
        died = "probe interpreter " + ("timed out" if crash.startswith("timed out") else "died")
        return [{"status": "failed", "detail": f"{died}: {crash}"} for _ in probes]
    return results


def _parse(stdout: str, n: int) -> list[dict] | None:
    """The runner's results line; None if missing or not the shape it writes (a crash, or chatter)."""
    line = next((ln for ln in reversed(stdout.splitlines()) if ln.startswith(MARK)), None)
    try:
        got = json.loads(line[len(MARK):]) if line else None
    except ValueError:
        return None
    if not isinstance(got, list) or len(got) != n or not all(
            isinstance(r, dict) and r.get("status") in ("passed", "failed", "not importable") for r in got):
        return None
    return got
