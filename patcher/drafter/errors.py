"""Errors of the drafter commands.

They subclass the project's ``PatcherError`` so that one printer (``lines()``) and one
exit-code convention serve every command: exit 2 means the input could not be read as
a drafter at all (corrupt file, missing config, bad flag), which is different from
"read fine, and something in it is wrong" (a finding, exit 1).
"""

from __future__ import annotations

from patcher.errors import PatcherError


class DrafterInputError(PatcherError):
    """A drafter/target folder, file or flag we cannot read. Exit 2, nothing written."""


class FixFailed(PatcherError):
    """``fix`` could not produce a faithful copy (bytes differ, unconvertible layout).

    Exit 1: the input was readable, but the conversion would not be trustworthy, so the
    final ``--out`` name was never created.
    """

    exit_code = 1
