"""CPU-only virtual environments in which real vLLM / SGLang releases import.

Our real-import probes need the engine's own modules importable in a fresh
interpreter, on a CI machine with 2 cores, no GPU and the CPU build of torch
2.13.0 (a local wheel that ``pip install torch==2.13.0+cpu`` takes). A full
``pip install vllm==X`` pulls ~10 GB of CUDA wheels, so instead each *line* of
releases shares one venv built from a lock file the engine keeps beside its module
(``patcher/engine_specs/<engine>/cpu_envs/<line>.txt``, ``CpuEnvLine.lock``)
(exact pins, installed with ``--no-deps``), and only the engine wheel is swapped
in with ``pip install --no-deps <engine>==<version>``.

* The venv lives in ``~/.cache/kimi-patcher/envs/<line>/``. A marker file holding
  the hash of the lock is written last; a missing or different
  marker means the venv is rebuilt from scratch (so an interrupted build is redone).
* ``patcher/maintainer/cpu_envs/sitecustomize.py`` is copied into the venv's site-packages with
  the import-only shims the (engine, version) needs (see that file for why each);
  it is rewritten whenever it differs, so editing the shims needs no rebuild.
* After an engine swap, the engine's compiled ``*.so`` that cannot be loaded on
  this machine (vLLM's CUDA kernels) are deleted, but only if the probes still
  pass without them; otherwise they are put back.

CLI: ``python -m patcher.maintainer.cpu_env --check <engine> <version> [<version> ...]``
builds or reuses the env, swaps the engine in and prints the import table.
See patcher/maintainer/cpu_envs/NOTES.md for the measured coverage, timings and disk use.

Over 300 lines: building, locking, swapping and checking an environment are one life cycle around
one marker file (maintainer tooling, never on apply's path).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from packaging.version import Version

from patcher import engine_specs
from patcher.engine_specs.base import CpuImport
from patcher.probes import probes

CACHE = Path(os.environ.get("KIMI_PATCHER_CACHE", Path.home() / ".cache" / "kimi-patcher"))
ENVS = Path(os.environ.get("KIMI_PATCHER_ENVS", CACHE / "envs"))  # one set per concurrent user
SHIM_TEMPLATE = Path(__file__).resolve().parent / "cpu_envs" / "sitecustomize.py"  # the same for every line
_MARKER = ".kimi-env-complete"  # written last: holds the lock+shim hash
_ENGINE_STATE = ".kimi-engine"  # "<engine>==<version>" once swapped in and pruned

# (engine, first release, last release or None = open) -> line, from each engine's description
# (engine_specs.<engine>.SPEC.cpu_env_lines: the boundaries follow the engines' own transformers
# pins). Probed releases and results: patcher/maintainer/cpu_envs/NOTES.md.
LINES: list[tuple[str, str, str | None, str]] = [
    (s.name, line.first, line.last, line.name) for s in engine_specs.ALL for line in s.cpu_env_lines]
_LOCK_FILES: dict[str, Path] = {line.name: line.lock for s in engine_specs.ALL for line in s.cpu_env_lines}

# seconds: one import (tests), or the whole import table (run_probes); a cold import on 2 busy cores is < 30 s
PROBE_TIMEOUT = 600
# PyTorch's own index of CPU builds. The locks pin ``torch==X+cpu`` (a few hundred MB, no CUDA
# libraries); the public package index carries only ``torch==X``, the CUDA build, which needs
# several GB of nvidia-* packages to import. Where pip's configured index (a mirror, a local wheel
# folder) lacks the pin, it is asked of this one too.
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


class CpuBuildMissing(RuntimeError):
    """A ``+cpu`` pin of a lock found on no index pip was given: the line cannot be built here."""


def _v(version: str) -> Version:
    return Version(version)


def line_for(engine: str, version: str) -> str:
    """The env line whose lock serves ``engine==version``."""
    v = _v(version)
    for eng, first, last, line in LINES:
        if eng == engine and v >= _v(first) and (last is None or v <= _v(last) or
                                                 v.base_version == _v(last).base_version):
            return line
    raise ValueError(f"no CPU env line covers {engine}=={version}")


def reaches(engine: str, version: str) -> bool:
    """Whether a CPU env line serves ``engine==version`` (vLLM 0.9.x: none does)."""
    try:
        line_for(engine, version)
    except ValueError:
        return False
    return True


def shims_for(engine: str, version: str) -> frozenset[str]:
    """The sitecustomize shims ``engine==version`` needs (see cpu_envs/sitecustomize.py)."""
    if engine not in engine_specs.BY_NAME:
        raise ValueError(engine)
    v = _v(version)
    return frozenset(shim for shim, before in engine_specs.spec(engine).cpu_shims
                     if before is None or v < _v(before))


# The modules a CPU env imports for each release, as each engine module lists them
# (``EngineSpec.cpu_imports``: the patched modules, and what they need imported first).
Probe = CpuImport
PROBES: dict[str, list[Probe]] = {s.name: list(s.cpu_imports) for s in engine_specs.ALL}


def probes_for(engine: str, version: str) -> list[Probe]:
    v = _v(version)
    return [p for p in PROBES[engine] if (p.first is None or v >= _v(p.first)) and (p.last is None or v <= _v(p.last))]


# --------------------------------------------------------------------------- env


def lock_path(line: str) -> Path:
    """The lock file of the line ``line``, as its engine's module names it."""
    return _LOCK_FILES[line]


