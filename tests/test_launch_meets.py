"""doctor's no-go names only the families this launch meets (issue 54; patcher/doctor/meets.py).

The grid is generated from each family's own ``[launch] meets`` conditions: on a published release
where the family is pending, a launch that meets every condition (the family is a reason for no-go,
naming why) and, for each condition, the neighbour that meets all but it (the family is a line
that says so, no reason, and nothing it spares is offered as a command). A condition that depends
on what doctor cannot see (the GPU of a build host, the drafter's keys where the loader cannot run)
makes the family "cannot tell", never go. ``--strict`` keeps the install-wide verdict.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
from packaging.version import Version

from patcher.cli.main import main
from patcher.core import manifest, matrix
from patcher.core.plan import State, declared
from patcher.doctor.meets import DEPENDS, NO, YES, MeetContext, meets
from patcher.engine_specs.base import LaunchContext
from patcher.findings import ok, problem, unknown
from patcher.maintainer import wheels
from patcher.release.launch_command import parse
from tests.support import launch_lines
from tests.test_drafter import eagle3_config, make_drafter

SWITCHED = {"fc_norm": True}
DEEPSEEK = "DeepseekV3ForCausalLM"
LLAMA = "LlamaForCausalLM"


# --- the conditions, one at a time ----------------------------------------------------------------

def _ctx(line: list[str], findings=(), gpu=None, drafter=None, target=None):
    from types import SimpleNamespace

    cmd = parse(line)
    release = SimpleNamespace(spec=cmd.spec)
    return MeetContext(LaunchContext(release, cmd, target, {}, {}), tuple(findings), gpu, tuple(cmd.argv), drafter)


SG = ["python", "-m", "sglang.launch_server", "--model-path", "/t"]


@pytest.mark.parametrize(("conditions", "line", "extra", "answer"), [
    (("eagle3",), SG + ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/d"], {}, YES),
    (("eagle3",), SG + ["--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", "/d"], {}, NO),
    (("eagle",), SG + ["--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", "/d"], {}, YES),
    (("eagle",), SG, {}, NO),
    (("tp>1",), SG + ["--tp-size", "8"], {}, YES),
    (("tp>1",), SG, {}, NO),
    (("target:A|B",), SG, {}, DEPENDS),  # the target's config was not read
    (("target:A|B",), SG, {"target": {"architectures": ("B",)}}, YES),
    (("target:A|B",), SG, {"target": {"architectures": ("C",)}}, NO),
    (("finding:keys.*",), SG, {"findings": [problem("keys.unloaded", "x")]}, YES),
    (("finding:keys.*",), SG, {"findings": [unknown("keys.load", "x")]}, DEPENDS),
    (("finding:keys.*",), SG, {"findings": [ok("keys.load", "x")]}, NO),
    (("finding:launch.x?",), SG, {"findings": [ok("launch.x", "x").__class__("hint", "launch.x", "y")]}, DEPENDS),
    (("finding:launch.x",), SG, {"findings": [ok("launch.x", "x").__class__("hint", "launch.x", "y")]}, NO),
    (("flag:--enable-flashinfer-allreduce-fusion",), SG + ["--enable-flashinfer-allreduce-fusion"], {}, YES),
    (("flag:--enable-flashinfer-allreduce-fusion",), SG, {}, NO),
    (("text:fuse_allreduce_rms",), ["vllm", "serve", "/t", "-cc", '{"pass_config": {"fuse_allreduce_rms": true}}'], {},
     YES),
    (("gpu:12",), SG, {}, DEPENDS),
    (("gpu:12",), SG, {"gpu": "12"}, YES),
    (("gpu:12",), SG, {"gpu": "9"}, NO),
    (("eagle3", "gpu:12"), SG, {"gpu": None}, NO),  # one no answers for all
    (("no-such-condition",), SG, {}, YES),  # a newer manifest's condition: never spared on a guess
])
def test_each_condition(conditions, line, extra, answer) -> None:
    from types import SimpleNamespace

    target = SimpleNamespace(**extra["target"]) if "target" in extra else None
    ctx = _ctx(line, extra.get("findings", ()), extra.get("gpu"), None, target)
    assert meets(conditions, ctx).answer == answer


def test_drafter_conditions() -> None:
    from types import SimpleNamespace

    d = SimpleNamespace(aux_layer_ids=[2, 30, 58], eagle_aux_ids=[2, 30, 58], top_aux_ids=None, switches={"fc_norm"})
    ctx = _ctx(SG, drafter=d)
    assert [meets((c,), ctx).answer for c in ("drafter:explicit-ids", "drafter:eagle-config-ids-only",
                                              "drafter:switch")] == [YES, YES, YES]
    ctx = _ctx(SG, drafter=SimpleNamespace(aux_layer_ids=[], eagle_aux_ids=None, top_aux_ids=None, switches=set()))
    assert [meets((c,), ctx).answer for c in ("drafter:explicit-ids", "drafter:eagle-config-ids-only",
                                              "drafter:switch")] == [NO, NO, NO]


# --- the grid: every family, on a release where it is pending --------------------------------------

def _pending_release(family: manifest.Family) -> str | None:
    """The newest covered release on which the family, as published, is pending."""
    for version in sorted(matrix.releases(family.engine), key=Version, reverse=True):
        if declared(family, Version(version)).state is State.PENDING:
            return version
    return None


FAMILIES = [f for f in manifest.load_all() if f.meets is not None]
GRID = [pytest.param(f, _pending_release(f), id=f.id) for f in FAMILIES if _pending_release(f) is not None]


def _target(root: Path, arch: str) -> Path:
    folder = root / f"target-{arch}"
    folder.mkdir(exist_ok=True)
    model_type = {"KimiK25ForConditionalGeneration": "kimi_k25"}.get(arch, "deepseek_v3")
    config = {"architectures": [arch], "model_type": model_type, "hidden_size": 8, "num_hidden_layers": 61,
              "vocab_size": 64, "num_attention_heads": 64, "max_position_embeddings": 262144}
    if arch == "KimiK25ForConditionalGeneration":
        config = {"architectures": [arch], "model_type": "kimi_k25", "text_config": dict(config, model_type="kimi_k2")}
    (folder / "config.json").write_text(json.dumps(config))
    return folder


class Launch:
    """A launch described by the facts the conditions read, written as the engine's own line."""

    def __init__(self, engine: str) -> None:
        self.engine, self.method, self.tp, self.arch = engine, "eagle3", 8, DEEPSEEK
        self.flags: list[str] = []
        self.drafter: dict = {"aux": None}  # eagle3_config's arguments, and extras
        self.gpu = "9"
        self.env: list[str] = []

    def line(self, root: Path) -> list[str]:
        root.mkdir(parents=True, exist_ok=True)
        target = _target(root, self.arch)
        config = eagle3_config(aux=self.drafter.get("aux"))
        if self.drafter.get("top"):
            config["eagle_aux_hidden_state_layer_ids"] = self.drafter["top"]
        config.update(self.drafter.get("switches", {}))
        name = f"drafter-{len(list(root.iterdir()))}"
        drafter = make_drafter(root, name, config=config, prefix="midlayer.", d2t=self.drafter.get("d2t", True))
        line = launch_lines.line(self.engine, target, drafter if self.method else None, self.method, self.tp)
        return [*self.env, *line, *self.flags]


