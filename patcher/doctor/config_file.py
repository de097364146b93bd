"""A config file the release does not merge: ``--config=FILE``, or an abbreviation of ``--config``.

Both engines merge a config file into the line before their parser runs, and both look only for the
exact word ``--config`` followed by the file (vLLM's ``FlexibleArgumentParser.parse_args``, SGLang's
``prepare_server_args``). Their parser then takes any other spelling its ``argparse`` accepts (the
one-word ``--config=FILE``, an unambiguous prefix such as ``--conf FILE``) as a plain option, and
what the file sets is silently not applied: on a GPU, SGLang 0.5.13.post1 ran without speculative
decoding (issue 53). Not a rule of ours about what is merged: the release reads the line a second
time with the file in two exact words, and only where its two readings differ is it a no-go.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from patcher.findings import Finding, problem
from patcher.release import release_parser
from patcher.release.launch_command import LaunchCommand
from patcher.release.release import Release

CONFIG = "--config"


@dataclass(frozen=True)
class Respelled:
    """The line with its config file in the two words the release merges."""

    written: str  # the token as the user wrote it ("--config=FILE", "--conf")
    path: str  # the file it names
    command: LaunchCommand  # the line with "--config FILE" in its place


def respelled(cmd: LaunchCommand) -> Respelled | None:
    """The one config-file option spelled otherwise than ``--config FILE``, in its merged form;
    None where the line has none, or more than one (the release's parser says what it does then)."""
    found = [(i, token) for i, token in enumerate(cmd.argv) if _names_config(token)]
    if len(found) != 1:
        return None
    i, token = found[0]
    name, eq, value = token.partition("=")
    if eq:
        rest = cmd.argv[i + 1:]
    elif name != CONFIG and i + 1 < len(cmd.argv):
        value, rest = cmd.argv[i + 1], cmd.argv[i + 2:]
    else:
        return None  # "--config FILE" as merged, or an option with no file after it
    return Respelled(token, value, replace(cmd, argv=(*cmd.argv[:i], CONFIG, value, *rest)))


def _names_config(token: str) -> bool:
    """``--config`` or a prefix of it argparse may expand (``--conf``), with or without ``=FILE``."""
    name = token.partition("=")[0]
    return len(name) > len("--c") and CONFIG.startswith(name)


def unmerged(spelled: Respelled | None, read: LaunchCommand, reading: release_parser.Reading,
             merged: tuple[LaunchCommand, release_parser.Reading] | None, release: Release) -> list[Finding]:
    """A no-go where the release's reading of the line as written lacks options its reading of the
    respelled line has (those the file sets)."""
    if spelled is None or merged is None or reading.status != "parsed" or merged[1].status != "parsed":
        return []
    if merged[0].argv == read.argv:
        return []
    lost = [pair for pair in options(merged[0].argv) if pair not in options(read.argv)]
    return [problem("launch.config", f"{release.label()} merges a config file only where the line names it as "
                    f"'{CONFIG} FILE': it reads '{spelled.written}' as a plain option, so what the file sets is "
                    f"not applied ({', '.join(lost) or 'other values'}, read from it with '{CONFIG} FILE')",
                    wanted=f"{CONFIG} {spelled.path}", found=spelled.written,
                    hint=f"write the option as '{CONFIG}' and the file's path as the next word")]


def options(argv: tuple[str, ...]) -> list[str]:
    """A canonical argv (``release_parser.canonical``: an option, then its value unless a switch) as
    'option value' words."""
    out, i = [], 0
    while i < len(argv):
        takes = i + 1 < len(argv) and not argv[i + 1].startswith("--")
        out.append(f"{argv[i]} {argv[i + 1]}" if takes else argv[i])
        i += 2 if takes else 1
    return out
