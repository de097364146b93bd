"""The forms users put in front of a server command, read through to it (issue 53).

``uv run vllm serve ...``, ``numactl -N 0 vllm serve ...``, ``env -u VAR ...``, ``bash -c '...'``: a
launch written the way users run it. Each wrapper's options are skipped as the wrapper itself reads
them (those that take a value as the next word are listed per wrapper), and what changes the
server's environment is kept (``env``'s ``-u``, ``-i``, ``-S``; assignments anywhere among the
wrappers). A shell line with more than one command or an expansion is not one command: a usage error.
"""

from __future__ import annotations

import re
import shlex
from pathlib import PurePath

from patcher.errors import LaunchUsageError

# The forms users put in front of a server command (issue 53): each read through to the command.
# Options that take a value as the next word, per wrapper (the rest take none, or say it with '=').
_WRAPPER_VALUES = {
    "env": {"-u", "--unset", "-C", "--chdir", "-S", "--split-string"},
    "numactl": {"-i", "--interleave", "-m", "--membind", "-N", "--cpunodebind", "-C", "--physcpubind", "-p",
                "--preferred", "-P", "--preferred-many", "-w", "--weighted-interleave"},
    "taskset": set(),
    "nohup": set(),
    "uv run": {"--with", "--with-editable", "--with-requirements", "--python", "-p", "--project", "--directory",
               "--env-file", "--extra", "--group", "--only-group", "--no-group", "--package", "--index",
               "--default-index", "--index-url", "--extra-index-url", "-f", "--find-links", "--cache-dir",
               "--config-file", "--color", "--index-strategy", "--prerelease", "--resolution", "--exclude-newer",
               "--link-mode", "--compile-bytecode", "--refresh-package", "--reinstall-package",
               "--upgrade-package", "-P", "--native-tls", "--python-preference", "--script"},
}
_SHELL_ONE_COMMAND = re.compile(r"[;&|`$<>(){}]|\n")  # more than one command, or the shell's own expansions


def unwrap(words: list[str], env: dict[str, str], unset: list[str],
           assignment: re.Pattern[str]) -> tuple[list[str], bool]:
    """The server command inside its wrappers: ``NAME=value`` assignments, ``env`` (its -u, -i, -S),
    ``nohup``, ``numactl``, ``taskset``, ``uv run``, ``bash -c`` / ``sh -c`` with one command. Returns
    the words from the command on, and whether ``env -i`` cleared the environment first."""
    cleared = False
    while words:
        while words and assignment.match(words[0]):
            assigned, to = words.pop(0).split("=", 1)
            env[assigned] = to
        if not words:
            break
        head = PurePath(words[0]).name
        if head in ("bash", "sh", "dash", "zsh") and "-c" in words[1:3]:
            text = words[words.index("-c") + 1] if words.index("-c") + 1 < len(words) else ""
            if _SHELL_ONE_COMMAND.search(text):
                raise LaunchUsageError(f"'{head} -c' runs more than one command, or expands something, which "
                                       "doctor does not read", wanted="one command after -c, or the command itself",
                                       found=text[:120], hint="pass the server command itself after '--'")
            words = shlex.split(text)
            continue
        key = "uv run" if head == "uv" and words[1:2] == ["run"] else head
        if key not in _WRAPPER_VALUES:
            break
        words = words[2:] if key == "uv run" else words[1:]
        takes = _WRAPPER_VALUES[key]
        while words and words[0].startswith("-") and words[0] != "--":
            option = words.pop(0)
            name = option.split("=", 1)[0]
            value = option.split("=", 1)[1] if "=" in option else None
            if name in takes and value is None and words:
                value = words.pop(0)
            elif value is None and key == "env" and len(name) > 2 and name[:2] in ("-u", "-C", "-S"):
                name, value = name[:2], name[2:]  # env -uNAME
            if key == "env" and name in ("-u", "--unset") and value:
                unset.append(value)
                env.pop(value, None)
            elif key == "env" and name in ("-i", "--ignore-environment", "-"):
                cleared = True
            elif key == "env" and name in ("-S", "--split-string") and value:
                words = shlex.split(value) + words
        if words[:1] == ["--"]:
            words = words[1:]
        if key == "taskset" and words:
            words = words[1:]  # the CPU mask or list before the command
    return words, cleared
