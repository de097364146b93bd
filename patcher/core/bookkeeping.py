"""Our own files in ``<site>/.kimi-patcher/``, read back as untrusted input.

Anyone who can write site-packages can write these files, and a crash or a bad disk can
damage them, so each is parsed against the schema ``write.py`` writes and every path in
it is confined to the engine's RECORD (``Install.path``) before anything acts on it.
What happens when one is wrong (docs/reference.md, "Our bookkeeping"):

* state file (``<engine>.json``) malformed: error, exit 2, nothing written. It only tells
  "lost" from "pending"; deleting it loses nothing the files cannot tell.
* journal (``<engine>.txn/journal.json``) malformed, or naming a path that is not a plain
  RECORD file of the engine, or a backup outside its folder: error, exit 2, nothing
  restored. Rolling back on a journal we cannot trust could write anywhere.
* backups: checked against the journal's hash before any rename (a torn backup is refused).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from patcher import program
from patcher.environment.engines import Install
from patcher.environment.paths import plain_rel
from patcher.errors import EngineError, WriteError

HASH = re.compile(r"sha256=[A-Za-z0-9_-]{43}")
BACKUP = re.compile(r"[0-9]{1,6}\.orig")
STATE_SHAPE = '{"engine": str, "version": str, "families": {family id: {"variant": str, "version": str, ' \
              '"files": {RECORD path: "sha256=..."}}}}'
JOURNAL_SHAPE = '{"engine": str, "state_before": bool, "files": [{"rel": RECORD path, "old": "sha256=...", ' \
                '"new": "sha256=...", "backup": "<n>.orig", "mode": int}]}'


@dataclass(frozen=True)
class Entry:
    rel: str
    old: str
    new: str
    backup: str
    mode: int


@dataclass(frozen=True)
class Journal:
    entries: tuple[Entry, ...]
    state_before: bool


def _json(raw: bytes) -> object:
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise _Shape(f"not JSON ({str(exc)[:120]})") from None


class _Shape(Exception):
    """One thing wrong with a document's shape; turned into the right error by the caller."""


def _need(ok: bool, found: str) -> None:
    if not ok:
        raise _Shape(found)


def _describe(value: object) -> str:
    return f"{type(value).__name__} {json.dumps(value)[:80]}" if _dumpable(value) else type(value).__name__


def _dumpable(value: object) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        return False
    return True


def _rel(install: Install, rel: object, field: str) -> str:
    _need(isinstance(rel, str), f"{field}: {_describe(rel)}")
    assert isinstance(rel, str)
    try:
        install.path(rel)
    except EngineError as exc:
        raise _Shape(f"{field}: {exc.what}") from None
    return rel


def _recorded(rel: object, field: str) -> str:
    """A path the state file says apply wrote. It is compared by hash and never opened (release_files.Files
    reads only files the current RECORD lists), so it must be a plain relative path but need not be
    in this RECORD: an upgrade or downgrade that dropped a file we had patched leaves just that, and
    the truthful answer then is "lost", not "forged". Journal paths are acted on: those use _rel."""
    _need(isinstance(rel, str) and plain_rel(rel), f"{field}: {_describe(rel)}")
    assert isinstance(rel, str)
    return rel


def _hash(value: object, field: str) -> str:
    _need(isinstance(value, str) and HASH.fullmatch(value) is not None, f"{field}: {_describe(value)}")
    assert isinstance(value, str)
    return value


def _document(raw: bytes, install: Install) -> dict:
    """The top-level object of one of our files, written for this engine."""
    doc = _json(raw)
    _need(isinstance(doc, dict), f"top level: {_describe(doc)}")
    assert isinstance(doc, dict)
    _need(doc.get("engine") == install.engine, f"engine: {_describe(doc.get('engine'))}")
    return doc


def parse_state(raw: bytes, where: Path, install: Install) -> dict[str, dict]:
    """The ``families`` of a state file, or a WriteError naming what is wrong with it."""
    try:
        doc = _document(raw, install)
        _need(isinstance(doc.get("version"), str), f"version: {_describe(doc.get('version'))}")
        fams = doc.get("families")
        _need(isinstance(fams, dict), f"families: {_describe(fams)}")
        assert isinstance(fams, dict)
        for fid, rec in fams.items():
            _need(isinstance(rec, dict), f"families.{fid}: {_describe(rec)}")
            for key in ("variant", "version"):
                _need(isinstance(rec.get(key), str), f"families.{fid}.{key}: {_describe(rec.get(key))}")
            files = rec.get("files")
            _need(isinstance(files, dict), f"families.{fid}.files: {_describe(files)}")
            for rel, digest in files.items():
                _recorded(rel, f"families.{fid}.files")
                _hash(digest, f"families.{fid}.files.{rel}")
    except _Shape as exc:
        raise WriteError(f"our state file {where} is not one patcher wrote", wanted=STATE_SHAPE, found=str(exc),
                         hint=f"delete {where}; '{program.command('verify')}' then reports from the files "
                              "alone") from None
    return fams


def parse_journal(raw: bytes, where: Path, install: Install) -> Journal:
    """A journal whose every path is a plain RECORD file of the engine, or a WriteError."""
    try:
        doc = _document(raw, install)
        _need(isinstance(doc.get("state_before"), bool), f"state_before: {_describe(doc.get('state_before'))}")
        files = doc.get("files")
        _need(isinstance(files, list), f"files: {_describe(files)}")
        assert isinstance(files, list)
        entries = []
        for i, e in enumerate(files):
            _need(isinstance(e, dict), f"files[{i}]: {_describe(e)}")
            mode = e.get("mode")
            _need(type(mode) is int and 0 <= mode <= 0o7777, f"files[{i}].mode: {_describe(mode)}")
            backup = e.get("backup")
            _need(isinstance(backup, str) and BACKUP.fullmatch(backup) is not None,
                  f"files[{i}].backup: {_describe(backup)}")
            entries.append(Entry(_rel(install, e.get("rel"), f"files[{i}].rel"), _hash(e.get("old"), f"files[{i}].old"),
                                 _hash(e.get("new"), f"files[{i}].new"), str(backup), int(mode)))  # type: ignore[arg-type]
        _need(len({e.rel for e in entries}) == len(entries), "files: a path appears twice")
        _need(len({e.backup for e in entries}) == len(entries), "files: a backup appears twice")
    except _Shape as exc:
        txn = where.parent
        raise WriteError(f"cannot roll back an interrupted run: {where} is not a journal patcher wrote",
                         wanted=JOURNAL_SHAPE, found=str(exc),
                         hint=f"nothing was restored; put the published files back ({install.restore_command()}), "
                              f"then delete {txn}") from None
    return Journal(tuple(entries), bool(doc["state_before"]))