def _key(line: str) -> str:
    """Hash of the lock file: a changed lock means a rebuilt venv."""
    return hashlib.sha256(lock_path(line).read_bytes()).hexdigest()[:16]


def _site_packages(env: Path) -> Path:
    (sp,) = env.glob("lib/python3*/site-packages")
    return sp


@contextlib.contextmanager
def _build_lock():
    """One build or engine swap at a time on this machine (2 cores, tight disk)."""
    ENVS.mkdir(parents=True, exist_ok=True)
    with open(ENVS / ".build.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _pip(python: Path, *args: str) -> None:
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps",
                    "--disable-pip-version-check", *args], check=True)


def _cpu_builds(lock: Path) -> list[str]:
    """The lock's pins of local CPU builds (``torch==2.13.0+cpu``): the public index has none."""
    return [ln.strip() for ln in lock.read_text().splitlines() if re.fullmatch(r"[\w.-]+==[\w.]+\+cpu", ln.strip())]


def _install_lock(python: Path, lock: Path, log=print) -> None:
    """``pip install --no-deps -r lock``, the CPU builds first: each from pip's own index, else from
    PyTorch's CPU index (said in a line), else an error naming the command that installs it. The
    rest of the lock then finds them installed and downloads nothing more for them."""
    for pin in _cpu_builds(lock):
        try:
            _pip(python, pin)
            continue
        except subprocess.CalledProcessError:
            log(f"[cpu_env] {pin} is not on pip's configured index; asking PyTorch's CPU index {TORCH_CPU_INDEX}")
        try:
            _pip(python, "--extra-index-url", TORCH_CPU_INDEX, pin)
        except subprocess.CalledProcessError:
            raise CpuBuildMissing(
                f"cannot install {pin} into {python.parent.parent}: neither pip's configured index nor "
                f"{TORCH_CPU_INDEX} has it\n  wanted: {pin} (a CPU build: the CUDA one needs GB of nvidia-* "
                f"packages)\n  found:  no such file on either index\n  hint:   {python} -m pip install --no-deps "
                f"--index-url URL {pin}, with URL an index or mirror that has it, then run the same command "
                "again") from None
    _pip(python, "-r", str(lock))


