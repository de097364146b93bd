"""Three-way merge of one engine file: our variant, carried from the release it was written
for to a newer one.

base = the pristine file of the release the variant was written for, ours = base with the
variant, theirs = the new release's pristine file. The merge itself is ``merge3`` (the
maintained Python port of bzr's merge); this module only decides what merge3 leaves as a
conflict, and only in three shapes whose every outcome the port's proofs re-check:

* both sides inserted at the same place (upstream added a capability-107 table entry exactly
  where our variant adds 120): upstream's insertion first, then ours, joined by the separator
  both insertions start with (``,`` and the indent in a list);
* one side only re-spaced code the other edited (we wrapped a condition over several lines,
  upstream renamed a call in it): the edit wins, inside brackets only (never an indentation);
* the same line edited by both: merged again on tokens with the two rules above.

Everything else is a conflict for a person, reported with base / ours / theirs.

Then upstream's renames are carried into our added lines: where a line upstream edited held a
fragment that is gone from the new file (``global_server_args_dict["x"]`` became
``get_global_server_args().x``), our lines that copied the old fragment follow.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

import merge3

_TOKEN = re.compile(r"\n[ \t]*|[ \t]+|\w+|[^\w\s]")
_IDENT = re.compile(r"\w")
_SEPARATOR = re.compile(r"\s+|[,;]")
_OPEN, _CLOSE = ("(", "[", "{"), (")", "]", "}")


@dataclass
class Conflict:
    line: int  # 1-based line in the base file
    base: list[str]
    ours: list[str]
    theirs: list[str]


@dataclass
class FileMerge:
    path: str
    text: str | None  # None when a conflict is left
    conflicts: list[Conflict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # every decision beyond merge3's own


def _common(a: list[str], b: list[str]) -> tuple[int, int]:
    """Lengths of the common prefix and of the common suffix (not overlapping it)."""
    n = min(len(a), len(b))
    p = 0
    while p < n and a[p] == b[p]:
        p += 1
    s = 0
    while s < n - p and a[-1 - s] == b[-1 - s]:
        s += 1
    return p, s


def _both_inserted(ours: list[str], theirs: list[str], tokens: bool) -> list[str]:
    """Upstream's insertion, then ours; an insertion the other already holds is not repeated.

    Lines are whole items (a dict entry, a statement): they are simply concatenated. Tokens
    sit inside one construct: what both insertions open with (", " and the indent in a list,
    an opening bracket) is kept once, the separator in it is repeated between the two, and
    what both close with (a bracket, a trailing comma) is kept once at the end."""
    p, s = _common(ours, theirs)
    if p + s >= len(theirs):  # upstream's insertion is a prefix+suffix of ours: ours holds it
        return ours
    if p + s >= len(ours):
        return theirs
    if not tokens:
        return theirs + ours
    p = next((i for i, t in enumerate(ours[:p]) if not (_SEPARATOR.fullmatch(t) or t in _OPEN)), p)
    tail = reversed(ours[len(ours) - s:])
    s = next((i for i, t in enumerate(tail) if not (_SEPARATOR.fullmatch(t) or t in _CLOSE)), s)
    opened = ours[:p]
    sep = opened[max((i + 1 for i, t in enumerate(opened) if t in _OPEN), default=0):]
    return opened + theirs[p:len(theirs) - s] + sep + ours[p:]


def _solid(tokens: list[str]) -> list[str]:
    return [t for t in tokens if not t.isspace()]


def _respaced_only(side: list[str], base: list[str]) -> bool:
    """``side`` changed only spacing inside a line (never an indentation) relative to ``base``."""
    if _solid(side) != _solid(base):
        return False
    indents = [t for t in base if t.startswith("\n")]
    it = iter(side)
    return all(any(t == x for x in it) for t in indents)


def _resolve_tokens(base: list[str], ours: list[str], theirs: list[str]) -> list[str] | None:
    if not base:
        return _both_inserted(ours, theirs, tokens=True)
    if _respaced_only(ours, base):
        return theirs
    if _respaced_only(theirs, base):
        return ours
    return None


def _merge_tokens(base: str, ours: str, theirs: str) -> str | None:
    # A leading newline makes the first line's indentation a "\n..." token like every other.
    base, ours, theirs = "\n" + base, "\n" + ours, "\n" + theirs
    b, o, t = _TOKEN.findall(base), _TOKEN.findall(ours), _TOKEN.findall(theirs)
    if "".join(b) != base or "".join(o) != ours or "".join(t) != theirs:
        return None  # characters the tokenizer does not cover (a carriage return): a person decides
    out: list[str] = []
    for region in merge3.Merge3(b, o, t).merge_regions():
        kind = region[0]
        if kind == "unchanged":
            out += b[region[1]:region[2]]
        elif kind in ("a", "same"):
            out += o[region[1]:region[2]]
        elif kind == "b":
            out += t[region[1]:region[2]]
        else:
            _, zs, ze, os_, oe, ts, te = region  # type: ignore[misc]  # merge3 types regions as 3-tuples
            done = _resolve_tokens(b[zs:ze], o[os_:oe], t[ts:te])
            if done is None:
                return None
            out += done
    merged = "".join(out)
    return merged[1:] if merged.startswith("\n") else None


def _resolve(base: list[str], ours: list[str], theirs: list[str]) -> tuple[list[str] | None, str]:
    if not base:
        return _both_inserted(ours, theirs, tokens=False), "both inserted here: upstream's lines first, then ours"
    merged = _merge_tokens("".join(base), "".join(ours), "".join(theirs))
    if merged is None:
        return None, ""
    return merged.splitlines(keepends=True), "both edited these lines: merged word by word"


def merge_file(path: str, base: str, ours: str, theirs: str) -> FileMerge:
    bl, ol, tl = (x.splitlines(keepends=True) for x in (base, ours, theirs))
    result = FileMerge(path, None)
    out: list[str] = []
    mine: list[tuple[int, int]] = []  # spans of ``out`` that carry our lines
    for region in merge3.Merge3(bl, ol, tl).merge_regions():
        kind = region[0]
        if kind == "unchanged":
            out += bl[region[1]:region[2]]
        elif kind == "same":
            out += ol[region[1]:region[2]]
        elif kind == "b":
            out += tl[region[1]:region[2]]
        elif kind == "a":
            mine.append((len(out), len(out) + region[2] - region[1]))
            out += ol[region[1]:region[2]]
        else:
            _, zs, ze, os_, oe, ts, te = region  # type: ignore[misc]  # merge3 types regions as 3-tuples
            lines, how = _resolve(bl[zs:ze], ol[os_:oe], tl[ts:te])
            if lines is None:
                result.conflicts.append(Conflict(zs + 1, bl[zs:ze], ol[os_:oe], tl[ts:te]))
                continue
            result.notes.append(f"{path}:{zs + 1}: {how}")
            mine.append((len(out), len(out) + len(lines)))
            out += lines
    if result.conflicts:
        return result
    for old, new in renames(bl, tl):
        for start, end in mine:
            for i in range(start, end):
                if old in out[i]:
                    out[i] = out[i].replace(old, new)
                    result.notes.append(f"{path}: our line carries upstream's edit {old!r} -> {new!r}")
    result.text = "".join(out)
    return result


def _widen(line: str, start: int, end: int) -> tuple[int, int]:
    """Grow [start, end) to whole identifiers, so 'g' + 'lobal_x' becomes 'global_x'."""
    while start > 0 and _IDENT.match(line[start - 1]) and (start == len(line) or _IDENT.match(line[start])):
        start -= 1
    while end < len(line) and _IDENT.match(line[end]) and end > 0 and _IDENT.match(line[end - 1]):
        end += 1
    return start, end


def renames(base: list[str], theirs: list[str]) -> list[tuple[str, str]]:
    """Fragments upstream replaced in a line and removed from the whole file, old -> new."""
    out: dict[str, str] = {}
    whole = "".join(theirs)
    sm = difflib.SequenceMatcher(None, base, theirs, autojunk=False)
    for op, b0, b1, t0, t1 in sm.get_opcodes():
        if op != "replace":
            continue
        for b_line in base[b0:b1]:
            t_line = max(theirs[t0:t1], key=lambda t: difflib.SequenceMatcher(None, b_line, t).ratio())
            if difflib.SequenceMatcher(None, b_line, t_line).ratio() < 0.6:
                continue
            p, s = _common(list(b_line), list(t_line))
            b_lo, b_hi = _widen(b_line, p, len(b_line) - s)
            # the prefix and suffix are common, so both lines widen by the same characters
            t_lo, t_hi = b_lo, len(t_line) - (len(b_line) - b_hi)
            old, new = b_line[b_lo:b_hi].strip(), t_line[t_lo:t_hi].strip()
            if len(old) >= 8 and _IDENT.search(old) and old != new and old not in whole and old not in out:
                out[old] = new
    return list(out.items())
