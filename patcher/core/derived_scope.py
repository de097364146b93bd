"""A family's scope derived from its own diffs: what a variant's behaviour depends on, found by a
rule on a release's files, with no string a reader chose (issue 55).

For one variant, on a release whose files its hunks fit (``signature``):

- **touched**: each definition its hunks sit in (the method or function holding them, else the
  module- or class-level statement), and every definition of a patched file that uses a name its
  added lines read, each hashed by what it does with the names concerned: the statements and
  branch conditions about them, as a canonical syntax tree (``_canon``). Upstream changing how
  those names are computed or tested (a fix beside ours, a new branch) changes what we patch; a
  comment or a reformatting does not.
- **readers**: beside a patched file, every file naming a class whose method our hunks edit;
  anywhere in the package, every file naming a module-level table or function they edit, and one
  hop on, every file calling a function that reads it (vLLM 0.17.0's second reader of the
  allreduce size table).
- **copies**: every file beside a patched one that holds a line our hunks rewrite (or a line next
  to it), where at most four do: the same code elsewhere (SGLang 0.5.12's second drafter class).
- **switches**: every place in the package that turns on an ``enable_*``/``disable_*``/``use_*``
  switch our added lines read, with its conditions (SGLang 0.5.4.post2's auto-enable), and beside
  a patched file, every file holding a quoted config key they read (an EAGLE 3.1 switch a drafter
  class starts to read).

"Beside" is the patched files' own folders: where a release puts the next drafter class or gate.
Each variant records this signature on the published files of every release it is declared on
(``derived-scope.json``, written by ``python -m patcher.maintainer.scope_lock``). On a release no
entry declares, a variant whose hunks fit counts only where its derived signature is one of
those: anything else is a place no variant was proven on, and the family is ``unknown``. A
hand-written ``[scope]`` (``patcher.core.scope``) may add to this, never replace it.

Over 300 lines: one rule in four readings that share one walk of the hunks and one of the
package's files; the lock (its validation, the comparison) is at the bottom. The thresholds
below bound noise (boilerplate lines, names called everywhere); the leave-out proof with every
hand-written scope removed (tests/test_derived_scope.py) is what they are checked against.
"""

from __future__ import annotations

import ast
import hashlib
import json
import posixpath
import re
from pathlib import Path

from patcher.core import hunks
from patcher.core.manifest import Family, ManifestError
from patcher.core.release_files import Files, decode

LOCK = "derived-scope.json"
Signature = dict[str, tuple[str, ...]]
_COPY_MIN = 25  # a rewritten line shorter than this (``return x``, ``)``) is everywhere: no pattern
# A rewritten line held by more files than this beside ours is boilerplate, not the code we guard.
_PATTERN_FILES = 4
# A reader's own name shorter than this (``get``, ``forward``) is called everywhere: no second hop.
_RELAY_MIN = 12
# Names too common to say what a statement is about.
_COMMON = frozenset({"self", "cls", "None", "True", "False", "len", "int", "str", "bool", "dict", "list", "tuple",
                     "isinstance", "getattr", "hasattr", "super", "range", "return", "if", "else", "not", "and",
                     "or", "in", "is", "for", "def", "raise", "ValueError", "print", "logger"})
_IDENT = re.compile(r"[A-Za-z_]\w*")
_STRING = re.compile(r"'[^']*'|\"[^\"]*\"")
_SWITCH = re.compile(r"(?:enable|disable|use)_\w+")  # a feature switch: what an auto-enable sets
_KEY = re.compile(r"[\"']([a-z][a-z0-9]*_[a-z0-9_]+)[\"']")  # a quoted config key our lines read
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _changed(h: hunks.Hunk) -> tuple[int, int]:
    """[start, end) of the lines a hunk rewrites in its old text; an insertion: the line it follows."""
    p = 0
    while p < min(len(h.old), len(h.new)) and h.old[p] == h.new[p]:
        p += 1
    s = 0
    while s < min(len(h.old), len(h.new)) - p and h.old[-1 - s] == h.new[-1 - s]:
        s += 1
    start, end = p, len(h.old) - s
    if start == end:  # a pure insertion: anchored on the line before it (or after, at the top)
        start, end = (start - 1, start) if start > 0 else (start, min(start + 1, len(h.old)))
    return start, end


