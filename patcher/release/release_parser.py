"""A server command read by the release's own parser, in the engine's own interpreter.

``doctor`` must read a launch line exactly as the release will: argparse's unique prefixes
(``--speculative-algo``), vLLM's ``-sc``, ``--spec-*``, dotted and underscore forms, ``--config``
files on both engines, JSON values, choices. Any approximation of two engines' parsers drifts
(issue 46: 23 false "go" in 51 launch shapes), so the release's parser itself runs, as the
probes do: the script ``engine_specs/<engine>/parser_child.py`` is sent to the interpreter that
has the engine (``--python``, the command's own, or ours with ``--site`` on the path), builds
the parser the way the server's entry point does and reports the values of the options doctor
reads, or the parser's own error. The answer is cached per release files, command line and
what its paths name (``--config`` files, the model's and drafter's configs:
``~/.cache/kimi-patcher/launch``), so a second ``doctor`` on the same line answers without
importing the engine.

Where the engine does not import (a build stage without its dependencies, a bare ``--site``
tree) nothing of the release can parse the line. The line is then read by the exact spellings
the engine module lists, and every token that the release's parser could read otherwise than
those spellings do (an abbreviation of an option doctor reads, a dotted or ``--config`` form, a
short alias, an alias family the module names) is listed as ``unsure``: doctor says it cannot
tell, never go or no-go on a guess. Why not read the option table statically: both engines
generate most options from dataclass fields at run time (vLLM's ``EngineArgs``, SGLang 0.5.20's
``arg_groups``), so a reader of their files would be a third parser to drift.

The same child then runs the release's start-up configuration on the parsed line (issue 53),
with the command's own variable assignments and, for SGLang, the GPU doctor knows of: its answer
rides with the parse (``Reading.startup``) and is validated here as any other input.

Over 300 lines: the request, the child's run and the answer's validation and cache are one
contract with the child scripts; split, each half would restate the other's shapes.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from patcher import engine_specs
from patcher.environment.engines import Install
from patcher.release import answers as kept
from patcher.release import launch_command
from patcher.release.launch_command import LaunchCommand

MARK = "@@kimi-patcher-parse@@ "
STATUSES = ("parsed", "rejected", "unavailable")
STARTUP_STATUSES = ("configured", "refused", "unavailable")
CACHE = kept.folder("launch")
TIMEOUT = 180.0  # a cold import of vLLM's CLI on a loaded 2-core machine takes 10-40 s
_UNAVAILABLE: dict[tuple[str, str], str] = {}  # (python, site) -> why the parser does not import there


@dataclass(frozen=True)
class Reading:
    """How a launch line was read."""

    by: str  # "release": its own parser ran; "spellings": it cannot run here, doctor's exact spellings read it
    status: str  # parsed | rejected (the release's parser refuses the line) | unavailable
    error: str = ""  # the parser's message (rejected), or why it cannot run here (unavailable)
    unsure: tuple[str, ...] = ()  # by "spellings": tokens the release may read otherwise
    seconds: float = 0.0
    cached: bool = False
    # The release's start-up configuration of the parsed line, where its child builds one (vLLM's
    # create_engine_config): {"status": configured | refused | unavailable, ...}; None: not built.
    startup: dict | None = None


def read(cmd: LaunchCommand, install: Install, gpu: str | None = None,
         environ: dict[str, str] | None = None) -> tuple[LaunchCommand, Reading]:
    """The command as the release reads it (its options rewritten in their canonical spellings,
    the values the release's parser gave), and how it was read. ``gpu``: the compute capability
    major of the GPUs the server runs on, where known, for start-up code that asks the device.
    ``environ``: the environment the server starts with (doctor's, with the command's assignments):
    the child, which inherits this process's, is sent where the engine's variables differ from it;
    None: this process's environment."""
    return read_many([cmd], install, gpu, environ)[0]


def read_many(cmds: list[LaunchCommand], install: Install, gpu: str | None = None,
              environ: dict[str, str] | None = None) -> list[tuple[LaunchCommand, Reading]]:
    """``read`` for several lines of one engine: the ones not cached share one interpreter."""
    python = install.python or sys.executable
    where = (python, "" if install.python else str(install.site))
    t0 = time.monotonic()
    answers: list[dict | None] = [None] * len(cmds)
    cached = [False] * len(cmds)
    if where in _UNAVAILABLE:
        answers = [{"status": "unavailable", "error": _UNAVAILABLE[where]} for _ in cmds]
        cached = [True] * len(cmds)
    else:
        reqs = [_request(cmd, gpu, environ) for cmd in cmds]
        keys = [_key(cmd.engine, req, install, python, environ) for cmd, req in zip(cmds, reqs)]
        for i, key in enumerate(keys):
            answers[i] = _valid(kept.load(CACHE / f"{key}.json"))
            cached[i] = answers[i] is not None
        todo = [i for i, got in enumerate(answers) if got is None]
        if todo:
            spec = cmds[0].spec
            got = _run(python, install, spec.launch_rules.parser_child,
                       {"lines": [reqs[i] for i in todo], "dests": list(spec.launch_rules.read)})
            for i, one in zip(todo, got["lines"] if "lines" in got else [got] * len(todo)):
                answers[i] = one
                if one["status"] != "unavailable":
                    kept.store(CACHE / f"{keys[i]}.json", one)
    seconds = time.monotonic() - t0
    return [_reading(cmd, got, seconds, hit, where) for cmd, got, hit in zip(cmds, answers, cached)]


def option_table(engine: str, install: Install, entry: str = "serve") -> dict | None:
    """The option table of the release's parser, as the server's entry point builds it: every
    option string (``options``), the option strings of each dest (``dests``), whether argparse takes
    prefixes (``abbrev``); None where the parser does not import. Tests generate spellings from it."""
    return table_then_read(engine, install, lambda table: [], entry)[0]


def table_then_read(engine: str, install: Install, spell: Callable[[dict], list[LaunchCommand]],
                    entry: str = "serve") -> tuple[dict | None, list[tuple[LaunchCommand, Reading]]]:
    """The option table, then ``read_many`` of the lines ``spell(table)`` builds from it, in one
    interpreter (one import of the engine: the tests spell every release this way). Answers are
    cached as ``read_many`` caches them."""
    python = install.python or sys.executable
    spec = engine_specs.spec(engine)
    t0 = time.monotonic()
    cmds: list[LaunchCommand] = []

    def more(table: dict) -> list[dict]:
        cmds.extend(spell(table))
        return [_request(cmd) for cmd in cmds]

    got = _run(python, install, spec.launch_rules.parser_child,
               {"lines": [], "dests": list(spec.launch_rules.read), "table": entry, "more_on_stdin": True}, more)
    where = (python, "" if install.python else str(install.site))
    answers = got["lines"] if "lines" in got else [got] * len(cmds)
    for cmd, one in zip(cmds, answers):
        if one["status"] != "unavailable":
            kept.store(CACHE / f"{_key(engine, _request(cmd), install, python)}.json", one)
    seconds = time.monotonic() - t0
    return got.get("table"), [_reading(cmd, one, seconds, False, where) for cmd, one in zip(cmds, answers)]


def _reading(cmd: LaunchCommand, got: dict | None, seconds: float, cached: bool,
             where: tuple[str, str]) -> tuple[LaunchCommand, Reading]:
    assert got is not None
    if got["status"] == "unavailable":
        _UNAVAILABLE[where] = got["error"]
        return cmd, Reading("spellings", "unavailable", got["error"], unsure(cmd), seconds, cached)
    if got["status"] == "rejected":
        return cmd, Reading("release", "rejected", got["error"], (), seconds, cached)
    argv = canonical(cmd.spec.launch_rules.read, got["values"])
    startup = got["values"].get("_startup")
    if not (isinstance(startup, dict) and startup.get("status") in STARTUP_STATUSES
            and all(isinstance(v, (str, int, type(None))) for v in startup.values())):
        startup = None  # a child that builds none, or a cache file not of its shape
    return launch_command.with_argv(cmd, argv), Reading("release", "parsed", "", (), seconds, cached, startup)


def server_argv(cmd: LaunchCommand) -> list[str]:  # as written, ``vllm serve``'s positional model first
    return [cmd.model_tag, *cmd.argv] if cmd.model_tag is not None else list(cmd.argv)


def _engine_env(engine: str, environ: Mapping[str, str]) -> dict[str, str]:
    """The engine's own variables (``VLLM_*``, ``SGLANG_*``) in an environment."""
    prefix = engine.upper() + "_"
    return {k: v for k, v in environ.items() if k.startswith(prefix)}


def _request(cmd: LaunchCommand, gpu: str | None = None, environ: Mapping[str, str] | None = None) -> dict:
    req: dict = {"argv": server_argv(cmd), "entry": "module" if cmd.entry.startswith("-m ") else "serve"}
    env: dict[str, str | None] = {}
    if environ is not None:  # where the server's environment differs from ours, which the child inherits
        want, ours = _engine_env(cmd.engine, environ), _engine_env(cmd.engine, os.environ)
        env.update({k: v for k, v in want.items() if ours.get(k) != v})
        env.update({k: None for k in ours if k not in want})  # None: the server starts without it
    env.update(cmd.env)  # the command's own assignments: start-up code reads them (SGLANG_*, VLLM_*)
    if env:
        req["env"] = {k: env[k] for k in sorted(env)}
    if gpu is not None:
        req["gpu"] = gpu
    return req


def canonical(read_as: dict[str, str], values: dict) -> list[str]:
    """The options doctor reads, each in its one spelling, with the value the release parsed."""
    out: list[str] = []
    for dest, option in read_as.items():
        value = values.get(dest)
        if value is None or value is False:
            continue
        if value is True:
            out.append(option)
        elif isinstance(value, (dict, list)):
            out += [option, json.dumps(value)]
        else:
            out += [option, str(value)]
    return out


def unsure(cmd: LaunchCommand) -> tuple[str, ...]:
    """Tokens that the release's parser may read otherwise than doctor's exact spellings do."""
    launch = cmd.spec.launch_rules
    known = {s for spellings in launch.spellings.values() for s in spellings} | set(launch.read.values())
    out = []
    for token in cmd.argv:
        if not token.startswith("-") or token == "-" or token[1:2].isdigit():
            continue  # a value, or a negative number
        name = token.split("=", 1)[0]
        if launch.dashes_or_underscores and name.startswith("--"):
            name = "--" + name[2:].replace("_", "-")
        if name in known:
            continue
        why = (name == "--config" or (name.startswith("--") and "." in name)
               or not name.startswith("--")  # a short option doctor does not know: an alias, maybe
               or any(k.startswith(name) for k in known)  # argparse takes a unique prefix
               or name.startswith(launch.alias_prefixes)
               or "--" + name[2:].replace("_", "-") in known)
        if why:
            out.append(token)
    return tuple(out)


def _run(python: str, install: Install, child: str | None, req: dict,
         more: Callable[[dict], list[dict]] | None = None) -> dict:
    """The child's answers: {"lines": [one answer per line asked], "table": ...}, or one
    "unavailable" answer for all when the parser does not import or the child dies, or the engine
    names no child (``LaunchReading.parser_child``). ``more`` (with ``req["more_on_stdin"]``) builds
    further lines from the table once the child sends it."""
    if child is None:
        return {"status": "unavailable", "error": f"patcher has no reader of {install.engine}'s own parser"}
    script = _script(child)
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONDONTWRITEBYTECODE="1")
    if not install.python:  # --site: ours, with the site first on the path (as the probes run)
        env["PYTHONPATH"] = os.pathsep.join([str(install.site), *filter(None, [env.get("PYTHONPATH")])])
    asked: list[dict] = list(req["lines"])
    said: list[dict | None] = []
    late = threading.Event()
    with tempfile.TemporaryFile("w+") as errors:
        try:
            proc = subprocess.Popen([python, "-c", script, json.dumps(req)], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=errors, text=True, env=env)
        except OSError as exc:
            return {"status": "unavailable", "error": f"cannot start {python}: {exc.strerror or exc}"}
        timer = threading.Timer(TIMEOUT, _expire, (proc, late))
        timer.daemon = True
        timer.start()
        try:
            with proc, contextlib.suppress(BrokenPipeError):
                stdin, stdout = proc.stdin, proc.stdout
                assert stdin is not None and stdout is not None  # both PIPE
                if not req.get("more_on_stdin"):
                    stdin.close()  # the child never reads it
                for ln in stdout:
                    if ln.startswith(MARK):
                        try:
                            said.append(json.loads(ln[len(MARK):]))
                        except ValueError:
                            said.append(None)
                    if said and not stdin.closed:  # the table (or why there is none): send the rest
                        first = said[0]
                        table = first if isinstance(first, dict) and first.get("status") == "table" else None
                        extra = more(table) if table is not None and more is not None else []
                        asked += extra
                        stdin.write(json.dumps(extra))
                        stdin.close()
        finally:
            timer.cancel()
        if late.is_set():
            return {"status": "unavailable", "error": f"the parser did not answer in {TIMEOUT:.0f} s"}
        errors.seek(0)
        last = (errors.read().strip().splitlines() or ["no output"])[-1][:300]
    if said and isinstance(said[0], dict) and said[0].get("status") == "unavailable" and _valid(said[0]):
        return said[0]
    table = said.pop(0) if said and isinstance(said[0], dict) and said[0].get("status") == "table" else None
    lines = [_valid(one) for one in said]
    if len(lines) != len(asked) or any(one is None for one in lines):
        return {"status": "unavailable", "error": f"the parser's interpreter exited {proc.returncode}: {last}"}
    return {"lines": lines, "table": table}


