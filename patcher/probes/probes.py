"""Behavioural probes, each group in its own interpreter of the target environment.

A probe imports the patched module and calls a check from its family's probes.py on
it. Probes that import the same module after the same preloads share one interpreter;
every other pair is isolated, because a failed import leaves a half-imported package in
``sys.modules`` (SGLang >= 0.5.11 without numpy: the first probe is "missing module numpy",
every later one "KeyError: 'sglang'"). So a probe's outcome does not depend on which
probes ran before it. Groups run concurrently, up to one per CPU, the dearest first
(import_cost.py), within one total timeout.

Each group's interpreter is a child forked from one zygote that imported the heavy
third-party modules first (torch, transformers, ...; never the engine): the child imports
the engine's modules fresh, as a fresh interpreter would, without paying for torch again
(probe_child.py says when the zygote refuses to fork; then one fresh interpreter per group).
This is the only probe runner: the CPU environments' import table runs through it too.

Outcomes besides "passed": "failed" (the check or the import raised, the interpreter
died or timed out); "not importable here" when a dependency outside the engine is missing (a CPU-only
build stage without CUDA libraries, say), which ``--strict`` makes fatal; and "not in release" when
the release does not ship the probed module (its RECORD lists none) or the check finds nothing of
what it checks there (it raises NotInRelease): a fact about the release, fatal for no one. The runner
also checks that the module came from the file we patched: a second copy earlier on
sys.path is the classic "the patch did not take effect".

Over 300 lines: which probes run, how the child is started (forked or spawned) and how each way it
can die is reported belong together.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from patcher import engine_specs
from patcher.core.plan import State, Status
from patcher.environment.engines import Install
from patcher.probes import import_cost
from patcher.probes.probe_child import ABSENT, MARK

# What runs in the engine's interpreter: probe_child.py's source, never imported there as ours.
_RUNNER = (Path(__file__).with_name("probe_child.py")).read_text()
FORCE_SPAWN = "KIMI_PATCHER_PROBE_SPAWN"  # set (non-empty): one fresh interpreter per module, no zygote


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


def run(install: Install, statuses: list[Status], timeout: float = 180.0,
        say: Callable[[str], None] | None = None, progress: Callable[[str], None] | None = None) -> None:
    """Run the probes of every applied/upstream family; results land in each Status.

    ``timeout`` bounds the whole run (wall clock), not each interpreter. ``say`` gets one line
    on how they ran (forked from a preloaded interpreter, or spawned, and why): ``--debug``.
    ``progress`` gets a line when they start and one when they end (the CLI: on a terminal only)."""
    todo = []
    for st, p in selected(statuses):
        if _module_file(install, p["module"]) & {install.site / rel for rel in install.record}:
            todo.append((st, p))
        else:  # chosen by what the release contains: a module it does not ship has nothing to check
            st.probes.append({"id": p["id"], "module": p["module"], "status": ABSENT,
                              "detail": f"{install.engine} {install.version} has no module {p['module']}",
                              "seconds": None})
    if not todo:
        return
    batches = groups(todo)
    prepend = [] if install.python else [str(install.site)]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               PYTHONDONTWRITEBYTECODE="1")  # verify is read-only, probes included
    work = [[todo[i][1] for i in ix] for ix in batches]
    # Some wait for a CPU: the dearest first, so that none is left to run alone at the end.
    order = functools.partial(_dearest_first, install, work) if len(work) > cpus() else None
    tell = progress or (lambda line: None)
    tell(f"{install.engine} {install.version}: importing {len(work)} patched module(s) to run {len(todo)} "
         f"probe(s) (up to {timeout:g} s)...")
    t0 = time.monotonic()
    preload = spec.probe_preload if (spec := engine_specs.BY_NAME.get(install.engine)) else ()
    outcomes = run_groups(install.python or sys.executable, install.package, prepend, work, timeout, env, say=say,
                          order=order, preload=preload)
    tell(f"{install.engine} {install.version}: probes done in {time.monotonic() - t0:.1f} s")
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
                          "detail": r.get("detail", ""), "seconds": r.get("seconds")})


def _dearest_first(install: Install, work: list[list[dict]]) -> list[int]:
    """Indices of ``work`` (groups), those whose imports pull in most of the engine first."""
    cost = import_cost.Closures(install.site, install.package)
    return sorted(range(len(work)), key=lambda g: -cost.size([*work[g][0]["preload"], work[g][0]["module"]]))


def run_groups(python: str, package: str, prepend: list[str], batches: list[list[dict]], timeout: float,
               env: dict[str, str], cwd: str | None = None,
               say: Callable[[str], None] | None = None,
               order: Callable[[], list[int]] | None = None, preload: tuple[str, ...] = ()) -> list[list[dict]]:
    """The results of each group of ``batches`` (probes of one module after the same preloads; a
    probe without "check" only imports), each group isolated from the others, within ``timeout``.

    One zygote imports the heavy dependencies once and forks a child per group; where that is
    not a clean copy (see probe_child.py), one fresh interpreter per group, as before. ``order``
    gives the indices of ``batches`` in the order to start them; it is called while the zygote
    preloads, so working it out costs no wall time (without it: as given)."""
    deadline = time.monotonic() + timeout
    ranked = functools.cache(lambda: _permutation(order() if order else None, len(batches)))  # once, if spawning
    jobs = max(1, min(len(batches), cpus()))
    req = {"package": package, "prepend": prepend, "jobs": jobs, "preload": list(preload)}
    tell = say or (lambda line: None)
    why = _why_not_fork(env)
    if why is None:
        forked, why = _forked(python, dict(req, mode="fork", groups=batches), deadline, timeout, env, cwd, tell,
                              ranked)
        if forked is not None:
            return forked
    tell(f"probes: one fresh interpreter per module ({why})")
    with ThreadPoolExecutor(jobs) as pool:
        started = {g: pool.submit(_interpreter, python, dict(req, groups=[batches[g]]), len(batches[g]), deadline,
                                  timeout, env, cwd) for g in ranked()}
        return [started[g].result() for g in range(len(batches))]


def _permutation(got: list[int] | None, n: int) -> list[int]:
    """``got`` if it orders the ``n`` groups (each once), else their own order: what probe_child's
    ``_order`` does with the line it reads."""
    if got is not None and all(type(g) is int for g in got) and sorted(got) == list(range(n)):
        return got
    return list(range(n))


def cpus() -> int:
    """The CPUs this process may run on: a container's CPU set, not the host's count."""
    if hasattr(os, "process_cpu_count"):  # Python 3.13
        return os.process_cpu_count() or 1
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


def _why_not_fork(env: dict[str, str]) -> str | None:
    if env.get(FORCE_SPAWN):
        return f"{FORCE_SPAWN} is set"
    if os.name != "posix" or not hasattr(os, "fork"):
        return "this platform cannot fork"
    return None


def _dead(crash: str, n: int) -> list[dict]:
    died = "probe interpreter " + ("timed out" if crash.startswith("timed out") else "died")
    return [{"status": "failed", "detail": f"{died}: {crash}"} for _ in range(n)]


def _forked(python: str, req: dict, deadline: float, timeout: float, env: dict[str, str], cwd: str | None,
            tell: Callable[[str], None],
            order: Callable[[], list[int]] | None = None) -> tuple[list[list[dict]] | None, str]:
    """Results from the zygote, or (None, why) when it declined to fork or died before it could.
    The order to start the groups in goes to its stdin, once worked out, while it preloads."""
    batches = req["groups"]
    got: dict[int, list[dict]] = {}
    started: set[int] = set()
    mode = None
    with tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen([python, "-c", _RUNNER, json.dumps(req)], stdout=subprocess.PIPE, stderr=err,
                                    stdin=subprocess.PIPE, env=env, cwd=cwd, start_new_session=True)
        except OSError as exc:
            return None, f"cannot start {python}: {exc.strerror or exc}"
        assert proc.stdout is not None and proc.stdin is not None
        timed_out = False
        try:
            line = (json.dumps(order() if order else None) + "\n").encode()
            with contextlib.suppress(OSError):  # one short line fits the pipe; a zygote gone does not read it
                proc.stdin.write(line)
            with contextlib.suppress(OSError):
                proc.stdin.close()
            for msg in _messages(proc.stdout.fileno(), deadline):
                if "mode" in msg:
                    mode = msg["mode"]
                    if mode != "fork":
                        return None, str(msg.get("why"))
                    tell(f"probes: one child per module forked from an interpreter that preloaded "
                         f"{', '.join(msg['preloaded']) or 'nothing'} in {msg['seconds']} s")
                elif "started" in msg:
                    started.add(msg["started"])
                else:
                    i, n = msg["group"], len(batches[msg["group"]])
                    results = msg.get("results")
                    got[i] = results if _valid(results, n) else _dead(
                        msg.get("crash") or "exit 0: its results were not readable", n)
        except TimeoutError:
            timed_out = True
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # the zygote and every child still running
            proc.wait()
            proc.stdout.close()
        if mode is None and not timed_out:
            return None, f"the preloading interpreter died: {_last(err, proc.returncode)}"
        for i, probes in enumerate(batches):
            if i in got:
                continue
            if timed_out and (i in started or mode is None):
                got[i] = _dead(f"timed out after {timeout:.0f} s (--probe-timeout, for all probes)", len(probes))
            elif timed_out:
                got[i] = _dead(f"timed out: the {timeout:.0f} s for all probes ran out before this one started",
                               len(probes))
            else:
                got[i] = _dead(f"the forking interpreter died: {_last(err, proc.returncode)}", len(probes))
    return [got[i] for i in range(len(batches))], ""


def _last(err, code: int) -> str:
    """"exit N: " and the last line a dead interpreter wrote on stderr."""
    err.seek(0)
    text = err.read().decode("utf-8", "replace")
    return f"exit {code}: " + (text.strip().splitlines() or ["no output"])[-1][:300]


def _messages(fd: int, deadline: float):
    """The zygote's messages (the JSON after MARK on each line) until it closes its stdout;
    TimeoutError at ``deadline``."""
    buf = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for line in lines:
            text = line.decode("utf-8", "replace")
            if not text.startswith(MARK):
                continue
            try:
                msg = json.loads(text[len(MARK):])
            except ValueError:
                continue
            yield msg


def _interpreter(python: str, req: dict, n: int, deadline: float, timeout: float, env: dict[str, str],
                 cwd: str | None) -> list[dict]:
    """Results of the ``n`` probes of ``req`` (one module) from one fresh interpreter; "failed" for each if it dies."""
    left = deadline - time.monotonic()
    results = None
    if left <= 0:
        crash = f"timed out: the {timeout:.0f} s for all probes ran out before this one started"
    else:
        try:
            proc = subprocess.run([python, "-c", _RUNNER, json.dumps(req)], capture_output=True, text=True,
                                  timeout=left, env=env, cwd=cwd, stdin=subprocess.DEVNULL)
            results = _parse(proc.stdout, n)
            crash = f"exit {proc.returncode}: " + (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]
        except subprocess.TimeoutExpired:
            crash = f"timed out after {timeout:.0f} s (--probe-timeout, for all probes)"
        except OSError as exc:
            crash = f"cannot start {python}: {exc.strerror or exc}"
    if results is None:
        return _dead(crash, n)
    return results


def _valid(got, n: int) -> bool:
    return isinstance(got, list) and len(got) == n and all(
        isinstance(r, dict) and r.get("status") in ("passed", "failed", "not importable", ABSENT) for r in got)


def _parse(stdout: str, n: int) -> list[dict] | None:
    """The runner's results line; None if missing or not the shape it writes (a crash, or chatter)."""
    line = next((ln for ln in reversed(stdout.splitlines()) if ln.startswith(MARK)), None)
    try:
        got = json.loads(line[len(MARK):]) if line else None
    except ValueError:
        return None
    return got if _valid(got, n) else None