def _holders(tree: ast.Module, first: int, last: int) -> list[tuple[str, ast.stmt, ast.stmt]]:
    """(qualified name, node, its module-level statement) of what holds lines first..last (1-based):
    the function (a method, or a module-level one) holding them all; else, walking down through
    classes, the statements they overlap at the deepest level that holds them all."""
    body: list[ast.stmt] = tree.body
    names: list[str] = []
    top: ast.stmt | None = None
    while True:
        node = next((n for n in body if n.lineno <= first and (n.end_lineno or n.lineno) >= last), None)
        if node is None:
            break
        top = top or node
        if not isinstance(node, ast.ClassDef):
            return [(".".join([*names, _label(node)]), node, top)]
        names.append(node.name)
        body = node.body
    overlap = [n for n in body if n.lineno <= last and (n.end_lineno or n.lineno) >= first]
    return [(".".join([*names, _label(n)]), n, top or n) for n in overlap]


def _label(node: ast.stmt) -> str:
    """A definition by its name; another statement by the names it binds, or its kind (no upstream
    text beyond names goes into the lock: the diffs' lines are the only upstream text we ship)."""
    if isinstance(node, _DEFS):
        return node.name
    return ",".join(_binds(node)) or f"<{type(node).__name__.lower()}>"


def _binds(node: ast.stmt) -> list[str]:
    if isinstance(node, _DEFS):
        return [node.name]
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
        node, (ast.AnnAssign, ast.AugAssign)) else []
    return [t.id for t in targets if isinstance(t, ast.Name)]


def _neighbours(files: Files, folders: set[str]) -> list[str]:
    return sorted(r for r in files.install.record if r.endswith(".py") and posixpath.dirname(r) in folders)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:12]


def _source_digest(node: ast.stmt, about: set[str] | None = None) -> str:
    """What a definition does with ``about`` (None: all of it), not how it is laid out: the syntax
    trees, without positions, of its simple statements and branch conditions that use one of
    those names. A comment, a reformatting, or a change to lines about other things upstream does
    not move the scope; a change to how the names we touch are computed or tested does."""
    if about is None or isinstance(node, ast.ClassDef) or not hasattr(node, "body"):
        return _digest(_canon(node))
    parts = []
    for n in ast.walk(node):
        if n is node:
            continue
        part = getattr(n, "test", None) if isinstance(n, (ast.If, ast.While)) else \
            n if isinstance(n, ast.stmt) and not hasattr(n, "body") else None
        if part is not None and _names_in(part) & about:
            parts.append(_canon(part))
    return _digest("\n".join(parts))


def _canon(node: object) -> str:
    """A syntax tree as text that every Python from 3.10 reads alike: node kinds and the fields that
    say something, without positions, contexts or empty fields. ``ast.dump`` is not: 3.12 and 3.13
    print other fields (on two engine files, 154 and 1,218 of 1,986 statements differ from 3.11's),
    and the lock, written by one Python, is read by whichever runs ``apply``."""
    if isinstance(node, ast.AST):
        fields = [f"{name}={_canon(value)}" for name, value in ast.iter_fields(node)
                  if value is not None and value != [] and name not in _VERSIONED_FIELDS]
        return f"{type(node).__name__}({','.join(fields)})"
    if isinstance(node, list):
        return "[" + ",".join(_canon(x) for x in node) + "]"
    return repr(node)


# Fields that say how a Python version represents code, not what the code does.
_VERSIONED_FIELDS = frozenset({"ctx", "type_comment", "kind", "type_params"})


def _code(line: str) -> str:
    """A line's code: its comment dropped (a '#' inside a string is rare in the lines we add)."""
    return line.split("#", 1)[0]


def _added(patches: tuple[hunks.FilePatch, ...]) -> list[str]:
    """The code of every line the variant's hunks add."""
    return [_code(ln) for fp in patches for h in fp.hunks for ln in h.new if ln not in h.old]


