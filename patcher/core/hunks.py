"""Pure hunk engine: parse our diffs, then apply, reverse and locate hunks on lines.

No I/O. A file is a ``Text``: line bodies and line endings kept apart, so CRLF files,
lone CR and a missing final newline survive byte for byte: hunks match on ``text`` only and new
lines take the line ending of the text they replace. Context must match exactly; the
only freedom is an offset (the same lines, shifted), searched nearest first, never
before the previous hunk. There is no fuzz, by design: a fuzzed hunk can land in the
wrong one of two similar tables (see vLLM's fusion size dicts).

Over 300 lines: parsing, matching, applying and reversing a hunk are one pure algorithm with one set
of line rules.
"""

from __future__ import annotations

import operator
import posixpath
from dataclasses import dataclass
from enum import Enum

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from patcher.errors import DiffError, HunkFailed


@dataclass(frozen=True)
class Text:
    """A file as parallel tuples: line bodies (what hunks match) and their endings."""

    texts: tuple[str, ...]
    eols: tuple[str, ...]  # "\n", "\r\n", "\r" or "" (last line without newline)

    def __len__(self) -> int:
        return len(self.texts)


def split(data: str) -> Text:
    if "\r" not in data:  # the common case, at C speed
        parts = data.split("\n")
        if parts[-1] == "":
            parts.pop()
            return Text(tuple(parts), ("\n",) * len(parts))
        return Text(tuple(parts), ("\n",) * (len(parts) - 1) + ("",))
    raw = data.splitlines(keepends=True)
    texts = tuple(r.rstrip("\r\n") for r in raw)
    return Text(texts, tuple(r[len(t):] for r, t in zip(raw, texts)))


def join(lines: Text) -> str:
    return "".join(t + e for t, e in zip(lines.texts, lines.eols))


@dataclass(frozen=True)
class Hunk:
    old_start: int  # 1-based, as in the @@ header
    old: tuple[str, ...]
    new: tuple[str, ...]
    old_ends_without_newline: bool = False
    new_ends_without_newline: bool = False
    # A hunk with less leading (trailing) context than the diff's context width sits at
    # the start (end) of the file; GNU patch holds it there too, so it may not drift.
    at_start: bool = False
    at_end: bool = False

    def reversed(self) -> Hunk:
        return Hunk(self.old_start, self.new, self.old, self.new_ends_without_newline,
                    self.old_ends_without_newline, self.at_start, self.at_end)


@dataclass(frozen=True)
class FilePatch:
    path: str  # relative to site-packages, posix
    hunks: tuple[Hunk, ...]


def _safe_path(name: str, origin: str) -> str:
    if "\\" in name or name.startswith("/") or posixpath.isabs(name):
        raise DiffError(f"{origin}: unsafe target path {name!r}",
                        wanted="a path relative to site-packages", found=name)
    norm = posixpath.normpath(name)
    if norm.startswith("..") or norm != name or not name:
        raise DiffError(f"{origin}: unsafe target path {name!r}",
                        wanted="a normalised path inside site-packages", found=name)
    return name


def _context(h, trailing: bool) -> int:
    body = [ln.line_type for ln in h if ln.line_type != "\\"]
    n = 0
    for t in reversed(body) if trailing else body:
        if t != " ":
            break
        n += 1
    return n