def _expire(proc: subprocess.Popen, late: threading.Event) -> None:
    late.set()
    proc.kill()


def _valid(got: object) -> dict | None:
    """The child's answer (or a cache file), or None when it is not the shape the child writes."""
    if not isinstance(got, dict) or got.get("status") not in STATUSES:
        return None
    if got["status"] == "parsed" and not isinstance(got.get("values"), dict):
        return None
    if got["status"] != "parsed" and not isinstance(got.get("error"), str):
        return None
    return got


@functools.cache
def _script(child: str) -> str:
    here = Path(engine_specs.__file__).parent
    return (here / "parser_child_common.py").read_text() + "\n" + (here / child).read_text()


def _key(engine: str, req: dict, install: Install, python: str, environ: Mapping[str, str] | None = None) -> str:
    """The release's files as installed, the interpreter (what it is, ``answers.interpreter_digest``,
    not where it lives), the request, the engine's variables the start-up sees, the child that
    answers (a changed child asks anew) and what the line's paths name (``answers.named_digest``):
    not the working directory itself, which matters only through a relative path, so one line
    asked from two checkouts is one answer."""
    seen = _engine_env(engine, os.environ if environ is None else environ)
    interpreter = kept.interpreter_digest(python, None if install.python else install.site)
    h = hashlib.sha256(json.dumps([interpreter, req, sorted(seen.items())]).encode())
    child = engine_specs.spec(engine).launch_rules.parser_child
    h.update(_script(child).encode() if child else b"\0no child")
    h.update(kept.files_digest(install.site, list(install.record), install.package).encode())
    strings = [*req["argv"], *(v for v in (req.get("env") or {}).values() if v), *seen.values()]
    h.update(kept.named_digest(strings).encode())
    return h.hexdigest()


def forget() -> None:
    """Drop what this process remembers of interpreters where the parser does not import (tests)."""
    _UNAVAILABLE.clear()

