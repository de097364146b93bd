"""``patcher port``: upstream code a carried variant does not cover, found by five narrow signs.

A merge carries our hunks to where their text went; it cannot know that upstream grew new
code needing the same fix. Two signs, each measured on our own history (both fire on the
transitions that needed a new hunk or file and on none of the others, see
benchmarks/port_history.py), turn a proven candidate into one for a person:

* a new copy of a line we replace: every name in a line our variant rewrites (the SM90/SM100
  gate) appears together in a line upstream added to a patched file (outside our hunks) or to
  a module beside it that a patched file imports (SGLang 0.5.14's backend resolver);
* a new file that builds a class our variant edits without subclassing it: a wrapper that
  holds the patched class and does not inherit what we changed (vLLM 0.15.0's Kimi-K2.5 model
  holds a bare DeepseekV2Model);
* for a variant that admits new hardware (its lines compare a device capability): a new
  ``raise`` in a patched file or a module beside it that it imports. Upstream never ran that
  code on the hardware we admit, so a new failure path there is where it breaks (SGLang
  0.5.11's multicast preflight). For other variants new raises are everyday code (measured:
  they would flag three pairs that port carries byte for byte);
* a feature switch our added lines read, turned on by upstream under new conditions: an
  auto-enable that can reach the gate we widen (opt-in must stay opt-in; SGLang 0.5.4.post2);
* a new module beside a patched one, sharing a distinctive part of its name, that defines a
  function the variant edits (SGLang 0.5.12's MLA drafter beside the Llama drafter).
The last two were added when this session's new variants (the narrowed auto-enables, the
loud MLA drafter) made two leave-one-out pairs "wrong"; they flag one more pair than needed.
Two more came from leave-one-out at every release where an entry begins (issue 41):
* a hunk whose added code the new release already holds: upstream took the fix (SGLang 0.5.10's
  Kimi-K2.5 wrapper), and a carried copy would sit beside upstream's;
* upstream inserted lines inside a hunk, where ours adds its own (vLLM 0.19.0's SM103 row in
  the size table our SM120 row is derived from).
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path

from patcher.core import derived_scope, hunks

_KEYWORDS = {"if", "not", "and", "or", "in", "is", "None", "True", "False", "return", "def", "class", "self",
             "for", "else", "elif", "import", "from", "as", "with", "lambda", "pass", "raise"}
_STRING = re.compile(r"'[^']*'|\"[^\"]*\"")
_NAME = re.compile(r"[A-Za-z_]\w*")


def _names(line: str) -> set[str]:
    """Names in a line of code, strings and comments dropped; `_x` and `x` are one name."""
    return {n.lstrip("_") for n in _NAME.findall(_STRING.sub("", line.split("#")[0]))} - _KEYWORDS


def _imported_siblings(path: str, text: str) -> set[str]:
    """Modules beside ``path`` that it imports with ``from pkg.module import``."""
    package = path.rsplit("/", 1)[0].replace("/", ".")
    return {m.replace(".", "/") + ".py" for m in re.findall(r"^\s*from ([\w.]+) import", text, re.M)
            if m.rsplit(".", 1)[0] == package}


def _read(path: Path) -> list[str]:
    return path.read_text(errors="replace").splitlines() if path.is_file() else []


def copies(patches: tuple[hunks.FilePatch, ...], base: Path, new: Path, candidate: tuple[hunks.FilePatch, ...]
           ) -> list[str]:
    rewritten = [names for fp in patches for h in fp.hunks for ln in h.old if ln not in h.new
                 if len(names := _names(ln)) >= 2]
    if not rewritten:
        return []
    ours = {fp.path: [(h.old_start - 1, h.old_start - 1 + len(h.old)) for h in fp.hunks] for fp in candidate}
    where = _neighbourhood(candidate, new)
    out = []
    for rel in sorted(where):
        old = set(_read(base / rel))
        for i, line in enumerate(_read(new / rel)):
            if line in old or any(a <= i < b for a, b in ours.get(rel, ())):
                continue
            if any(names <= _names(line) for names in rewritten):
                out.append(f"{rel}:{i + 1}: upstream added a line like one this variant rewrites, outside its "
                           f"hunks: {line.strip()[:100]}")
    return out


def _neighbourhood(patches: tuple[hunks.FilePatch, ...], new: Path) -> set[str]:
    where = {fp.path for fp in patches}
    for rel in list(where):
        where |= _imported_siblings(rel, "\n".join(_read(new / rel)))
    return where


def new_failures(patches: tuple[hunks.FilePatch, ...], base: Path, new: Path) -> list[str]:
    added = [ln for fp in patches for h in fp.hunks for ln in h.new if ln not in h.old]
    if not any("capability" in ln.split("#")[0] for ln in added):
        return []
    out = []
    for rel in sorted(_neighbourhood(patches, new)):
        old = {ln.strip() for ln in _read(base / rel)}
        lines = _read(new / rel)
        for i, line in enumerate(lines):
            if re.match(r"\s*raise \w", line) and line.strip() not in old:
                where = next((m.group(1) for ln in reversed(lines[:i]) if (m := re.match(r"\s*def (\w+)", ln))), "?")
                said = " ".join(ln.strip() for ln in lines[i:i + 3])[:140]
                out.append(f"{rel}:{i + 1}: upstream added a failure path on the code this variant opens to new "
                           f"hardware, in {where}(): {said}")
    return out


def _edited_classes(patches: tuple[hunks.FilePatch, ...], base: Path) -> set[str]:
    """Top-level classes that hold one of our hunks in the base file."""
    out = set()
    for fp in patches:
        lines = _read(base / fp.path)
        for h in fp.hunks:
            for ln in reversed(lines[:h.old_start - 1 + len(h.old)]):
                if ln[:1].isalpha() or ln.startswith("_"):  # the top-level statement that holds the hunk
                    m = re.match(r"class (\w+)", ln)
                    if m:
                        out.add(m.group(1))
                    break
    return out


def wrappers(patches: tuple[hunks.FilePatch, ...], base: Path, new: Path, engine: str) -> list[str]:
    classes = _edited_classes(patches, base)
    if not classes:
        return []
    out = []
    for path in sorted((new / engine).rglob("*.py")):
        rel = path.relative_to(new)
        if (base / rel).exists():
            continue
        text = path.read_text(errors="replace")
        for c in sorted(classes):
            if re.search(rf"(?<![\w.]){c}\(", text) and not re.search(rf"^class \w+\([^)]*\b{c}\b", text, re.M):
                out.append(f"{rel.as_posix()}: a new upstream file builds {c} (a class this variant edits) "
                           "without subclassing it; it may need the variant's change too")
    return out


_SWITCH = re.compile(r"\b(?:enable|disable|use)_\w+")


def switch_setters(patches: tuple[hunks.FilePatch, ...], base: Path, new: Path, engine: str) -> list[str]:
    """A feature switch our added lines read (``enable_*``/``disable_*``/``use_*``) that upstream
    now turns on under conditions the base release did not have: an auto-enable that can reach the
    gate we widen, and opt-in must stay opt-in (SGLang 0.5.4.post2's GPT-OSS auto-enable under
    ``is_blackwell_supported()``, which admits SM 12.x)."""
    added = {n for fp in patches for h in fp.hunks for ln in h.new if ln not in h.old
             for n in _SWITCH.findall(_STRING.sub("", ln.split("#")[0]))}
    out = []
    for name in sorted(added):
        setter = re.compile(rf"(?:\.{name}|\[[\"']{name}[\"']\])\s*=\s*True\b")

        def sites(root: Path, setter: re.Pattern[str] = setter) -> dict[tuple[str, tuple[str, ...]], str]:
            found = {}
            for path in sorted((root / engine).rglob("*.py")):
                text = path.read_text(errors="replace")
                if not setter.search(text):
                    continue
                lines = text.splitlines()
                for i, ln in enumerate(lines):
                    if setter.search(ln):
                        found[(path.relative_to(root).as_posix(), derived_scope.guards(lines, i))] = f"{i + 1}"
            return found

        before = sites(base)
        for (rel, guards), line in sorted(sites(new).items()):
            if (rel, guards) not in before:
                said = " / ".join(guards)[:140] or "unconditionally"
                out.append(f"{rel}:{line}: upstream turns on {name}, which this variant's lines read, under "
                           f"conditions the base release did not have ({said}): check that it cannot reach our gate")
    return out


def sibling_modules(patches: tuple[hunks.FilePatch, ...], base: Path, new: Path) -> list[str]:
    """A new module beside a patched one, sharing a distinctive part of its name, that defines a
    function our variant edits: the same fix may be needed there (SGLang 0.5.12's MLA drafter
    ``kimi_k25_eagle3.py`` beside ``llama_eagle3.py``, each with its own ``load_weights``)."""
    out = []
    for fp in patches:
        lines = _read(base / fp.path)
        edited = set()
        for h in fp.hunks:
            m = next((m for ln in reversed(lines[:h.old_start - 1 + len(h.old)])
                      if (m := re.match(r"\s*def (\w+)", ln))), None)
            if m:
                edited.add(m.group(1))
        folder, stem = fp.path.rsplit("/", 1)
        tokens = {t for t in stem.removesuffix(".py").split("_") if len(t) >= 4}
        for path in sorted((new / folder).glob("*.py")):
            rel = f"{folder}/{path.name}"
            if (base / rel).exists() or not tokens & set(path.stem.split("_")):
                continue
            defined = set(re.findall(r"^\s*def (\w+)", path.read_text(errors="replace"), re.M))
            for fn in sorted(edited & defined):
                out.append(f"{rel}: a new upstream module beside {fp.path} defines {fn}(), which this variant "
                           "edits there; it may need the same change")
    return out


def _code(lines) -> list[str]:
    """Lines of code as compared: stripped, without blank lines and comments."""
    return [s for ln in lines if (s := ln.strip()) and not s.startswith("#")]


def already_upstream(patches: tuple[hunks.FilePatch, ...], new: Path) -> list[str]:
    """A hunk whose added code the new release already holds (most of it, in its own place):
    upstream took the fix, and carrying ours would write a second copy beside upstream's (SGLang
    0.5.10's Kimi-K2.5 wrapper gained the EAGLE-3 hooks our k25-aux-capture adds)."""
    out = []
    for fp in patches:
        theirs = set(_code(_read(new / fp.path)))
        for h in fp.hunks:
            added = [ln for ln in _code(h.new) if ln not in set(_code(h.old))]
            held = [ln for ln in added if ln in theirs]
            if len(added) >= 3 and len(held) * 5 >= len(added) * 3:
                out.append(f"{fp.path}: upstream already holds {len(held)} of the {len(added)} lines hunk at "
                           f"line {h.old_start} adds (e.g. {held[0][:80]}): carrying it would duplicate "
                           "upstream's code")
    return out


def inserted_inside(patches: tuple[hunks.FilePatch, ...], base: Path, new: Path) -> list[str]:
    """Upstream inserted lines where one of our hunks adds its own (between its context lines):
    the merge puts the two side by side in some order, but what ours says may depend on what
    upstream added (vLLM 0.19.0 added an SM103 row to the fusion size table our SM120 row is
    derived from)."""
    out = []
    for fp in patches:
        old, now = _read(base / fp.path), _read(new / fp.path)
        changes = [(i1, i2) for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, old, now, autojunk=False)
                   .get_opcodes() if tag in ("insert", "replace")]
        for h in fp.hunks:
            start, end = h.old_start - 1, h.old_start - 1 + len(h.old)
            lead = next((i for i, ln in enumerate(h.old) if ln not in h.new), None)
            first = start + (lead if lead is not None else len(h.old) // 2)
            # inside the hunk, past its leading context: where our lines go
            if any(start < i1 < end and i1 >= first - 1 and i2 - i1 <= 40 for i1, i2 in changes):
                out.append(f"{fp.path}: upstream inserted lines inside the hunk at line {h.old_start}, where ours "
                           "adds its own: a person decides how the two read together")
    return out