def parse(diff: str, origin: str) -> tuple[FilePatch, ...]:
    """Parse one of our diffs strictly. ``origin`` names it in errors."""
    if "\r" in diff:
        raise DiffError(f"{origin}: carriage returns in the diff",
                        wanted="LF line endings, as released", found="CR or CRLF",
                        hint="line endings were converted (git autocrlf?); restore the file from the release")
    try:
        patchset = PatchSet(diff)
    except UnidiffParseError as exc:
        raise DiffError(f"{origin}: malformed diff: {exc}") from None
    if not len(patchset):
        raise DiffError(f"{origin}: no file in the diff", wanted="at least one '--- a/' '+++ b/' section")
    files = []
    seen = set()
    for pf in patchset:
        if pf.is_binary_file or pf.is_added_file or pf.is_removed_file:
            kind = "binary" if pf.is_binary_file else "added" if pf.is_added_file else "removed"
            raise DiffError(f"{origin}: {kind} file {pf.path!r}",
                            wanted="edits of existing text files only", found=f"a {kind} file")
        src, dst = pf.source_file, pf.target_file
        if not (src.startswith("a/") and dst.startswith("b/") and src[2:] == dst[2:]):
            raise DiffError(f"{origin}: source and target differ", wanted="'a/<path>' and 'b/<path>'",
                            found=f"{src!r} and {dst!r}")
        path = _safe_path(src[2:], origin)
        if path in seen:
            raise DiffError(f"{origin}: {path} appears twice", hint="merge its hunks into one section")
        seen.add(path)
        hunks = []
        width = max((max(_context(h, False), _context(h, True)) for h in pf), default=0)
        for h in pf:
            old, new = [], []
            old_nonl = new_nonl = False
            prev = None
            for ln in h:
                t = ln.line_type
                if t == "\\":
                    if prev in (" ", "-"):
                        old_nonl = True
                    if prev in (" ", "+"):
                        new_nonl = True
                    continue
                if t not in (" ", "-", "+"):
                    raise DiffError(f"{origin}: bad line in hunk of {path}: {ln.value!r}")
                body = ln.value.removesuffix("\n")
                if t in (" ", "-"):
                    old.append(body)
                if t in (" ", "+"):
                    new.append(body)
                prev = t
            if len(old) != h.source_length or len(new) != h.target_length:
                raise DiffError(f"{origin}: hunk counts disagree in {path}",
                                wanted=f"-{h.source_length} +{h.target_length} lines",
                                found=f"-{len(old)} +{len(new)} lines")
            hunks.append(Hunk(h.source_start, tuple(old), tuple(new), old_nonl, new_nonl,
                              _context(h, False) < width, _context(h, True) < width))
        files.append(FilePatch(path, tuple(hunks)))
    if str(patchset).count("\n") != diff.count("\n"):
        # unidiff silently drops lines after a complete hunk; a truncated or
        # miscounted diff must not pass as a shorter valid one.
        raise DiffError(f"{origin}: lines outside the hunks", hint="a hunk's line counts do not match its body")
    return tuple(files)


def _matches(lines: Text, at: int, want: tuple[str, ...], ends_without_newline: bool) -> bool:
    n = len(want)
    if at < 0 or at + n > len(lines) or lines.texts[at:at + n] != want:
        return False
    if n:
        last_is_eof = at + n == len(lines)
        last_has_nl = lines.eols[at + n - 1] != ""
        if ends_without_newline and not (last_is_eof and not last_has_nl):
            return False
        if not ends_without_newline and last_is_eof and not last_has_nl:
            return False
    return True


def locate(lines: Text, want: tuple[str, ...], expected: int, lower: int,
           ends_without_newline: bool = False, at_start: bool = False, at_end: bool = False) -> int | None:
    """Index where ``want`` sits: at ``expected``, else at the nearest offset >= ``lower``
    (the earlier of two equally near places first, as GNU patch does)."""
    limit = len(lines) - len(want)
    if at_start or at_end:
        at = 0 if at_start else limit
        if (not at_end or at == limit) and at >= lower and _matches(lines, at, want, ends_without_newline):
            return at
        return None
    if not want:
        return expected if lower <= expected <= len(lines) else None
    if _matches(lines, expected, want, ends_without_newline) and expected >= lower:
        return expected
    # Candidates are the places where the first line occurs (found at C speed), nearest first.
    texts, first, found, i = lines.texts, want[0], [], max(lower, 0)
    while i <= limit:
        try:
            i = texts.index(first, i, limit + 1)
        except ValueError:
            break
        found.append(i)
        i += 1
    for at in sorted(found, key=lambda a: (abs(a - expected), a > expected)):
        if _matches(lines, at, want, ends_without_newline):
            return at
    return None


def _differing_line(old: tuple[str, ...], texts: list[str], expected: int) -> tuple[int, int, int]:
    """Where the hunk's text best lines up with the file near ``expected`` (most equal
    lines, then nearest): (matching lines, first differing hunk line, where it starts), 0-based."""
    best = (-1, 0, 0, expected)
    for at in range(max(expected - 200, 0), max(min(expected + 200, len(texts) - len(old) + 1), 1)):
        # zip stops at the file's end: the equal lines of the hunk and the file from ``at``
        same = sum(map(operator.eq, old, texts[at:at + len(old)]))
        key = (same, -abs(at - expected))
        if key > best[:2]:
            diff = next((k for k, t in enumerate(old) if at + k >= len(texts) or texts[at + k] != t), 0)
            best = (same, -abs(at - expected), diff, at)
    same, _, diff, at = best
    return max(same, 0), diff, at


