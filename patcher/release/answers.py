"""Answers of the release's own code, cached on disk: what the parser and loader children said.

A child (the release's parser reading a line, its loader reading a drafter) answers from the
release's files and the request alone, so its answer is kept under ``$KIMI_PATCHER_CACHE/<kind>/``
(default ``~/.cache/kimi-patcher``), keyed by a hash the caller builds from everything the answer
depends on; ``files_digest`` is the part every key shares: the release's files as installed. A
cache file is input like any other: the caller validates what ``load`` returns.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(os.environ.get("KIMI_PATCHER_CACHE", Path.home() / ".cache" / "kimi-patcher"))


def folder(kind: str) -> Path:
    return ROOT / kind


def _py_stats(top: str, rels: list[str]) -> list[tuple[str, os.stat_result]]:
    out = []
    for rel in rels:
        if rel.endswith(".py"):
            try:
                out.append((rel, os.stat(f"{top}/{rel}")))
            except OSError:
                continue
    return out


def _py_listing(top: str, package: str) -> list[tuple[str, os.stat_result]]:
    """Every ``.py`` under ``top/package`` (``__pycache__`` left out), as a path relative to ``top``
    and its stat; a link to a folder is not followed (as ``os.walk`` does not)."""
    out, folders = [], [package]
    while folders:
        rel = folders.pop()
        try:
            entries = list(os.scandir(f"{top}/{rel}"))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        folders.append(f"{rel}/{entry.name}")
                elif entry.name.endswith(".py"):
                    out.append((f"{rel}/{entry.name}", entry.stat()))
            except OSError:
                continue
    return out


def files_digest(site: Path, rels: list[str] | None, package: str) -> str:
    """What every ``.py`` of the release holds (``rels``: its RECORD's paths; None: walk the package
    folder), by content: ``patcher apply`` changes it, and a revert (or a reinstall of the same
    release), which writes the same bytes back, finds the answers asked before. The bytes are read
    once per listing of (path, size, mtime): the content hash is kept under that listing's hash."""
    # Strings, not Paths: every key asked in a process lists a few thousand files (doctor, the tests).
    top = str(site)
    listed = _py_listing(top, package) if rels is None else _py_stats(top, rels)
    listing, present = hashlib.sha256(), []
    for rel, st in sorted(listed):
        listing.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
        present.append(rel)
    memo = folder("digests") / f"{listing.hexdigest()}.json"
    got = load(memo)
    if isinstance(got, dict) and isinstance(got.get("content"), str) and re.fullmatch(r"[0-9a-f]{64}", got["content"]):
        return got["content"]
    content = hashlib.sha256()
    for rel in present:
        try:
            data = (site / rel).read_bytes()
        except OSError:
            continue
        content.update(f"{rel}\0{len(data)}\n".encode() + data)
    store(memo, {"content": content.hexdigest()})
    return content.hexdigest()


_LOOK = ("import json, sys; print(json.dumps([sys.version, sys.implementation.cache_tag, "
         "[p for p in sys.path if p]]))")
_LOOKED: dict[tuple[str, str], list | None] = {}  # (python, path_first) -> [version, cache tag, import path]


def interpreter_digest(python: str, path_first: Path | None = None) -> str:
    """What the interpreter a child runs in is, not where it lives: its version, then, per entry of
    its import path in order (``path_first`` put first, as the children run with ``--site``), the
    names of the distributions there (``*.dist-info``: name and version), its ``.pth`` files' code
    (not the paths they add, which are entries of the path themselves: a clone of patcher installed
    editable is one interpreter wherever it was cloned) and its ``sitecustomize``/``usercustomize``
    bytes (the CPU envs' shims). Two copies of one environment (each test worker builds its own)
    are one interpreter; a torch or transformers upgrade, an editable install or an edited shim is
    another. The engine's own code is keyed apart (``files_digest``). The interpreter is started
    once per process (about 30 ms) for its version and import path; what the path holds is read on
    every call, so an install in between counts."""
    first = str(path_first) if path_first is not None else ""
    if (python, first) not in _LOOKED:
        _LOOKED[python, first] = _look(python, first)
    looked = _LOOKED[python, first]
    h = hashlib.sha256(json.dumps(looked[:2] if looked else ["unlooked", python, first]).encode())
    # not one we can look into (it does not run, or says something else): keyed by where it lives
    for entry in map(Path, looked[2] if looked else []):
        h.update(b"\0entry\n")
        with contextlib.suppress(OSError):
            for name in sorted(os.listdir(entry)) if entry.is_dir() else []:
                if name.endswith((".dist-info", ".egg-info", ".egg-link")):
                    h.update(f"{name}\n".encode())
                elif name in ("sitecustomize.py", "usercustomize.py"):
                    h.update(f"{name}\n".encode() + (entry / name).read_bytes())
                elif name.endswith(".pth"):  # its code; a path it adds is an entry of the import path
                    code = [ln for ln in (entry / name).read_text(errors="replace").splitlines()
                            if ln.startswith(("import ", "import\t"))]
                    h.update(f"{name}\n{code}\n".encode())
    return h.hexdigest()


