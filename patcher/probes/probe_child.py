"""The side of the probe runner that runs inside the engine's interpreter (see probes.py).

Stdlib only, and never imported there as part of ``patcher``: probes.py passes this file's
source to ``python -c``, so it works in any environment the engine is installed in.

Two modes, one request (JSON in ``argv[1]``):

* ``spawn``: one interpreter runs the probes of one group (one module after the same
  preloads) and prints their results after ``MARK``. One fresh interpreter per group.
* ``fork``: a zygote. It imports the heavy third-party modules the engine's modules use
  (``PRELOAD`` and the engine's own, sent as "preload", those that are installed; never the
  engine), freezes them out of the collector's reach, then forks one child per group, so each
  child imports the engine's modules fresh, as a fresh interpreter would, without paying for
  torch again. A child's failed import dies with the child. The zygote refuses (says
  ``mode: spawn`` and why, and the caller spawns as above) where a fork is not a clean copy:
  no ``os.fork``, not Linux, a thread running after the preloads, CUDA initialised by them,
  a preload that failed or pulled in the engine.

Over 300 lines: one file by necessity: it is sent as text to the engine's interpreter (stdlib only)
and cannot import a sibling.
"""

import importlib
import importlib.util
import json
import os
import sys
import time
import traceback

MARK = "KIMI-PATCHER-PROBES "
# A check raises an exception of this class name (each probes.py defines its own: they never import
# patcher) when what it checks is not in the release: its own outcome, never "failed" or "passed".
ABSENT_EXCEPTION = "NotInRelease"
ABSENT = "not in release"

# Third-party modules the engines' modules import at module level, in about the order they do,
# measured with ``python -X importtime`` on the probed modules of SGLang 0.5.9 and vLLM 0.19
# (CPU envs): torch's compiler and distributed stacks, transformers and its image utilities,
# openai's types, ... Imported only when installed (a submodule this release of its package does
# not have is skipped); none starts a thread or touches CUDA at import (the zygote checks the
# threads, and refuses to fork otherwise).
PRELOAD = (
    "torch", "numpy", "torch.distributed", "torch.distributed.tensor", "torch.fx.experimental.symbolic_shapes",
    "torch._dynamo", "torch._inductor.compile_fx", "sympy", "networkx", "triton",
    "transformers", "transformers.configuration_utils", "transformers.modeling_utils",
    "transformers.image_processing_utils", "transformers.tokenization_utils_base", "torchvision",
    "safetensors", "huggingface_hub", "tokenizers", "gguf", "openai", "aiohttp", "httpx", "requests",
    "pydantic", "msgspec", "zmq", "PIL", "yaml", "jinja2", "psutil", "einops", "regex", "tqdm", "filelock",
    "compressed_tensors",
)

# What each engine's probed modules import beyond PRELOAD (``EngineSpec.probe_preload``, sent in
# the request as "preload"), third-party only (never the engine, nor its kernel packages:
# sgl_kernel, flashinfer, ... may touch CUDA): measured as the modules a forked child imported that
# the zygote had not (``sys.modules`` after the child's imports, less the zygote's, with ``python
# -X importtime``), on SGLang 0.5.9 / 0.5.23 and vLLM 0.19.1 / 0.33.0 (CPU envs). Every child paid
# for them again (about a tenth of its import); the zygote pays once. A module belongs there when
# most probed modules import it: one only a single child imports would just move its cost into the
# zygote, which runs before any child, on one core.


def _import_failure(e, engine, module):
    """What a failed import means: the engine is broken ("failed") or a dependency outside it is
    missing here ("not importable"), with where it was raised (the CPU env's table prints it)."""
    if isinstance(e, ModuleNotFoundError):
        inside = (e.name or "").split(".")[0] == engine
        failure = dict(status="failed" if inside else "not importable",
                       detail=f"module {e.name} is missing from the engine" if inside else f"missing module {e.name}")
    elif isinstance(e, (ImportError, OSError)):
        line = (str(e).splitlines() or [""])[0][:300]
        failure = dict(status="not importable", detail=f"{type(e).__name__}: {line}")
    else:
        failure = dict(status="failed", detail=f"importing {module} raised {type(e).__name__}: {str(e)[:300]}")
    tb = traceback.extract_tb(e.__traceback__)
    failure["where"] = f"{tb[-1].filename.split('site-packages/')[-1]}:{tb[-1].lineno}" if tb else ""
    return failure