def _shown(a: str, b: str) -> tuple[str, str]:
    """Both texts, trimmed when the difference is visible, repr() in full when only spacing differs."""
    if a.split() == b.split():
        return repr(a), repr(b)
    return repr(a.strip()), repr(b.strip())


def _failure(index: int, total: int, expected: int, old: tuple[str, ...], texts: list[str],
             side: str) -> HunkFailed:
    same, k, at = _differing_line(old, texts, expected)
    line = at + k
    if not old:
        exc = HunkFailed(index, total, expected + 1, "an insertion point inside the file", "<end of file>")
    elif same == len(old):  # every line is there, but not where the diff may use it
        exc = HunkFailed(index, total, expected + 1, "its text after the previous hunk, its last line's newline "
                         "as in the diff", f"the text at file line {at + 1}, where it cannot apply")
    else:
        want, got = _shown(old[k], texts[line]) if line < len(texts) else (repr(old[k].strip()), "<end of file>")
        exc = HunkFailed(index, total, expected + 1, f"{want} (line {k + 1} of the hunk's {side} text)",
                         f"{got} (file line {line + 1})")
    exc.matched = same  # state() reports the direction that came closest
    return exc


def _eol_for(eols: list[str], at: int) -> str:
    """Line ending of new lines: the one of the text they replace, else the nearest one."""
    for e in eols[at:]:
        if e:
            return e
    for e in reversed(eols[:at]):
        if e:
            return e
    return "\n"


def apply(lines: Text, hunks: tuple[Hunk, ...], *, reverse: bool = False) -> Text:
    """Apply all hunks (or undo them) or raise HunkFailed for the first that does not fit."""
    return _apply(lines, hunks, reverse)[0]


def _apply(lines: Text, hunks: tuple[Hunk, ...], reverse: bool) -> tuple[Text, int]:
    texts, eols = list(lines.texts), list(lines.eols)
    moved = 0  # total offset used, to break ties between forward and reverse
    shift = 0  # lines added so far, so later hunks are expected where the diff says
    lower = 0
    for i, hunk in enumerate(hunks, 1):
        h = hunk.reversed() if reverse else hunk
        expected = max(h.old_start - 1, 0) + shift if h.old else h.old_start + shift
        current = Text(tuple(texts), tuple(eols))
        at = locate(current, h.old, expected, lower, h.old_ends_without_newline, h.at_start, h.at_end)
        if at is None:
            raise _failure(i, len(hunks), expected, h.old, texts, 'new' if reverse else 'old')
        eol = _eol_for(eols, at)
        new_eols = [eol] * len(h.new)
        if new_eols and h.new_ends_without_newline:
            new_eols[-1] = ""
        texts[at:at + len(h.old)] = h.new
        eols[at:at + len(h.old)] = new_eols
        moved += abs(at - expected)
        shift += len(h.new) - len(h.old) + (at - expected)
        lower = at + len(h.new)
    return Text(tuple(texts), tuple(eols)), moved


class FileState(str, Enum):
    PRISTINE = "pristine"
    APPLIED = "applied"
    NEITHER = "neither"


def state(lines: Text, hunks: tuple[Hunk, ...]) -> tuple[FileState, HunkFailed | None]:
    """Whether the file holds the pre-image, the post-image, or neither (with the first failure).

    When both directions fit (an insertion whose context also occurs elsewhere), the
    direction that needed the smaller offsets wins; on a tie "applied" wins, because
    applying twice is the failure patch tools are known for and undoing is checked
    against RECORD anyway.
    """
    forward: Text | None = None
    first: HunkFailed | None = None
    f_moved = r_moved = 0
    try:
        forward, f_moved = _apply(lines, hunks, False)
        if _apply(forward, hunks, True)[0] != lines:
            forward = None
    except HunkFailed as exc:
        forward, first = None, exc
    try:
        _, r_moved = _apply(lines, hunks, True)
        backward = True
    except HunkFailed as exc:
        backward = False
        # A file we patched and someone then edited fails backwards closer than forwards:
        # report the line that was edited, not the first pre-image line that is absent.
        if first is not None and exc.matched > first.matched:
            first = exc
    if forward is not None and (not backward or f_moved < r_moved):
        return FileState.PRISTINE, None
    if backward:
        return FileState.APPLIED, None
    return FileState.NEITHER, first or HunkFailed(1, len(hunks), 1, "a round trip", "an ambiguous file")