def _set(launch: Launch, condition: str, want: bool) -> bool:
    """Make the launch meet the condition (want) or not; False: the grid has no launch for it here."""
    kind, _, arg = condition.partition(":")
    if condition == "eagle3":
        launch.method = "eagle3" if want else None
    elif condition == "eagle":
        launch.method = "eagle3" if want else None
    elif condition == "tp>1":
        launch.tp = 8 if want else 1
    elif kind == "target":
        launch.arch = arg.split("|")[0] if want else LLAMA
    elif kind == "flag":
        flag = arg.split("|")[0]
        launch.flags = [f for f in launch.flags if f != flag] + ([flag] if want else [])
    elif kind == "text":
        launch.flags = ["-cc", json.dumps({"pass_config": {arg: True}})] if want else []
    elif kind == "gpu":
        launch.gpu = arg if want else "9"
    elif condition == "drafter:explicit-ids":
        launch.drafter["aux"] = [4, 30, 56] if want else None
    elif condition == "drafter:eagle-config-ids-only":
        launch.drafter.update(aux=[4, 30, 56], top=None if want else [4, 30, 56])
    elif condition == "finding:aux.capture":  # the default ids (2, n // 2, n - 3) for 61 layers: captured as trained
        launch.drafter["aux"] = [4, 30, 56] if want else [2, 30, 58]
    elif condition == "drafter:switch":
        launch.drafter["switches"] = dict(SWITCHED) if want else {}
    elif condition == "finding:launch.allreduce_fusion?":
        launch.flags = ["--enable-flashinfer-allreduce-fusion"] if want else []
        launch.tp = 8 if want else 1
    elif condition == "finding:launch.two_batch_overlap?":
        launch.flags = ["--enable-two-batch-overlap"] if want else []
    elif condition == "finding:launch.runner":
        launch.env = ["VLLM_USE_V2_MODEL_RUNNER=1"] if want else ["VLLM_USE_V2_MODEL_RUNNER=0"]
    elif condition == "finding:eagle31.*|vocab.d2t":
        launch.drafter["d2t"] = not want
    elif condition == "finding:flags.algorithm|aux.capture|config.use_aux_hidden_state":
        launch.method = "eagle" if want else "eagle3"
    else:
        return False  # finding:keys.*: only the release's loader says (tests/test_drafter_loader.py)
    return True


