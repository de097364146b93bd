"""``drafter fix``, the pipeline: read the drafter, plan the copy (``fix_plan``), write and verify
it (``fix_copy``), then check the copy as the engine will read it. Returns what happened; the
CLI prints it.

What the rewrite cannot mend stays a problem (``still_wrong``): renaming keys or rewriting
config.json changes how a fact is described, never whether the engine runs the drafter as trained.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from patcher import engine_specs
from patcher.drafter.checkpoint import Checkpoint, read_checkpoint, read_config
from patcher.drafter.checks import check_drafter
from patcher.drafter.configs import parse_drafter_config, parse_target_config
from patcher.drafter.fix_copy import FixResult, Progress, refuse_bad_out, write_fix
from patcher.drafter.fix_plan import FixPlan, plan_fix
from patcher.errors import DrafterInputError
from patcher.findings import HINT, PROBLEM, Finding
from patcher.release.release import Release


@dataclass(frozen=True)
class FixOutcome:
    source: Checkpoint
    plan: FixPlan
    written: FixResult | None  # None: nothing needed fixing, nothing was written
    remaining: list[Finding]  # problems of the copy (or, with nothing written, of the drafter as it is)


def fix_drafter(drafter: Path, out: Path, target: Path | None, release: Release | None,
                progress: Progress | None = None) -> FixOutcome:
    if release is None:
        raise DrafterInputError("fix needs to know the engine",
                                wanted=f"--engine {'|'.join(engine_specs.NAMES)} --engine-version V",
                                found="no engine named and none installed")
    if release.spec.drafter is None:  # nothing says what this engine reads: a copy would be a guess
        readers = [s.name for s, _ in engine_specs.DRAFTER_READERS]
        raise DrafterInputError(f"fix has nothing to convert to for {release.label()}: its module states no "
                                "EAGLE-3 drafter reading", wanted=f"--engine {'|'.join(readers)}",
                                found=f"--engine {release.name}",
                                hint="the drafter is not checked for this engine; `drafter check` runs the "
                                     "checkpoint's own checks")
    ckpt = read_checkpoint(drafter)
    config = parse_drafter_config(ckpt.config, ckpt.folder / "config.json")
    target_config = parse_target_config(read_config(target), target / "config.json") if target is not None else None
    refuse_bad_out(ckpt, out)  # a usage error, whether or not there is anything to write
    before = check_drafter(ckpt, config, target_config, release, None)
    plan = plan_fix(ckpt, config, release, target_config)
    if not plan.needed:
        # No rename and no config change would help: what remains is not the checkpoint's
        # (e.g. families still to apply).
        return FixOutcome(ckpt, plan, None, [f for f in before if f.level == PROBLEM])
    result = write_fix(ckpt, plan, out, progress=progress)
    copy = read_checkpoint(result.out)
    after = check_drafter(copy, parse_drafter_config(copy.config, copy.folder / "config.json"),
                          target_config, release, None)
    return FixOutcome(ckpt, plan, result, still_wrong(before, after))


def still_wrong(before: list[Finding], after: list[Finding]) -> list[Finding]:
    """Problems of the written copy. A finding that was a problem before the rewrite and only
    reads as a hint after it stays a problem: renaming keys or rewriting config.json changes
    how a fact is described, never whether the engine runs the drafter as trained."""
    was_problem = {f.code for f in before if f.level == PROBLEM}
    return [f if f.level == PROBLEM else replace(f, level=PROBLEM)
            for f in after if f.level == PROBLEM or (f.level == HINT and f.code in was_problem)]
