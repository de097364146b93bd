"""A server launch command, read the way the engine's own argument parser would read it.

``patcher doctor -- <command>`` takes the line the user is about to run. This module finds
which engine it starts (``vllm serve T``, ``python -m vllm.entrypoints.openai.api_server``,
``python -m sglang.launch_server``), the target and drafter it names, the tensor-parallel
size, and the ``NAME=value`` assignments in front of it (they override the environment).
It never guesses: a command that is not a known engine's launch is a usage error.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass, field, replace
from pathlib import PurePath

from patcher import engine_specs, program
from patcher.engine_specs.base import EngineSpec
from patcher.errors import LaunchUsageError
from patcher.release import launch_wrappers

# How each engine starts and spells the options doctor reads: engine_specs.<engine>.SPEC.launch.
# An engine without that capability is named from its release's console scripts (``parse``'s
# ``scripts``) or its package (``python -m <package>...``), and nothing of its line is read.
_SPELLINGS = {s.name: launch.spellings for s, launch in engine_specs.LAUNCH_READERS}

_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


@dataclass(frozen=True)
class LaunchCommand:
    engine: str  # the engine's name (its module: ``spec``)
    entry: str  # how it starts: a serve command ("vllm serve", "sglang serve") or "-m <module>"
    argv: tuple[str, ...]  # the engine's own arguments (after "serve" / the module name)
    command: tuple[str, ...]  # the whole command as given, assignments included
    env: dict[str, str] = field(default_factory=dict)  # NAME=value written before the command
    target: str | None = None
    drafter: str | None = None
    tp: int | None = None  # None: not given (the engine's default, 1)
    tp_text: str | None = None  # as written, when it is not a whole number
    python: str | None = None  # the interpreter the command names by path (/venv/bin/python, /venv/bin/vllm)
    pp: int | None = None  # pipeline-parallel size; None: not given (1)
    model_tag: str | None = None  # ``vllm serve MODEL``'s positional, as written (not in argv)
    unset: tuple[str, ...] = ()  # ``env -u NAME`` in front: the server starts without these
    cleared: bool = False  # ``env -i`` in front: the server starts with only the command's assignments

    @property
    def spec(self) -> EngineSpec:
        """The engine module of the engine it starts."""
        return engine_specs.spec(self.engine)

    @property
    def flags(self) -> str:
        """The engine's arguments as one shell line (what ``drafter check --flags`` takes)."""
        return shlex.join(self.argv)

    @property
    def method(self) -> str | None:
        """The speculative method, upper-case (``speculative_method``)."""
        return speculative_method(self)

    def has(self, option: str) -> bool:
        """Whether a store-true option is given (``--name`` or ``--name=...``)."""
        names = _names(self.engine, option)
        return any(a in names or a.split("=", 1)[0] in names for a in self.argv if a.startswith("-"))

    def values(self, *spellings: str) -> list[str]:
        return option_values(list(self.argv), self.engine, *spellings)

    @property
    def read(self) -> bool:
        """Whether its engine states how its lines are read (``EngineSpec.launch``): else only the
        engine is known, and nothing of the line."""
        return self.engine in _SPELLINGS


def option_values(argv: list[str], engine: str, *spellings: str) -> list[str]:
    """The values given to an option, as ``engine``'s parser reads its spellings, in order."""
    return _values(argv, _expand(engine, spellings))


def _expand(engine: str, spellings: tuple[str, ...]) -> tuple[str, ...]:
    out: list[str] = []
    for s in spellings:
        out.extend(_names(engine, s))
    return tuple(out)


def _names(engine: str, option: str) -> tuple[str, ...]:
    launch = engine_specs.spec(engine).launch
    if launch is not None and launch.dashes_or_underscores and option.startswith("--"):
        return (option, "--" + option[2:].replace("-", "_"))
    return (option,)


def _values(argv: list[str], names: tuple[str, ...]) -> list[str]:
    out = []
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                out.append(argv[i + 1])
            elif arg.startswith(name + "="):
                out.append(arg[len(name) + 1:])
    return out