class _Reading:
    """What one variant's hunks say, gathered on one release's files (``signature`` builds it)."""

    def __init__(self) -> None:
        self.out: dict[str, set[str]] = {}
        self.names: set[str] = set()  # classes whose methods our hunks change: their readers beside ours
        self.exported: set[str] = set()  # module-level names our hunks change: their readers anywhere
        self.copies: set[str] = set()  # the lines our hunks rewrite: their copies
        self.folders: set[str] = set()

    def add(self, rel: str, token: str) -> None:
        self.out.setdefault(rel, set()).add(token)


def _touched(reading: _Reading, fp: hunks.FilePatch, lines: hunks.Text, text: str, used: set[str],
             package: Package) -> None:
    """The definitions the hunks sit in, and every definition of the same file that uses a name our
    added lines read, each by what it does with that name: what our lines depend on, as it is here.
    ``text``: the file as read, of which ``lines`` are the split."""
    tree, defs = package.parsed(fp.path, text)
    if tree is None:
        reading.add(fp.path, "does not parse")
        return
    lower = 0
    for h in fp.hunks:
        at = hunks.locate(lines, h.old, max(h.old_start - 1, 0), lower, h.old_ends_without_newline,
                          h.at_start, h.at_end)
        if at is None:
            reading.add(fp.path, "a hunk does not fit")
            continue
        lower = at
        start, end = _changed(h)
        # the lines we rewrite and the ones either side: the code we guard, as a copy elsewhere would read
        reading.copies |= {t.strip() for t in h.old[max(start - 1, 0):end + 1] if len(t.strip()) >= _COPY_MIN}
        for name, node, top in _holders(tree, at + start + 1, at + max(end, start + 1)):
            ours = (*h.old[start:end], *(ln for ln in h.new if ln not in h.old))  # what we rewrite and add
            about = {n for ln in ours for n in _IDENT.findall(_STRING.sub("", _code(ln)))}
            reading.add(fp.path, f"{name} is {_source_digest(node, about - _COMMON)}")
            bound = {n for n in _binds(top) if not n.startswith("__")}
            if node is top:  # a module-level name we change itself: read from anywhere it is imported
                reading.exported |= bound
            else:  # a class whose method we change: what beside it uses the class
                reading.names |= bound
    for name in sorted(used):
        users = [(q, d) for q, d, seen in defs if name in seen]
        for q, d in users:
            reading.add(fp.path, f"{q} uses {name} and is {_source_digest(d, {name})}")


_Def = ast.FunctionDef | ast.AsyncFunctionDef


def _names_in(node: ast.AST) -> set[str]:
    return {n.id if isinstance(n, ast.Name) else n.attr
            for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute))}


def _definitions(tree: ast.Module) -> list[tuple[ast.ClassDef | None, _Def]]:
    """Every module-level function and every method of a module-level class."""
    out: list[tuple[ast.ClassDef | None, _Def]] = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            out += [(node, d) for d in node.body if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef))]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append((None, node))
    return out


class Package:
    """A release's installed bytes as the rule reads them: each file read once while this object
    lives (one per release when many families are read on it, as scope_lock does); ``keep=False``
    reads through, for a one-off reading that should hold nothing."""

    def __init__(self, files: Files, keep: bool = True) -> None:
        self.files, self._keep = files, keep
        self._bytes: dict[str, bytes | None] = {}
        self._trees: dict[str, tuple[ast.Module | None, list[tuple[str, _Def, set[str]]]]] = {}

    def parsed(self, rel: str, text: str) -> tuple[ast.Module | None, list[tuple[str, _Def, set[str]]]]:
        """The file's syntax tree (None: it does not parse) and its definitions with the names each
        uses: the costly part of a reading, shared by the families that patch one file."""
        if rel not in self._trees:
            try:
                tree: ast.Module | None = ast.parse(text)
            except (SyntaxError, ValueError):
                tree = None
            defs = [(f"{c.name}.{d.name}" if c is not None else d.name, d, _names_in(d))
                    for c, d in _definitions(tree)] if tree is not None else []
            self._trees[rel] = (tree, defs)
        return self._trees[rel]

    def read(self, rel: str) -> bytes | None:
        if not self._keep:
            return self.files.install.read(rel)
        if rel not in self._bytes:
            self._bytes[rel] = self.files.install.read(rel)
        return self._bytes[rel]


