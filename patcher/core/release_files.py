"""A release's files as the plan reads them, and the evidence read from them.

``Files`` reads each engine file once (any byte survives: surrogateescape); evidence is a fact about
the release's code, read from a file (or alternatives), or from a definition found by name wherever
the RECORD puts it (``manifest.Evidence`` says what an item may state). Reads only; never imports
the engine.
"""

from __future__ import annotations

import ast

from patcher.core import hunks
from patcher.core.manifest import Evidence, Family, Refused, Upstream
from patcher.environment.engines import Install, sha256_record


def decode(data: bytes) -> str:
    # surrogateescape: any byte survives the round trip, so untouched bytes stay identical.
    return data.decode("utf-8", "surrogateescape")


def encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


class Files:
    """Read-once cache of engine file contents: the text, and its split lines where a hunk needs them
    (a scope reading only searches the text of thousands of files: splitting and joining each back
    cost it a third of its time)."""

    def __init__(self, install: Install) -> None:
        self.install = install
        self._text: dict[str, str | None] = {}
        self._lines: dict[str, hunks.Text] = {}
        self._defs: dict[tuple[str, str], list[tuple[str, str]]] = {}

    def text(self, rel: str) -> str | None:
        if rel not in self._text:
            data = self.install.read(rel) if rel in self.install.record else None
            self._text[rel] = None if data is None else decode(data)
        return self._text[rel]

    def lines(self, rel: str) -> hunks.Text | None:
        if rel not in self._lines:
            text = self.text(rel)
            if text is None:
                return None
            self._lines[rel] = hunks.split(text)
        return self._lines[rel]

    def sha(self, rel: str) -> str | None:
        text = self.text(rel)
        return None if text is None else sha256_record(encode(text))

    def definitions(self, qualname: str, under: str = "") -> list[tuple[str, str]]:
        """``(file, source)`` of every ``def`` / ``class`` named ``qualname`` ("name" or
        "Class.name") in the engine's RECORD under ``under`` (default: the whole package), in
        RECORD path order. A substring test picks the files worth parsing."""
        key = (qualname, under)
        if key not in self._defs:
            last = qualname.rsplit(".", 1)[-1]
            prefix = under or self.install.package + "/"
            out = []
            for rel in sorted(r for r in self.install.record if r.endswith(".py") and r.startswith(prefix)):
                text = self.text(rel)
                if text is None or not any(f"{kw} {last}" in text for kw in ("def", "class")):
                    continue
                out += [(rel, src) for src in source_of(text, qualname)]
            self._defs[key] = out
        return self._defs[key]


def source_of(text: str, qualname: str) -> list[str]:
    """The source of each definition of ``qualname`` at module level (or in a module-level class)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    *outer, name = qualname.split(".")
    scopes: list[list[ast.stmt]] = [tree.body]
    for cls in outer:
        scopes = [n.body for body in scopes for n in body if isinstance(n, ast.ClassDef) and n.name == cls]
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return [ast.get_source_segment(text, n) or "" for body in scopes for n in body
            if isinstance(n, kinds) and n.name == name]


def evidence_fails(files: Files, entry: Upstream | Refused) -> str | None:
    """What of an upstream or refused entry's evidence does not hold on these files (the first
    failure, as text); None when all of it holds. ``port`` judges a new release by it too."""
    for ev in entry.evidence:
        failed = _fails(files, ev)
        if failed:
            return failed
    return None


def _fails(files: Files, ev: Evidence) -> str | None:
    """None when ``ev`` holds in one of the places it may be read, else the first place's failure."""
    places: list[tuple[str, str | None]]
    if ev.defines:
        places = [(f"{rel}: def {ev.defines}", src) for rel, src in files.definitions(ev.defines, ev.under)]
        if not places:
            return ev.holds(None, f"def {ev.defines} (under {ev.under or files.install.engine + '/'})")
    else:
        places = [(rel, files.text(rel)) for rel in ev.files]  # None for a file RECORD does not list
    failures = [ev.holds(text, where) for where, text in places]
    return None if None in failures else failures[0]


def evidence_paths(files: Files, family: Family) -> set[str]:
    """Every file the family's evidence reads on this install (tests copy just these)."""
    out: set[str] = set()
    for ev in (ev for entry in judged(family) for ev in entry.evidence):
        out |= {rel for rel, _ in files.definitions(ev.defines, ev.under)} if ev.defines else set(ev.files)
    return out


def judged(family: Family) -> list[Upstream | Refused]:
    """The entries a family states evidence for."""
    return [*family.upstream, *family.refused]