def probe_group(engine, probes):
    """Results of ``probes`` (one module after the same preloads) in this interpreter."""
    first = probes[0]
    failure = {}
    t0 = time.perf_counter()
    try:  # imported once: a second attempt would meet what the failed first one left in sys.modules
        for pre in first["preload"]:
            importlib.import_module(pre)
        mod = importlib.import_module(first["module"])
    except BaseException as e:
        failure = _import_failure(e, engine, first["module"])
    seconds = round(time.perf_counter() - t0, 2)
    results = []
    for i, p in enumerate(probes):
        r = dict(failure, seconds=seconds)
        if not failure:
            r["file"] = getattr(mod, "__file__", None)
            if p.get("check") is None:  # an import probe (the CPU env's table): importing is the check
                r["status"] = "passed"
                results.append(r)
                continue
            try:
                spec = importlib.util.spec_from_file_location(f"_kimi_probe_{i}", p["file"])
                checks = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(checks)
                getattr(checks, p["check"])(mod)
                r["status"] = "passed"
            except AssertionError as e:
                r.update(status="failed", detail=str(e) or "assertion failed")
            except BaseException as e:
                if type(e).__name__ == ABSENT_EXCEPTION:  # the check found nothing of what it checks
                    r.update(status=ABSENT, detail=str(e)[:300])
                    results.append(r)
                    continue
                tb = traceback.extract_tb(e.__traceback__)[-1]
                r.update(status="failed", detail=f"{type(e).__name__}: {str(e)[:300]} "
                                                 f"({os.path.basename(tb.filename)}:{tb.lineno})")
        results.append(r)
    return results


def spawn_main(req):
    real_stdout, sys.stdout = sys.stdout, sys.stderr  # engine chatter must not corrupt our JSON
    results = probe_group(req["package"], req["groups"][0])
    real_stdout.write("\n" + MARK + json.dumps(results) + "\n")


def _say(fd, **msg):
    os.write(fd, (MARK + json.dumps(msg) + "\n").encode())