def _is_python(word: str) -> bool:
    return re.fullmatch(r"python(\d+(\.\d+)?)?", PurePath(word).name) is not None


def parse(command: list[str], scripts: dict[str, str] | None = None) -> LaunchCommand:
    """The launch command, or LaunchUsageError (what was found, what doctor reads). ``scripts``: the
    console commands of installed engines without a launch reading (name -> engine), as their
    releases' entry_points.txt declare them."""
    env: dict[str, str] = {}
    unset: list[str] = []
    words, cleared = launch_wrappers.unwrap(list(command), env, unset, _ASSIGNMENT)
    wanted = _launch_forms()
    if not words:
        raise LaunchUsageError("doctor needs the server command after '--'",
                               wanted=program.command(f"doctor -- {wanted}"),
                               found=shlex.join(command) or "nothing after '--'")
    engine, argv, positional, entry = _engine_of(words, scripts or {})
    if engine is None:
        titles = [s.title for s, _ in engine_specs.LAUNCH_READERS]
        which = f"{', '.join(titles[:-1])} or {titles[-1]}" if len(titles) > 1 else titles[0]
        raise LaunchUsageError(f"the command after '--' is not a {which} server launch", wanted=wanted,
                               found=shlex.join(words)[:120],
                               hint="pass the exact line that starts the server, after '--'")
    cmd = _build(engine, entry, argv, positional, command, env, _interpreter(words[0]))
    return replace(cmd, unset=tuple(unset), cleared=cleared)


def _launch_forms() -> str:
    """Every way a known engine's server starts, as a line: "vllm serve MODEL ..., ..., or python -m ..."."""
    forms = []
    for _, launch in engine_specs.LAUNCH_READERS:
        option = f"{launch.spellings['model'][0]} MODEL" if "model" in launch.spellings else "MODEL"
        model = "MODEL" if launch.serve_takes_model else option
        forms += [f"{' '.join(words)} {model} ..." for words in launch.serve_commands]
        forms += [f"python -m {module} {option} ..." for module in launch.modules[:1]]
    return ", ".join(forms[:-1]) + f", or {forms[-1]}" if len(forms) > 1 else forms[0]


def with_argv(cmd: LaunchCommand, argv: list[str]) -> LaunchCommand:
    """The same launch with the engine's arguments replaced (as the release's parser read them)."""
    return replace(_build(cmd.engine, cmd.entry, argv, None, list(cmd.command), cmd.env, cmd.python),
                   unset=cmd.unset, cleared=cmd.cleared)


def _build(engine: str, entry: str, argv: list[str], positional: str | None, command: list[str],
           env: dict[str, str], python: str | None) -> LaunchCommand:
    spell = _SPELLINGS.get(engine)
    if spell is None:  # an engine that states no reading of its lines: the line as given, unread
        return LaunchCommand(engine, entry, tuple(argv), tuple(command), dict(env), python=python)
    # a key the engine does not spell is an option its parser lacks (no PP flag, a positional model)
    models = _values(argv, _expand(engine, spell.get("model", ())))
    # `vllm serve T --model X` serves T: the CLI copies model_tag over --model.
    target = positional if positional is not None else (models[-1] if models else None)
    tp_values = _values(argv, _expand(engine, spell.get("tp", ())))
    tp, tp_text = None, None
    if tp_values:
        try:
            tp = int(tp_values[-1])
        except ValueError:
            tp_text = tp_values[-1]
    drafter = _drafter(engine, argv)
    pp_values = _values(argv, _expand(engine, spell.get("pp", ())))
    pp = int(pp_values[-1]) if pp_values and pp_values[-1].isdigit() else None
    return LaunchCommand(engine, entry, tuple(argv), tuple(command), dict(env), target, drafter, tp, tp_text,
                         python, pp, positional)


def interpreter_of(command: list[str]) -> str | None:
    """The interpreter the server command names by path, wrappers (``env A=1``) unwrapped; else None."""
    words, _ = launch_wrappers.unwrap(list(command), {}, [], _ASSIGNMENT)
    return _interpreter(words[0]) if words else None


