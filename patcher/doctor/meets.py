"""Which of an install's unready families this launch meets (issue 54).

``verify`` answers "is the install patched"; ``doctor``'s promise is "will this launch run the
drafter as trained". A family that is pending, lost, refused or in conflict changes some launches
and not others: the SM120 fusion gate matters to a launch that asks for the fusion on SM 12.x, the
fused-allreduce capture to EAGLE-3 at TP > 1 with the fusion on, the drafter-keys loader to a
checkpoint the published loader does not load as trained. Each family states which launches it
changes, once, in its manifest (``[launch] meets = [...]``: every condition must hold); the
conditions are read from what doctor already has: the release's parse of the line, the target's
config, the drafter check's and the engine's own findings, the GPU when it can be seen.

A condition answers yes, no, or depends (something doctor cannot see from here: the target's
config, the GPU of a build host). The verdict (``patcher.doctor.verdict``): a family the launch
meets is a reason for no-go, with why it matters here; one it does not meet is a line and no
reason; one that depends makes the verdict "cannot tell" naming the condition. ``--strict`` keeps
the install-wide verdict. A family that states no conditions is met by every launch.

Conditions, by prefix:
- ``eagle3``: the line runs the engine's EAGLE-3 method with a drafter; ``eagle``: EAGLE or
  EAGLE-3 with a drafter; ``tp>1``;
- ``target:A|B``: the target's architecture is one of these;
- ``finding:C|D``: one of the check's findings with these codes (``keys.*`` matches the prefix) is
  a problem (yes), unknown (depends; a hint too for a code written ``C?``), or absent or ok (no):
  the check has already computed what the release as it stands does to this launch;
- ``flag:--a|--b``: the line gives one of these options (as the release's parser read it);
  ``text:s``: a word of the line contains ``s`` (an option's JSON value);
- ``drafter:explicit-ids|eagle-config-ids-only|switch``: a fact of the drafter's config.json;
- ``gpu:12``: the GPUs' compute capability major is this (``--gpu``, else ``nvidia-smi``; unseen:
  depends).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from patcher.core.plan import OK_STATES, Status
from patcher.engine_specs.base import LaunchContext
from patcher.findings import HINT, OK, PROBLEM, UNKNOWN, Finding, hint, unknown
from patcher.installer.actions import Report

YES, NO, DEPENDS = "yes", "no", "depends"


@dataclass(frozen=True)
class Meet:
    answer: str  # yes | no | depends
    why: str  # what of the launch decides it, in a few words (the finding's code, not its message)


@dataclass(frozen=True)
class MeetContext:
    """Everything the conditions read: the engine's launch context, the findings so far (the
    drafter check's and the launch checks'), the GPU's compute capability major (None: unseen)."""

    launch: LaunchContext
    findings: tuple[Finding, ...]
    gpu: str | None
    as_given: tuple[str, ...]  # the server's arguments as written (text: conditions)
    drafter: Any = None  # the drafter's config (patcher.drafter.configs.DrafterConfig), None: none read


def meets(conditions: tuple[str, ...], ctx: MeetContext) -> Meet:
    """All conditions together: no as soon as one is no; else depends if one depends; else yes."""
    if not conditions:
        return Meet(YES, "the family states no launch it spares: every launch meets it")
    said = [condition(c, ctx) for c in conditions]
    for answer in (NO, DEPENDS):
        hit = [m for m in said if m.answer == answer]
        if hit:
            return Meet(answer, hit[0].why)
    return Meet(YES, "; ".join(m.why for m in said))


def condition(name: str, ctx: MeetContext) -> Meet:
    cmd, spec = ctx.launch.cmd, ctx.launch.release.spec
    kind, _, arg = name.partition(":")
    if name in ("eagle3", "eagle"):
        eagle, eagle3 = (m.upper() for m in spec.launch_rules.eagle_methods)
        method = (cmd.method or "").upper()
        wanted = {eagle3} if name == "eagle3" else {eagle, eagle3}
        if method in wanted and cmd.drafter is not None:
            return Meet(YES, f"the line runs {method} with a drafter")
        return Meet(NO, f"the line runs no {'EAGLE-3' if name == 'eagle3' else 'EAGLE'} drafter"
                        + (f" (method {method})" if method else ""))
    if name == "tp>1":
        tp = cmd.tp or 1
        return Meet(YES if tp > 1 else NO, f"TP {tp}")
    if kind == "target":
        target = ctx.launch.target
        if target is None:
            return Meet(DEPENDS, "the target's config was not read (a local folder with config.json)")
        archs = set(target.architectures)
        named = archs & set(arg.split("|"))
        return Meet(YES if named else NO, f"the target is {', '.join(sorted(archs)) or 'of no architecture'}")
    if kind == "finding":
        return _finding(arg.split("|"), ctx.findings)
    if kind == "flag":  # as the release's parser read it, or as written (an option doctor does not rewrite)
        given = [f for f in arg.split("|") if cmd.has(f)
                 or any(w == f or w.startswith(f + "=") for w in ctx.as_given)]
        return Meet(YES if given else NO, f"the line gives {given[0]}" if given else f"the line gives no {arg}")
    if kind == "text":
        says = any(arg in word for word in ctx.as_given)
        return Meet(YES if says else NO, f"the line {'says' if says else 'does not say'} {arg}")
    if kind == "drafter":
        return _drafter(arg, ctx.drafter)
    if kind == "gpu":
        if ctx.gpu is None:
            return Meet(DEPENDS, f"whether the GPUs are SM {arg}.x (not seen here: pass --gpu)")
        return Meet(YES if ctx.gpu == arg else NO, f"the GPUs are SM {ctx.gpu}.x")
    # A condition this patcher does not know (a newer manifest): never spared on a guess.
    return Meet(YES, f"condition {name!r} is not one patcher knows: the family is taken as met")


