"""A drafter checkpoint read by the release's own loader, in the engine's own interpreter.

``drafter check`` and ``doctor`` must say what the server will do with a drafter at load: which
parameter each checkpoint key reaches, which parameters no key fills (left at their random
initial values, or refused), which keys reach nothing, which shapes do not fit. A list of names
per release is a transcription of each loader, and it was wrong both ways on a GPU (issue 52: a
dropped tensor said "go", a rotary buffer the engine computes itself said "no-go"). So the loader
itself runs, as the probes and the parser child do: ``engine_specs/<engine>/loader_child.py`` is
sent to the interpreter that has the engine, builds the drafter as the server does on PyTorch's
meta device (true shapes, no memory), and feeds the release's own load path the checkpoint's names
with tensors of its shapes and no data (``loader_child_common`` says how the keys are followed).

In the same interpreter the child asks the release's code which target layers it captures for the
drafter (``LoadAnswer.capture``, per model runner; ``loader_child_common.bare_target``): the runner's
own reading of the drafter's config and the target class's own setter, so ``aux.capture`` is the
release's answer where the engine imports, and patcher's rules only where it does not.

The answer is cached per release files (the bytes of every ``.py`` of the engine package,
``answers.files_digest``: ``patcher apply`` changes the key, a revert finds it again),
interpreter (what it is, ``answers.interpreter_digest``, not where it lives), drafter header, drafter
and target folders (``answers.named_digest``) and launch line
(``$KIMI_PATCHER_CACHE/loader``): a second check of the same drafter answers without importing
the engine. Where the engine does not import (a build stage without
its dependencies, a bare ``--site`` tree, ``--engine-version`` alone), nothing of the release can
answer, and the checks say "cannot tell" (``patcher.drafter.loader_checks``).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from patcher import engine_specs
from patcher.release import answers as kept

MARK = "@@kimi-patcher-load@@ "
STATUSES = ("loaded", "refused", "unavailable")
CACHE = kept.folder("loader")
TIMEOUT = 240.0  # importing an engine's model registry cold on a loaded 2-core machine: 10-60 s
_MISSED: dict[Path, dict] = {}  # this process's "cannot be asked here" answers, by cache path
_AHEAD: dict[tuple[str, str | None, str, str], threading.Thread] = {}  # questions asked ahead, running


@dataclass(frozen=True)
class ParamLoad:
    """One parameter of the drafter the release builds, after its loader ran."""

    shape: tuple[int, ...]
    sources: tuple[str, ...]  # the checkpoint keys whose values were written into it
    covered: float  # the share of it they filled (a v shard missing leaves qkv at 2/3)
    target: bool  # the engine puts the target's weights in after the load (SGLang's set_embed)

    @property
    def filled(self) -> bool:
        return self.target or self.covered >= 0.999


@dataclass(frozen=True)
class LoadAnswer:
    """What the release's loader did with the checkpoint (``status``: loaded, refused by the
    release with its message, or unavailable: it could not be asked here, and why)."""

    status: str
    error: str = ""
    where: str = ""  # file:line of the raise, inside the engine's package
    model: str = ""  # the class the release built
    params: dict[str, ParamLoad] = field(default_factory=dict)
    kept: dict[str, tuple[str, ...]] = field(default_factory=dict)  # attribute -> keys held outside parameters
    computed: dict[str, str] = field(default_factory=dict)  # key -> the buffer module the release fills itself
    stage: str = "load"  # refused at "build" (no class for it) or at "load"
    # The target layers the release captures for this drafter, per model runner ("" for an engine
    # with one), by its own code; a string where that runner could not be asked, and why.
    capture: dict[str, tuple[int, ...] | str] = field(default_factory=dict)
    seconds: float = 0.0
    cached: bool = False

    def used(self) -> set[str]:
        """Every checkpoint key whose values the model holds after the load."""
        return {k for p in self.params.values() for k in p.sources} | {k for ks in self.kept.values() for k in ks}


def unavailable(why: str) -> LoadAnswer:
    return LoadAnswer("unavailable", error=why)


@dataclass(frozen=True)
class Ask:
    """One drafter to put to the release's loader: the checkpoint's folder and header (name ->
    (safetensors dtype, shape), read and validated by the caller), the launch options the server
    is built from, and the target's folder where there is one."""

    drafter: Path
    header: dict[str, tuple[str, tuple[int, ...]]]
    argv: list[str]
    target: Path | None = None

    def request(self) -> dict:
        return {"drafter": str(self.drafter), "target": str(self.target) if self.target else None,
                "argv": list(self.argv), "header": {k: [d, list(s)] for k, (d, s) in sorted(self.header.items())}}


def ask(engine: str, python: str | None, site: Path, question: Ask) -> LoadAnswer:
    """The release's loader on one checkpoint; cached. Waits for the same question started ahead."""
    ahead = _AHEAD.pop((engine, python, str(site), json.dumps(question.request())), None)
    if ahead is not None:
        ahead.join()
    return ask_many(engine, python, site, [question])[0]


def ask_ahead(engine: str, python: str | None, site: Path, question: Ask) -> None:
    """Start asking in the background (doctor: while the release's parser reads the line, in its own
    interpreter, on the other core); ``ask`` with the same question then finds the answer cached."""
    key = (engine, python, str(site), json.dumps(question.request()))
    if key not in _AHEAD:
        thread = threading.Thread(target=ask_many, args=(engine, python, site, [question]), daemon=True)
        thread.start()
        _AHEAD[key] = thread