def _ensure_line(line: str, log=print) -> Path:
    """The venv of ``line``, built from its lock if missing or stale. Caller holds the build lock."""
    env = ENVS / line
    key = _key(line)
    marker = env / _MARKER
    if marker.exists() and json.loads(marker.read_text()).get("key") == key:
        return env
    log(f"[cpu_env] building {line} in {env} (lock {key})")
    t0 = time.monotonic()
    shutil.rmtree(env, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    _install_lock(env / "bin" / "python", lock_path(line), log)
    info = {"key": key, "build_seconds": round(time.monotonic() - t0, 1), "built": time.strftime("%F %T")}
    marker.write_text(json.dumps(info) + "\n")
    log(f"[cpu_env] built {line} in {info['build_seconds']} s")
    return env


def _installed_version(env: Path, engine: str) -> str | None:
    """The one release installed, or None: two dist-infos (pip's leftovers) are no release."""
    found = [d.name[len(engine) + 1: -len(".dist-info")] for d in _site_packages(env).glob(f"{engine}-*.dist-info")]
    return found[0] if len(found) == 1 else None


def _clear_engine(env: Path, engine: str) -> None:
    """Remove every trace of an installed engine: its package, each dist-info, and what pip stashes
    while it uninstalls (each path renamed with a leading ``~``; no importable name has one). A pip
    killed mid-swap (a CI run stopped) leaves those and a second dist-info behind, and the next
    ``pip install`` removes one copy only: CI of 990efee found sglang 0.5.13 where 0.5.16 had been
    installed, beside three other dist-infos and the stash of a fourth."""
    sp = _site_packages(env)
    shutil.rmtree(sp / engine, ignore_errors=True)
    for d in [*sp.glob(f"{engine}-*.dist-info"), *sp.glob("~*")]:
        if d.is_dir():
            shutil.rmtree(d)
        else:
            d.unlink()


def _write_shims(env: Path, engine: str, version: str) -> None:
    shims = sorted(shims_for(engine, version))
    text = SHIM_TEMPLATE.read_text()
    text, n = re.subn(r"^SHIMS: frozenset\[str\] = frozenset\(\)",
                      f"SHIMS: frozenset[str] = frozenset({shims!r})", text, flags=re.MULTILINE)
    assert n == 1, "SHIMS line not found in the sitecustomize template"
    dest = _site_packages(env) / "sitecustomize.py"
    if not dest.exists() or dest.read_text() != text:
        dest.write_text(text)


def _unloadable_so(env: Path, engine: str) -> list[Path]:
    """The engine's shared objects that fail to dlopen here (torch loaded first)."""
    root = _site_packages(env) / engine
    libs = sorted(str(p) for p in root.rglob("*.so"))
    if not libs:
        return []
    code = (
        "import ctypes, json, sys, torch\n"
        "bad = []\n"
        "for p in json.loads(sys.argv[1]):\n"
        "    try: ctypes.CDLL(p)\n"
        "    except OSError: bad.append(p)\n"
        "print(json.dumps(bad))\n"
    )
    out = subprocess.run([str(env / "bin" / "python"), "-c", code, json.dumps(libs)],
                         check=True, capture_output=True, text=True, cwd=tempfile.gettempdir()).stdout
    return [Path(p) for p in json.loads(out.strip().splitlines()[-1])]


def _install_tree(env: Path, engine: str, version: str) -> None:
    """Replace the engine in ``env`` by the published sources and dist-info of ``version``."""
    from patcher.maintainer import wheels

    tree = wheels.tree(engine, version)
    sp = _site_packages(env)
    _clear_engine(env, engine)
    shutil.copytree(tree / engine, sp / engine)
    for d in tree.glob(f"{engine}-*.dist-info"):
        shutil.copytree(d, sp / d.name)


def _swap_engine(env: Path, engine: str, version: str, log=print) -> list[dict] | None:
    """Put ``engine==version`` in ``env``; returns probe results if pruning ran them."""
    state = env / _ENGINE_STATE
    want = f"{engine}=={version}"
    if state.exists() and state.read_text().strip() == want and _installed_version(env, engine) == version:
        return None
    state.unlink(missing_ok=True)
    # A run killed mid-test (a CI timeout) leaves the previous release's bookkeeping behind. The
    # swap lays published files over it, so it describes nothing here; a stale state file would
    # only read as "lost", but a journal names files of the old RECORD and stops the next apply.
    shutil.rmtree(_site_packages(env) / ".kimi-patcher", ignore_errors=True)
    python = env / "bin" / "python"
    if engine_specs.spec(engine).cpu_install == "sources":  # the engine module says why
        t0 = time.monotonic()
        _install_tree(env, engine, version)
        _write_shims(env, engine, version)
        state.write_text(want + "\n")
        log(f"[cpu_env] laid in {want} sources from the wheel cache in {time.monotonic() - t0:.1f} s")
        return None
    if _installed_version(env, engine) != version:
        t0 = time.monotonic()
        _clear_engine(env, engine)
        _pip(python, want)
        log(f"[cpu_env] installed {want} in {time.monotonic() - t0:.1f} s")
    _write_shims(env, engine, version)
    results = None
    bad = _unloadable_so(env, engine)
    if bad:
        sp = _site_packages(env)
        aside = env / ".pruned-so"
        shutil.rmtree(aside, ignore_errors=True)
        for p in bad:
            dest = aside / p.relative_to(sp)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(p), dest)
        results = run_probes(python, engine, version)
        if all(r["ok"] for r in results):
            shutil.rmtree(aside)
            log(f"[cpu_env] deleted {len(bad)} unloadable *.so of {want}; probes pass without them")
        else:  # keep the engine as shipped
            for p in bad:
                shutil.move(str(aside / p.relative_to(sp)), p)
            shutil.rmtree(aside)
            log(f"[cpu_env] kept {len(bad)} unloadable *.so of {want}: some probes fail without them")
            results = None
    state.write_text(want + "\n")
    return results