def _doctor(site: Path, launch: Launch, root: Path, *more: str) -> dict:
    out, err = io.StringIO(), io.StringIO()
    code = main(["doctor", "--json", "--gpu", launch.gpu, "--site", str(site), *more, "--", *launch.line(root)],
                out=out, err=err)
    doc = json.loads(out.getvalue())
    assert doc["exit"] == code, err.getvalue()
    return doc


@pytest.mark.wheels
@pytest.mark.parametrize(("family", "version"), GRID)
def test_the_family_is_a_reason_exactly_where_the_launch_meets_it(tmp_path: Path, family: manifest.Family,
                                                                   version: str) -> None:
    site = tmp_path / "site"
    shutil.copytree(wheels.tree(family.engine, version), site)
    # everything else applied: this family's own conditions decide
    others = [f"--skip={f.name}" for f in [family]]
    out = io.StringIO()
    main(["apply", "--engine", family.engine, "--site", str(site), "--no-probes", *others], out=out, err=io.StringIO())
    conditions = family.meets or ()
    met = Launch(family.engine)
    judged = [c for c in conditions if _set(met, c, True)]
    fid, code = family.id, f"family.{family.name}"
    doc = _doctor(site, met, tmp_path / "met")
    line = next(fm for fm in doc["families"] if fm["id"] == fid)
    if len(judged) < len(conditions):  # a condition only the release's loader answers: never go here
        assert line["meets"] in (YES, DEPENDS) and doc["verdict"] != "go", (line, doc["reasons"])
    else:
        assert line["meets"] == YES, (line, doc["reasons"])
        assert doc["verdict"] == "no-go"
        reason = next(r for r in doc["reasons"] if r.startswith(f"{fid} is pending (this launch meets it: "))
        assert code not in {f["code"] for f in doc["findings"]}, reason  # said once, as a reason
        assert doc["next"], "apply is the command a met pending family needs"
    for i, c in enumerate(judged):  # each neighbour: all conditions met but this one
        neighbour = Launch(family.engine)
        for d in [d for d in judged if d != c] + [c]:  # the one it fails last: settings may overlap
            _set(neighbour, d, d != c)
        doc = _doctor(site, neighbour, tmp_path / f"n{i}")
        line = next(fm for fm in doc["families"] if fm["id"] == fid)
        assert line["meets"] == NO, (c, line)
        assert not any(r.startswith(f"{fid} ") for r in doc["reasons"]), (c, doc["reasons"])
        spared = {f["code"]: f for f in doc["findings"]}[code]
        assert spared["level"] == "hint" and "this launch does not meet it" in spared["message"]
        assert spared["hint"].startswith(f"'patcher apply --engine {family.engine}") and "applies it anyway" in \
            spared["hint"]
        strict = _doctor(site, neighbour, tmp_path / f"s{i}", "--strict")
        assert any(r.startswith(f"{fid} is pending") for r in strict["reasons"]) and strict["verdict"] == "no-go"