def _look(python: str, first: str) -> list | None:
    """[version, cache tag, import path] of ``python`` (``first`` put first), or None."""
    env = dict(os.environ)
    if first:
        env["PYTHONPATH"] = os.pathsep.join([first, *filter(None, [env.get("PYTHONPATH")])])
    try:
        out = subprocess.run([python, "-c", _LOOK], capture_output=True, text=True, env=env, timeout=60)
        got = json.loads((out.stdout.strip().splitlines() or [""])[-1])
    except (OSError, ValueError, subprocess.SubprocessError):
        return None
    ok = (isinstance(got, list) and len(got) == 3 and all(isinstance(s, str) for s in got[:2])
          and isinstance(got[2], list) and all(isinstance(s, str) and s for s in got[2]))
    return got if ok else None


NAMED_WHOLE = 1 << 20  # a named file up to this size is keyed by its bytes; a larger one (weights) by size and mtime


def named_digest(strings: list[str]) -> str:
    """What the paths among ``strings`` name, as the start-up reads it: each string (an option's
    ``=`` value, each string inside a JSON value, each word of a named ``--config`` file) that
    names an existing path gives its resolved path (the working directory enters here, for a
    relative one) and its bytes; a folder (a model, a drafter), each entry's name and the bytes
    of each file in it up to ``NAMED_WHOLE`` (config.json, the tokenizer's files). The release's
    start-up reads the model's and drafter's configs, so an edited config.json asks anew."""
    h, seen, todo = hashlib.sha256(), set(), list(strings)
    while todo:
        s = todo.pop(0)
        if not isinstance(s, str) or not s or len(s) > 4096 or "\0" in s:
            continue
        if s.startswith("-") and "=" in s:
            todo.append(s.split("=", 1)[1])
            continue
        if s[0] in "[{":
            with contextlib.suppress(ValueError, RecursionError):
                todo.extend(_strings(json.loads(s)))
            continue
        try:
            path = Path(s).expanduser().resolve()
            if path in seen or not path.exists():
                continue
            seen.add(path)
            h.update(f"{s}\0{path}\n".encode())
            if path.is_file():
                data = _whole(path, h)
                if data is not None:  # a --config file names paths too (one level: its words)
                    todo.extend(re.findall(r"[^\s'\"=:,\[\]{}]+", data.decode("utf-8", "replace")))
            elif path.is_dir():
                for entry in sorted(path.iterdir())[:1000]:
                    h.update(f"{entry.name}\n".encode())
                    if entry.is_file():
                        _whole(entry, h)
        except (OSError, RuntimeError):
            h.update(f"{s}\0unreadable\n".encode())
    return h.hexdigest()


def _whole(path: Path, h) -> bytes | None:
    """Adds a file to ``h``: its bytes, or its size and mtime where larger than ``NAMED_WHOLE``."""
    st = path.stat()
    if st.st_size > NAMED_WHOLE:
        h.update(f"{st.st_size}\0{st.st_mtime_ns}\n".encode())
        return None
    data = path.read_bytes()
    h.update(f"{len(data)}\n".encode() + data)
    return data


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


UNUSED_DAYS = 30  # an answer neither written nor read for this long goes (an old release's, our old code's)


def load(path: Path) -> object:
    try:
        got = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # read: ``prune`` keeps it
    return got


def store(path: Path, got: object) -> None:
    """Written whole or not at all; a cache that cannot be written only costs the next run time."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as tmp:
            json.dump(got, tmp)
        os.replace(tmp.name, path)
    except OSError:
        return
    prune(path.parent)


def prune(folder: Path, now: float | None = None) -> None:
    """At most once a day per folder, remove the answers not used for ``UNUSED_DAYS``: every change of
    our children's code or of a release's files keys new answers, and nothing else would ever remove
    the old ones (a CI machine's cache grew by thousands a change)."""
    now = time.time() if now is None else now
    mark = folder / ".pruned"
    try:
        if now - mark.stat().st_mtime < 86400:
            return
    except FileNotFoundError:
        pass
    except OSError:
        return
    with contextlib.suppress(OSError):
        mark.touch()
        for entry in os.scandir(folder):
            if entry.name.endswith((".json", ".tmp")):
                with contextlib.suppress(OSError):
                    if now - entry.stat().st_mtime > UNUSED_DAYS * 86400:
                        os.unlink(entry.path)