def signature(family: Family, variant_id: str, files: Files, package: Package | None = None) -> Signature:
    """The variant's derived scope on these files ({file: tokens}); the variant's hunks must fit
    them as they are (pristine), as on every release it is declared on or fits."""
    return signature_of(family.patches[variant_id], files, package)


def signature_of(patches: tuple[hunks.FilePatch, ...], files: Files, package: Package | None = None) -> Signature:
    """``signature`` of a variant's parsed diffs (port: one not in the manifest yet)."""
    package = package or Package(files, keep=False)
    reading = _Reading()
    added = _added(patches)
    idents = {n for ln in added for n in _IDENT.findall(_STRING.sub("", ln))}
    switches = {n for n in idents if _SWITCH.fullmatch(n)}
    keys = {k for ln in added for k in _KEY.findall(ln)}
    for fp in patches:
        reading.folders.add(posixpath.dirname(fp.path))
        lines = files.lines(fp.path)
        if lines is None:
            reading.add(fp.path, "absent")
            continue
        text = files.text(fp.path) or ""  # as read (Files splits its lines from it): never joined back
        pristine = set(_IDENT.findall(text))
        _touched(reading, fp, lines, text, {n for n in idents & pristine if len(n) >= 6 and "_" in n.strip("_")},
                 package)
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(reading.names))) + r")\b") if reading.names else None
    holders: dict[str, set[str]] = {}
    for rel in _neighbours(files, reading.folders):
        data = package.read(rel)
        if data is None:
            continue
        text = decode(data)
        if pattern is not None and any(n in text for n in reading.names):  # the regex only where it can hit
            for n in set(pattern.findall(text)):
                reading.add(rel, f"names {n}")
        for key in keys:
            if f'"{key}"' in text or f"'{key}'" in text:
                reading.add(rel, f"reads {key!r}")
        for line in (c for c in reading.copies if c in text):  # a substring first, then a whole line
            if any(t.strip() == line for t in text.splitlines() if line in t):
                holders.setdefault(line, set()).add(rel)
    for line, rels in holders.items():
        if len(rels) <= _PATTERN_FILES:  # boilerplate (a loader loop every model has) is no pattern
            for rel in rels:
                reading.add(rel, f"holds {line!r}")
    if switches or reading.exported:
        _package_wide(reading, package, switches)
    return {rel: tuple(sorted(tokens)) for rel, tokens in sorted(reading.out.items()) if tokens}


def _package_wide(reading: _Reading, package: Package, switches: set[str]) -> None:
    """Every file of the package that reads a module-level name our hunks change, and every place
    that turns on a switch our added lines read, with the conditions it does so under (hashed): a
    new reader of the table we widen, a new auto-enable that can reach the gate we widen."""
    setter = re.compile(r"(?:\.|\[[\"'])(" + "|".join(map(re.escape, sorted(switches))) +
                        r")[\"']?\]?\s*=\s*True\b") if switches else None
    reader = re.compile(r"\b(" + "|".join(map(re.escape, sorted(reading.exported))) + r")\b") \
        if reading.exported else None
    wanted = [n.encode() for n in switches | reading.exported]
    relay: set[str] = set()  # the definitions that read them: what reads those is a reader too
    for rel in sorted(r for r in package.files.install.record if r.endswith(".py")):
        data = package.read(rel)
        if data is None or not any(w in data for w in wanted):
            continue
        text = decode(data)
        if reader is not None:
            named = set(reader.findall(text))
            for n in named:
                reading.add(rel, f"names {n}")
            relay |= _readers_of(text, named) - reading.exported
        if setter is None:
            continue
        lines = text.splitlines()
        for i, ln in enumerate(lines):
            m = setter.search(ln)
            if m:
                reading.add(rel, f"sets {m.group(1)} under {_digest(chr(10).join(guards(lines, i)))}")
    relay = {n for n in relay if len(n) >= _RELAY_MIN}
    if relay:  # one hop further: who calls the function that reads what we change
        pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(relay))) + r")\b")
        wanted = [n.encode() for n in relay]
        for rel in sorted(r for r in package.files.install.record if r.endswith(".py")):
            data = package.read(rel)
            if data is not None and any(w in data for w in wanted):
                for n in set(pattern.findall(decode(data))):
                    reading.add(rel, f"names {n}")