@pytest.mark.wheels
def test_a_published_release_is_not_a_no_go_by_itself(tmp_path: Path) -> None:
    """Issue 54's H100 line: SGLang 0.5.13.post1 as published, TP 1, EAGLE-3, a well-formed SpecForge
    drafter naming no switch, on SM90: six families pending, none met. The verdict is not no-go (on a
    bare tree, "cannot tell" for the drafter's keys alone); --strict keeps the install-wide no-go."""
    site = wheels.tree("sglang", "0.5.13.post1")
    launch = Launch("sglang")
    launch.tp, launch.arch = 1, DEEPSEEK
    doc = _doctor(site, launch, tmp_path / "a")
    pending = [fm["id"] for fm in doc["families"] if fm["state"] == "pending"]
    assert len(pending) >= 5 and all(fm["meets"] != YES for fm in doc["families"]), doc["families"]
    # what is not proven on a bare tree: the keys, and so whether the drafter-keys family matters here
    assert doc["verdict"] == "cannot tell", doc["reasons"]
    assert {r.split(":")[0] for r in doc["reasons"]} == {"keys.load", "family.eagle3-drafter-keys"}
    assert doc["next"] == [f"patcher apply --engine sglang --site {site}"]  # it settles the keys family
    strict = _doctor(site, launch, tmp_path / "b", "--strict")
    assert strict["verdict"] == "no-go" and len([r for r in strict["reasons"] if " is pending" in r]) == len(pending)


@pytest.mark.wheels
@pytest.mark.parametrize(("version", "env", "runner", "met"), [
    ("0.22.1", [], "v1", NO),  # its v1 runner reads eagle_config's ids: on an H100 it ran the drafter as trained
    ("0.22.1", ["VLLM_USE_V2_MODEL_RUNNER=1"], "v2", YES),  # its v2 runner does not: the default ids
    ("0.19.1", [], "v1", YES),  # the v1 runner reads eagle_config only from 0.22.0
])
def test_the_runner_the_launch_selects_is_the_one_judged(tmp_path: Path, version: str, env: list[str], runner: str,
                                                          met: str) -> None:
    """Found on a GPU (docs/gpu-proof.md, vLLM 0.22.1): doctor judged the capture of the runner a launch
    uses by default whatever the environment selected, and took every drafter with ids only in
    eagle_config as meeting eagle3-config-aux-ids, although 0.22.1's v1 runner reads them: a no-go for
    a launch that ran as trained. The runner the launch's environment selects is the one judged, and
    the family is met where that runner, as published, captures other layers than trained."""
    launch = Launch("vllm")
    launch.tp, launch.env = 1, env
    launch.drafter.update(aux=[4, 30, 56], top=None)
    doc = _doctor(wheels.tree("vllm", version), launch, tmp_path)
    capture = {f["code"]: f for f in doc["findings"]}["aux.capture"]
    assert f"{runner} runner (the one this launch uses)" in capture["message"], capture
    assert capture["level"] == ("problem" if met == YES else "ok"), capture
    family = next(fm for fm in doc["families"] if fm["id"] == "vllm/eagle3-config-aux-ids")
    assert family["meets"] == met, family