def _threads():
    """Threads of this process, native ones included (an OpenMP pool, say); 0 if unknown."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0


# Native thread pools that start at import (OpenBLAS with numpy) when these allow more than one
# thread. Held at one while preloading, so no thread runs when the zygote forks; the children's
# environment is the user's again (their already-loaded BLAS keeps one thread: probes call
# functions on stand-ins, where that changes speed only).
POOL_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _preload(engine, extra):
    """Import the installed modules of PRELOAD and ``extra``; (names, None) or (names, why not to fork)."""
    done = []
    saved = {k: os.environ.get(k) for k in POOL_VARIABLES}
    os.environ.update(dict.fromkeys(POOL_VARIABLES, "1"))
    try:
        for name in (*PRELOAD, *extra):
            try:
                if importlib.util.find_spec(name.split(".")[0]) is None:
                    continue
                importlib.import_module(name)
            except ModuleNotFoundError as e:
                if not (name == e.name or name.startswith(f"{e.name}.")):  # a dependency of it: half imported?
                    return done, f"preloading {name} raised ModuleNotFoundError: {e}"
                continue  # this release of its package has no such (parent) submodule: nothing was imported
            except BaseException as e:  # a half-imported module must not reach a child: spawn instead
                first_line = (str(e).splitlines() or [""])[0][:200]
                return done, f"preloading {name} raised {type(e).__name__}: {first_line}"
            done.append(name)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    mine = sorted(m for m in sys.modules if m == engine or m.startswith(engine + "."))
    if mine:
        return done, f"preloading {', '.join(done)} imported {engine} itself ({mine[0]})"
    if _cuda_initialised():
        return done, f"preloading {', '.join(done)} initialised CUDA (a forked child could not use it)"
    import threading
    if threading.active_count() > 1 or _threads() > 1:
        return done, f"preloading {', '.join(done)} started {max(threading.active_count(), _threads())} threads"
    return done, None


def _cuda_initialised():
    """Whether a preload initialised torch's CUDA state: a child forked after that cannot use CUDA
    ("Cannot re-initialize CUDA in forked subprocess"), where a fresh interpreter could."""
    cuda = sys.modules.get("torch.cuda")
    try:
        return bool(cuda is not None and cuda.is_initialized())
    except Exception:  # a torch without it, or a stand-in: not something we can call a clean copy
        return True


def _child(probes, engine, log_fd, result_fd):
    """In the forked child: what a spawned interpreter does, its stderr to log_fd, results to result_fd."""
    code = 70
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)  # C-level stdout chatter: a spawned runner's is not read either
        os.dup2(log_fd, 2)
        sys.stdout = sys.stderr
        results = probe_group(engine, probes)
        data = json.dumps(results).encode()
        while data:
            data = data[os.write(result_fd, data):]
        code = 0
    finally:  # never return into the zygote's loop, whatever happened
        try:
            sys.stderr.flush()
        finally:
            os._exit(code)


def _last_line(fd):
    os.lseek(fd, 0, 0)
    chunks = []
    while True:
        b = os.read(fd, 1 << 16)
        if not b:
            break
        chunks.append(b)
    return b"".join(chunks).decode("utf-8", "replace")


def _exit_code(status):
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def _order(n):
    """The order to start the ``n`` groups in: the caller's line on stdin (it works the order out
    while we preload), or as given when that line is not a permutation of them."""
    try:
        got = json.loads(sys.stdin.readline() or "null")
    except (OSError, ValueError):
        got = None
    if isinstance(got, list) and all(type(g) is int for g in got) and sorted(got) == list(range(n)):
        return got
    return list(range(n))


def fork_main(req):
    msg = os.dup(1)  # our messages; everything else written to fd 1 goes to stderr
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    engine = req["package"]
    if not hasattr(os, "fork"):
        return _say(msg, mode="spawn", why="os.fork is not available here")
    if not sys.platform.startswith("linux"):
        return _say(msg, mode="spawn", why="forking a preloaded interpreter is only trusted on Linux, "
                    f"this is {sys.platform}")
    t0 = time.perf_counter()
    done, why = _preload(engine, req.get("preload", ()))
    if why:
        return _say(msg, mode="spawn", why=why)
    _say(msg, mode="fork", preloaded=done, seconds=round(time.perf_counter() - t0, 2))
    import gc
    import tempfile
    # Everything preloaded stays alive in every child: out of the collector's reach, a child's
    # collections walk only what the child allocated. Without it, each child's full collections
    # walked the zygote's half a million objects (and wrote to their headers, copying their memory
    # pages): 0.4-0.5 s of a 1.6 s child on SGLang 0.5.9, a third of its page faults. The children's
    # own garbage is collected as in a fresh interpreter; the zygote allocates nothing afterwards.
    gc.freeze()
    shared = _shared_bytecode(engine)
    groups, running, nxt = req["groups"], {}, 0
    order = _order(len(groups))
    while nxt < len(groups) or running:
        while nxt < len(groups) and len(running) < req["jobs"]:
            g = order[nxt]
            log, result = tempfile.TemporaryFile(), tempfile.TemporaryFile()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                os.close(msg)
                _child(groups[g], engine, log.fileno(), result.fileno())
            running[pid] = (g, log, result)
            _say(msg, started=g)
            nxt += 1
        pid, status = os.waitpid(-1, 0)
        if pid not in running:
            continue
        i, log, result = running.pop(pid)
        code = _exit_code(status)
        try:
            results = json.loads(_last_line(result.fileno())) if code == 0 else None
        except ValueError:
            results = None
        if results is not None:
            _say(msg, group=i, results=results)
        else:
            last = (_last_line(log.fileno()).strip().splitlines() or ["no output"])[-1][:300]
            _say(msg, group=i, crash=f"exit {code}: {last}")
        log.close()
        result.close()
    if shared:
        import shutil
        shutil.rmtree(shared, ignore_errors=True)
    # Done: exit without tearing down the preloaded modules (seconds of finalisation for torch &
    # co, which the caller would wait for: it reads our stdout until it closes).
    sys.stderr.flush()
    os._exit(0)


def _shared_bytecode(engine):
    """Where the engine ships no bytecode (uv installs without --compile-bytecode; sources laid
    in), every child would compile the modules they all import (the engine's config, layers,
    ...) again: the children compile into one private folder instead, each reading what a
    sibling already compiled (sources are checked by mtime and size, as any pyc is). The install
    is never written to, and the folder goes when the zygote ends. None where it has bytecode."""
    import tempfile
    spec = importlib.util.find_spec(engine)  # a top-level package: found, not imported
    origin = getattr(spec, "origin", None)
    if not origin or not origin.endswith(".py") or os.path.exists(importlib.util.cache_from_source(origin)):
        return None
    sys.pycache_prefix = tempfile.mkdtemp(prefix="kimi-patcher-pyc-")
    sys.dont_write_bytecode = False
    return sys.pycache_prefix


if __name__ == "__main__":
    request = json.loads(sys.argv[1])
    sys.path[:0] = request["prepend"]
    (fork_main if request.get("mode") == "fork" else spawn_main)(request)
