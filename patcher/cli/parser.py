"""The command line's argparse class, apart from ``main.py``: every subcommand's parser is one,
and the subcommand modules (``drafter_cli``, ``doctor_cli``) build theirs while ``main`` builds the
whole; with the class in ``main`` each of those calls went back up the import order (issue 45's walk).
"""

from __future__ import annotations

import argparse

from patcher.errors import PatcherError


class Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so a usage error is printed like every other
    error (and as JSON on stdout with --json). Subparsers inherit the class.

    No abbreviations ('--dry' for '--dry-run'): a Dockerfile that relies on one breaks the day a
    second flag shares the prefix."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # type: ignore[override]
        raise PatcherError(f"usage: {message}", hint="'patcher --help' lists the commands")