def env_python(engine: str, version: str) -> Path:
    """Python of a CPU venv where ``engine==version`` is installed and importable.

    Unlocked: another process may swap the engine right after. Concurrent users (tests,
    benchmarks, port) take ``using()`` instead."""
    return _prepare(engine, version)[0]


@contextlib.contextmanager
def using(engine: str, version: str, log=print):
    """``engine==version`` in its line's env, held exclusively until the block ends: a
    concurrent run swapping the engine mid-probe would change what the probes import."""
    line = line_for(engine, version)
    ENVS.mkdir(parents=True, exist_ok=True)
    with open(ENVS / f".{line}.use.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield _prepare(engine, version, log)[0]
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _prepare(engine: str, version: str, log=print) -> tuple[Path, list[dict] | None]:
    line = line_for(engine, version)
    with _build_lock():
        env = _ensure_line(line, log)
        results = _swap_engine(env, engine, version, log)
        _write_shims(env, engine, version)
    return env / "bin" / "python", results


# ------------------------------------------------------------------------ probes

def probe_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    return env


def run_probes(python: Path, engine: str, version: str, say=None) -> list[dict]:
    """Import each module of the table in its own child of patcher's one probe runner (probes.py):
    the same isolation and preloaded zygote as ``patcher verify``, and PROBE_TIMEOUT for them all."""
    table = probes_for(engine, version)
    batches = [[{"id": p.module, "module": p.module, "preload": list(p.prelude), "check": None}] for p in table]
    spec = engine_specs.spec(engine)
    got = probes.run_groups(str(python), spec.package, [], batches, PROBE_TIMEOUT, probe_env(),
                            cwd=tempfile.gettempdir(), say=say, preload=spec.probe_preload)
    out = []
    for p, (r,) in zip(table, got):
        res = {"ok": r["status"] == "passed", "module": p.module, "prelude": list(p.prelude),
               "seconds": r.get("seconds", 0.0)}
        if not res["ok"]:
            res.update(error=f"{r['status']}: {r.get('detail', '')}", where=r.get("where", ""))
        out.append(res)
    return out


def _du(path: Path) -> str:
    out = subprocess.run(["du", "-sh", str(path)], capture_output=True, text=True).stdout
    return out.split()[0] if out else "?"


def check(engine: str, versions: list[str]) -> bool:
    ok = True
    for version in versions:
        t0 = time.monotonic()
        python, results = _prepare(engine, version)
        prep = time.monotonic() - t0
        t1 = time.monotonic()
        if results is None:
            results = run_probes(python, engine, version, say=print)
        env = python.parents[1]
        print(f"\n## {engine} {version}  (line {env.name}, env {_du(env)}, prepare {prep:.1f} s, "
              f"probes {time.monotonic() - t1:.1f} s, shims: {', '.join(sorted(shims_for(engine, version)))})")
        for r in results:
            pre = f" (after {', '.join(r['prelude'])})" if r["prelude"] else ""
            if r["ok"]:
                print(f"  OK   {r['seconds']:5.1f} s  {r['module']}{pre}")
            else:
                ok = False
                print(f"  FAIL {r['module']}{pre}: {r['error']}  [{r['where']}]")
    return ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m patcher.maintainer.cpu_env", description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", nargs="+", metavar=("ENGINE", "VERSION"),
                    help="build/reuse the env for ENGINE VERSION... and print the import table")
    ap.add_argument("--python", nargs=2, metavar=("ENGINE", "VERSION"), help="print the env's python")
    args = ap.parse_args(argv)
    if args.python:
        print(env_python(*args.python))
        return 0
    if args.check:
        if len(args.check) < 2:
            ap.error("--check needs ENGINE and at least one VERSION")
        return 0 if check(args.check[0], args.check[1:]) else 1
    ap.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
