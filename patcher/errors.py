"""The errors patcher raises. Each carries what failed, wanted/found and one hint.

The CLI's ``_error`` is the only place that prints them; everything below the CLI
raises and never prints.
"""

from __future__ import annotations


class PatcherError(Exception):
    """Base: a failure a person can act on. Exit code 2 unless a subclass says otherwise."""

    exit_code = 2

    def __init__(self, what: str, *, wanted: str = "", found: str = "", hint: str = "") -> None:
        super().__init__(what)
        self.what = what
        self.wanted = wanted
        self.found = found
        self.hint = hint

    def lines(self) -> list[str]:
        out = [f"error: {self.what}"]
        for label, text in (("wanted", self.wanted), ("found", self.found), ("hint", self.hint)):
            if text:
                out.append(f"  {label + ':':8}{text}")
        return out


class DiffError(PatcherError):
    """A diff file of ours is malformed, unsafe (path outside the engine) or altered."""


class ManifestError(PatcherError):
    """A patch.toml is invalid; the message quotes the field."""


class EngineError(PatcherError):
    """The engine is not installed, installed twice, editable, or unreadable."""


class NotInstalled(EngineError):
    """The engine has no distribution in the target environment."""


class HunkFailed(PatcherError):
    """A hunk's context is not in the file at its place or any offset (we never fuzz)."""

    exit_code = 1
    matched = 0  # hunk lines equal to the file where it lines up best: state() reports the closer direction

    def __init__(self, index: int, total: int, line: int, wanted: str, found: str) -> None:
        super().__init__(f"hunk {index}/{total} does not apply (line {line})", wanted=wanted, found=found)
        self.index = index
        self.line = line


class WriteError(PatcherError):
    """Writing the engine's files failed; everything was rolled back."""


class LockBusy(PatcherError):
    """Another patcher run holds the lock on this install."""


class SelectionError(PatcherError):
    """--engine / --only / --skip contradict each other or name nothing."""


class LaunchUsageError(PatcherError):
    """The command after ``--`` is missing or is not a launch of an engine patcher knows: exit 2."""


class DrafterInputError(PatcherError):
    """A drafter/target folder, file or flag we cannot read: the input could not be read as a drafter
    at all (corrupt file, missing config, bad flag), unlike "read fine, and something in it is
    wrong" (a finding, exit 1). Exit 2, nothing written."""


class FixFailed(PatcherError):
    """``drafter fix`` could not produce a faithful copy (bytes differ, unconvertible layout).

    Exit 1: the input was readable, but the conversion would not be trustworthy, so the final
    ``--out`` name was never created.
    """

    exit_code = 1