def ask_many(engine: str, python: str | None, site: Path, questions: list[Ask]) -> list[LoadAnswer]:
    """``ask`` for several checkpoints of one install: the ones not cached share one interpreter."""
    spec = engine_specs.spec(engine)
    child = spec.drafter_rules.loader_child
    if child is None:
        return [unavailable(f"patcher has no reader of {spec.title}'s drafter loader") for _ in questions]
    interpreter = python or sys.executable
    t0 = time.monotonic()
    reqs = [q.request() for q in questions]
    script = _script(child)
    release = kept.files_digest(site, None, spec.package)
    who = kept.interpreter_digest(interpreter, None if python else site)
    paths = [CACHE / f"{_key(who, release + script, r, q)}.json" for r, q in zip(reqs, questions)]
    got: list[dict | None] = [_MISSED.get(p) or _valid(kept.load(p)) for p in paths]
    cached = [g is not None for g in got]
    todo = [i for i, g in enumerate(got) if g is None]
    if todo:
        fresh = _run(interpreter, None if python else site, script, [reqs[i] for i in todo])
        for i, one in zip(todo, fresh):
            got[i] = one
            if one["status"] != "unavailable":
                kept.store(paths[i], one)
            else:  # not stored (the next run may have what was missing), but not asked twice in a run
                _MISSED[paths[i]] = one
    seconds = time.monotonic() - t0
    return [_answer(g, seconds, hit) for g, hit in zip(got, cached) if g is not None]


def _answer(got: dict, seconds: float, cached: bool) -> LoadAnswer:
    params = {name: ParamLoad(tuple(p["shape"]), tuple(p["sources"]), float(p["covered"]), bool(p["target"]))
              for name, p in (got.get("params") or {}).items()}
    return LoadAnswer(got["status"], got.get("error", ""), got.get("where", ""), got.get("model", ""), params,
                      {k: tuple(v) for k, v in (got.get("kept") or {}).items()}, dict(got.get("computed") or {}),
                      got.get("stage", "load"),
                      {runner: tuple(c["layers"]) if "layers" in c else str(c.get("error", ""))
                       for runner, c in (got.get("capture") or {}).items()}, seconds, cached)


def _script(child: str) -> str:
    """The program the engine's interpreter runs: the shared part, then the engine's own."""
    here = Path(engine_specs.__file__).parent
    return (here / "loader_child_common.py").read_text() + "\n" + (here / child).read_text()


def _run(python: str, site: Path | None, script: str, reqs: list[dict]) -> list[dict]:
    """One answer per request, in order; all "unavailable" when the child cannot answer them."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONDONTWRITEBYTECODE="1")
    if site is not None:  # --site: ours, with the site first on the path (as the probes run)
        env["PYTHONPATH"] = os.pathsep.join([str(site), *filter(None, [env.get("PYTHONPATH")])])
    failed = None
    try:
        proc = subprocess.run([python, "-c", script], input=json.dumps({"asks": reqs}), capture_output=True,
                              text=True, env=env, timeout=TIMEOUT * len(reqs) ** 0.5, cwd=tempfile.gettempdir())
    except subprocess.TimeoutExpired:
        failed = f"the loader did not answer in {TIMEOUT * len(reqs) ** 0.5:.0f} s"
    except OSError as exc:
        failed = f"cannot start {python}: {exc.strerror or exc}"
    answers: dict[int, dict] = {}
    if failed is None:
        for line in proc.stdout.splitlines():
            if not line.startswith(MARK):
                continue
            try:
                got = json.loads(line[len(MARK):])
            except ValueError:
                continue
            index = got.pop("index", None) if isinstance(got, dict) else None
            if isinstance(index, int) and 0 <= index < len(reqs) and _valid(got) is not None:
                answers[index] = got
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]
        failed = f"the loader's interpreter exited {proc.returncode}: {last}"
    return [answers.get(i) or {"status": "unavailable", "error": failed} for i in range(len(reqs))]


def _valid(got: object) -> dict | None:
    """The child's answer (or a cache file), or None when it is not the shape the child writes."""
    if not isinstance(got, dict) or got.get("status") not in STATUSES:
        return None
    params = got.get("params", {})
    if not isinstance(params, dict) or not all(
            isinstance(p, dict) and isinstance(p.get("shape"), list) and isinstance(p.get("sources"), list)
            and isinstance(p.get("covered"), (int, float)) and isinstance(p.get("target"), bool)
            for p in params.values()):
        return None
    for name in ("kept", "computed"):
        if not isinstance(got.get(name, {}), dict):
            return None
    if not all(isinstance(got.get(k, ""), str) for k in ("error", "where", "model")):
        return None
    capture = got.get("capture", {})
    if not isinstance(capture, dict) or not all(
            isinstance(c, dict) and (isinstance(c.get("error"), str) or (
                isinstance(c.get("layers"), list) and all(type(i) is int for i in c["layers"])))
            for c in capture.values()):
        return None
    return got


def _key(interpreter: str, release: str, req: dict, question: Ask) -> str:
    """The interpreter (``answers.interpreter_digest``), the release's files and our child's code
    (``release``), the request, and what the drafter's and target's folders hold
    (``answers.named_digest``: their config.json, which the engine reads itself, and a
    ``trust_remote_code`` target's configuration code beside it)."""
    h = hashlib.sha256(json.dumps([interpreter, release, req]).encode())
    h.update(kept.named_digest([str(f) for f in (question.drafter, question.target) if f]).encode())
    return h.hexdigest()
