"""Answers of the release's own code, cached on disk: what the parser and loader children said.

A child (the release's parser reading a line, its loader reading a drafter) answers from the
release's files and the request alone, so its answer is kept under ``$KIMI_PATCHER_CACHE/<kind>/``
(default ``~/.cache/kimi-patcher``), keyed by a hash the caller builds from everything the answer
depends on; ``files_digest`` is the part every key shares: the release's files as installed. A
cache file is input like any other: the caller validates what ``load`` returns.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path

ROOT = Path(os.environ.get("KIMI_PATCHER_CACHE", Path.home() / ".cache" / "kimi-patcher"))


def folder(kind: str) -> Path:
    return ROOT / kind


def files_digest(site: Path, rels: list[str] | None, package: str) -> str:
    """What every ``.py`` of the release holds (``rels``: its RECORD's paths; None: walk the package
    folder), by content: ``patcher apply`` changes it, and a revert (or a reinstall of the same
    release), which writes the same bytes back, finds the answers asked before. The bytes are read
    once per listing of (path, size, mtime): the content hash is kept under that listing's hash."""
    if rels is None:
        rels = []
        for dirpath, dirnames, filenames in os.walk(site / package):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            rels += [os.path.relpath(os.path.join(dirpath, n), site) for n in filenames]
    listing, present = hashlib.sha256(), []
    for rel in sorted(r for r in rels if r.endswith(".py")):
        try:
            st = (site / rel).stat()
        except OSError:
            continue
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


def load(path: Path) -> object:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def store(path: Path, got: dict) -> None:
    """Written whole or not at all; a cache that cannot be written only costs the next run time."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as tmp:
            json.dump(got, tmp)
        os.replace(tmp.name, path)
    except OSError:
        pass