def _readers_of(text: str, names: set[str]) -> set[str]:
    """The functions and methods of a module whose body uses one of ``names``."""
    if not names:
        return set()
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return set()
    return {d.name for _, d in _definitions(tree) if _names_in(d) & names and not d.name.startswith("__")}


def guards(lines: list[str], i: int) -> tuple[str, ...]:
    """The if/elif conditions enclosing line ``i``, innermost first, up to its def."""
    out, indent = [], len(lines[i]) - len(lines[i].lstrip())
    for ln in reversed(lines[:i]):
        stripped, depth = ln.strip(), len(ln) - len(ln.lstrip())
        if not stripped or depth >= indent:
            continue
        indent = depth
        if stripped.startswith(("if ", "elif ")):
            out.append(stripped)
        if stripped.startswith(("def ", "class ")):
            break
    return tuple(out)


def _shown(tokens: tuple[str, ...]) -> str:
    return ", ".join(tokens[:3]) + (f" and {len(tokens) - 3} more" if len(tokens) > 3 else "")


def recorded(family: Family) -> dict[str, list[Signature]] | None:
    """The family's derived-scope.json, validated: {variant id: [signature, ...]}; None: none written."""
    path = Path(family.folder) / LOCK
    if not path.is_file():
        return None
    where = f"{family.id}: {LOCK}"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ManifestError(f"{where} cannot be read", found=str(exc)[:200],
                            hint="python -m patcher.maintainer.scope_lock rewrites it") from None
    ids = {v.id for v in family.variants}
    ok = isinstance(doc, dict) and set(doc) <= ids and all(
        isinstance(sigs, list) and all(
            isinstance(sig, dict) and all(isinstance(rel, str) and isinstance(toks, list) and
                                          all(isinstance(t, str) for t in toks) for rel, toks in sig.items())
            for sig in sigs) for sigs in doc.values())
    if not ok:
        raise ManifestError(f"{where} is not a derived-scope lock", wanted="{variant id: [{file: [token, ...]}]}",
                            found=str(doc)[:200], hint="python -m patcher.maintainer.scope_lock rewrites it")
    return {vid: [{rel: tuple(toks) for rel, toks in sig.items()} for sig in sigs] for vid, sigs in doc.items()}


def moved(family: Family, variant_id: str, files: Files,
          carried: tuple[hunks.FilePatch, ...] | None = None) -> list[str] | None:
    """How the variant's derived scope on these files differs from every release it was proven on
    (the nearest, as differences); None: it is one of them, or the family records none (a family
    outside patches/, e.g. a test's; tests/test_scope.py holds every shipped family to its lock).
    ``carried``: port's new variant, carried from ``variant_id`` to these files, read in its place."""
    lock = recorded(family)
    if lock is None:
        return None
    proven = lock.get(variant_id)
    if not proven:
        return [f"no release variant {variant_id} is declared on was read"]
    found = signature_of(carried, files) if carried is not None else signature(family, variant_id, files)
    if found in proven:
        return None
    return min((differences(want, found) for want in proven), key=len)


def differences(want: Signature, found: Signature) -> list[str]:
    said = [f"{rel} is new in scope ({_shown(found[rel])})" for rel in sorted(set(found) - set(want))]
    said += [f"{rel} left the scope" for rel in sorted(set(want) - set(found))]
    for rel in sorted(set(want) & set(found)):
        new, gone = set(found[rel]) - set(want[rel]), set(want[rel]) - set(found[rel])
        if new:
            said.append(f"{rel} now holds {', '.join(sorted(new))}")
        if gone:
            said.append(f"{rel} no longer holds {', '.join(sorted(gone))}")
    return said