def _drafter(what: str, d: Any) -> Meet:
    """A fact of the drafter's config.json: ``explicit-ids`` (it names its aux layer ids),
    ``eagle-config-ids-only`` (only in ``eagle_config``), ``switch`` (it turns an EAGLE 3.1 switch on)."""
    if d is None:
        return Meet(NO, "no drafter config was read")
    if what == "explicit-ids":
        ids = list(d.aux_layer_ids or [])
        return Meet(YES if ids else NO, f"the drafter names aux layer ids {ids}" if ids else "the drafter names no ids")
    if what == "eagle-config-ids-only":
        only = d.eagle_aux_ids is not None and d.top_aux_ids is None
        return Meet(YES if only else NO, "the drafter states its aux ids only in eagle_config" if only else
                    "the drafter states no aux ids in eagle_config alone")
    if what == "switch":
        on = sorted(d.switches)
        return Meet(YES if on else NO, f"the drafter turns on {', '.join(on)}" if on else "no EAGLE 3.1 switch is on")
    return Meet(YES, f"drafter condition {what!r} is not one patcher knows: the family is taken as met")


def _finding(codes: list[str], findings: tuple[Finding, ...]) -> Meet:
    """A code ending in ``?`` counts its hint as depends too: a check that says hint where it could
    not read what decides (the fusion check without the target's config)."""
    unsure = {c[:-1] for c in codes if c.endswith("?")}
    codes = [c.rstrip("?") for c in codes]

    def matches(code: str) -> bool:
        return any(code == c or (c.endswith(".*") and code.startswith(c[:-1])) for c in codes)

    found = [f for f in findings if matches(f.code)]
    for level, answer, said in ((PROBLEM, YES, "a problem"), (UNKNOWN, DEPENDS, "not proven")):
        hit = next((f for f in found if f.level == level), None)
        if hit is not None:
            return Meet(answer, f"{hit.code} is {said} here")
    hint = next((f for f in found if f.level == HINT and f.code in unsure), None)
    if hint is not None:
        return Meet(DEPENDS, f"{hint.code} could not be judged here")
    ok = next((f for f in found if f.level == OK), None)
    return Meet(NO, f"{ok.code} is ok here" if ok else f"nothing of {' or '.join(codes)} applies here")


@dataclass(frozen=True)
class FamilyMeet:
    """An unready family (pending, lost, refused, conflict...) and whether this launch meets it."""

    status: Status
    meet: Meet

    @property
    def said(self) -> str:
        """verify's phrase for it ("sglang/x is pending")."""
        fid = self.status.family.id
        return next((r for r in Report("verify", None, [self.status]).reasons(False)  # type: ignore[arg-type]
                     if r.startswith(fid + " ")), f"{fid} is {self.status.state}")


def judge(statuses: list[Status], ctx: MeetContext, strict: bool,
          apply_command: str) -> tuple[list[FamilyMeet], list[Finding]]:
    """Each unready family and whether this launch meets it; with the lines doctor prints for those
    it does not meet (a hint) and those that depend on what is not seen here (unknown: never go).
    With ``strict`` every family is a reason: no line."""
    families, lines = [], []
    for status in statuses:
        if status.state in OK_STATES:
            continue
        stated = status.family.meets
        fm = FamilyMeet(status, meets(stated, ctx) if stated is not None
                        else Meet(YES, "the family states no launch it spares"))
        families.append(fm)
        code = f"family.{status.family.name}"
        if strict or fm.meet.answer == YES:
            continue
        if fm.meet.answer == NO:
            lines.append(hint(code, f"{fm.said}; this launch does not meet it: {fm.meet.why}",
                              hint=f"'{apply_command}' applies it anyway"))
        else:
            lines.append(unknown(code, f"{fm.said}; whether this launch meets it depends on {fm.meet.why}",
                                 hint=f"'{apply_command}' makes it no question"))
    return families, lines