def _interpreter(word: str) -> str | None:
    """The interpreter a command names by path: ``/venv/bin/python`` itself, or the ``python``
    beside ``/venv/bin/vllm`` (the console script runs with it). A bare name is whatever PATH
    finds when the server starts: not ours to guess."""
    path = PurePath(word)
    if len(path.parts) < 2:
        return None
    if _is_python(word):
        return word
    return str(path.with_name("python"))


def _engine_of(words: list[str], scripts: dict[str, str]) -> tuple[str | None, list[str], str | None, str]:
    """(engine, its arguments, the positional model of ``vllm serve``, the entry point)."""
    head = [PurePath(words[0]).name, *words[1:]]
    for spec, launch in engine_specs.LAUNCH_READERS:
        for serve in launch.serve_commands:  # a console script (sglang's `serve` from 0.5.5)
            if head[:len(serve)] == list(serve):
                rest, entry = words[len(serve):], " ".join(serve)
                if launch.serve_takes_model and rest and not rest[0].startswith("-"):
                    return spec.name, rest[1:], rest[0], entry
                return spec.name, rest, None, entry
    if _is_python(words[0]) and "-m" in words:
        i = words.index("-m")
        module = words[i + 1] if i + 1 < len(words) else ""
        for spec in engine_specs.ALL:
            if spec.launch is None:  # a module of its package starts it; how is not stated
                if module.split(".")[0] == spec.package:
                    return spec.name, words[i + 2:], None, f"-m {module}"
                continue
            if module in spec.launch.modules:
                return spec.name, words[i + 2:], None, f"-m {module}"
            serve = spec.launch.serve_commands[0]  # its console script is `python -m <cli_module>`
            if module == spec.launch.cli_module and words[i + 2:i + 1 + len(serve)] == list(serve[1:]):
                return _engine_of([*serve, *words[i + 1 + len(serve):]], scripts)
    if head[0] in scripts:
        return scripts[head[0]], words[1:], None, head[0]
    return None, [], None, ""


def _drafter(engine: str, argv: list[str]) -> str | None:
    spell = _SPELLINGS[engine]
    if "draft" in spell:  # the drafter's own option (SGLang)
        paths = _values(argv, _expand(engine, spell["draft"]))
        return paths[-1] if paths else None
    configs = _values(argv, _expand(engine, spell.get("speculative_config", ())))  # its "model" (vLLM)
    if not configs:
        return None
    try:
        spec = json.loads(configs[-1])
    except ValueError:
        return None  # the drafter check's flags.speculative_config says so
    model = spec.get("model") if isinstance(spec, dict) else None
    return model if isinstance(model, str) else None


def method_given(argv: list[str], engine: str) -> tuple[str, str | None] | None:
    """(the option's last value as written, the speculative method in it as the engine's parser
    reads it: SGLang's --speculative-algorithm upper-cased, vLLM's "method" in --speculative-config
    as written; None when the JSON does not parse); None: the line names no method."""
    launch = engine_specs.spec(engine).launch
    if launch is None:
        return None  # its lines are not read
    option, key, upper = launch.method_option
    values = option_values(argv, engine, option)
    if not values:
        return None
    method: object = values[-1]
    if key is not None:
        try:
            spec = json.loads(values[-1])
        except ValueError:
            return values[-1], None  # the drafter check's flags.speculative_config says so
        method = spec.get(key) if isinstance(spec, dict) else None
    if not isinstance(method, str):
        return values[-1], None
    return values[-1], method.upper() if upper else method


def speculative_method(cmd: LaunchCommand) -> str | None:
    """The speculative method the command asks for, upper-case whatever the engine (for the
    methods doctor names: EAGLE3, DFLASH); None when it names none or the JSON does not parse."""
    given = method_given(list(cmd.argv), cmd.engine)
    return given[1].upper() if given is not None and given[1] is not None else None


def effective_env(cmd: LaunchCommand, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment the server starts with: ours, overridden by the command's assignments."""
    base = {} if cmd.cleared else dict(os.environ if environ is None else environ)
    for name in cmd.unset:
        base.pop(name, None)
    base.update(cmd.env)
    return base
