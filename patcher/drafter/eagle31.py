"""The EAGLE 3.1 switches a drafter may turn on, and what a release does with each: honoured, refused
at load (our guards), or dropped in silence. Asked by the drafter check (``release_checks``) and
the fix (``fix_plan``); each engine's facts come from its module (``DrafterReading``) or from the
``[[drafter_fact]]`` entries of the family it names.

`norm_before_fc` (one RMSNorm over the concatenated aux states, weight `input_norm.weight`),
`fc_norm` (an RMSNorm per aux state, `fc_norm.{i}.weight`) and `norm_output` (the post-norm state
fed to the next draft step; no weight).

Where an engine's module names a facts family (vLLM: the [[drafter_fact]] entries of
vllm/eagle31-switches, per switch, config path and drafter class, what each release does as
published and patched), those entries are the one source; "read since" is the first release in
releases.txt whose entry is `published = "honoured"` (``_honoured_since``). Otherwise (SGLang) its
table: the first release whose drafter class (llama_eagle3.py / kimi_k25_eagle3.py) reads each
one; a switch missing from a class's table is read by no release.
tests/test_drafter_release.py proves both on every cached wheel.
"""

from __future__ import annotations

from packaging.version import Version

from patcher.core import matrix
from patcher.core.plan import OK_STATES
from patcher.engine_specs.base import contains
from patcher.release.release import FamilyState, Release

EAGLE31_SWITCHES = ("norm_before_fc", "fc_norm", "norm_output")
SWITCH_WEIGHTS = {"norm_before_fc": "input_norm.", "fc_norm": "fc_norm."}
# SpecForge 0.2.0 spells another switch `norm_output`. Its Llama drafter (the only EAGLE-3 class it
# trains, HF layout) reads `getattr(config, "norm_output", True)` and applies the final norm before
# lm_head only when true (specforge/modeling/draft/llama3_eagle.py:1690, :1773), while its training
# loop feeds the next draft step the pre-norm backbone output whatever the key says
# (specforge/algorithms/eagle3/model.py:386-400). So its `true` (and its default, no key) is plain
# EAGLE-3, and its `false` is an lm_head on the un-normed state, which no engine release runs. Both
# engines read the key as EAGLE 3.1's (the post-norm state fed to the next step). SpecForge took
# EAGLE 3.1's meaning in sgl-project/SpecForge#879, after 0.2.0. It has no norm_before_fc: a config
# or checkpoint with it is not a SpecForge 0.2.0 drafter. tests/support/real_drafters.py checks
# this on the wheel.
SPECFORGE_NORM_OUTPUT_REF = "sgl-project/SpecForge#879"
SPECFORGE_NORM_OUTPUT = ("SpecForge 0.2.0 and earlier write norm_output for another switch: the final norm "
                         "before lm_head (on by default), with the pre-norm state fed to the next draft step")
HONOURED, REFUSED, DROPPED = "honoured", "refused", "dropped"


def _honoured_since(fam: FamilyState, switch: str, path: str, drafter: str) -> Version | None:
    """The first covered release whose [[drafter_fact]] for (switch, path, class) says the release
    as published honours it; None: none does."""
    honoured = [f.versions for f in fam.family.drafter_facts
                if (f.key, f.path, f.drafter) == (switch, path, drafter) and f.published == HONOURED]
    releases = sorted(Version(v) for v in matrix.releases(fam.family.engine, fam.family.folder.parent.parent))
    return next((v for v in releases if any(contains(spec, v) for spec in honoured)), None)


def switch_read_since(release: Release, switch: str, drafter_class: str, speculators_format: bool) -> Version | None:
    """The first release that runs the switch for this drafter as published; None: no release does."""
    rules = release.spec.drafter_rules
    if rules.eagle31_facts_family:
        fam = release.family(rules.eagle31_facts_family)
        if fam is None:
            return None
        first = _honoured_since(fam, switch, "config", rules.built_classes[drafter_class])
        if first is None or not speculators_format:
            return first
        # A speculators drafter runs it once the converter carries it (the entries measure that
        # through the Llama class it becomes) and the class the config names reads it.
        carried = _honoured_since(fam, switch, "speculators", rules.built_classes["llama"])
        return None if carried is None else max(first, carried)
    read = rules.eagle31_read_since.get(drafter_class, {}).get(switch)
    if read is None or speculators_format:  # an engine without such facts (SGLang) reads no speculators config
        return None
    return Version(read)


def switch_outcome(release: Release, switch: str, drafter_class: str, speculators_format: bool,
                   has_weights: bool, specforge_possible: bool = False) -> tuple[str, str] | None:
    """(honoured / refused / dropped, why) for a switch the drafter turns on; None: release unknown.
    ``specforge_possible``: the drafter's norm_output may be SpecForge 0.2.0's switch (SPECFORGE_NORM_OUTPUT),
    which our guards leave alone (vllm W1-W4, sglang g1 refuse it only beside norm_before_fc): as published."""
    if release.version is None:
        return None
    guarded = not (switch == "norm_output" and specforge_possible)
    from_manifest = _switch_fact(release, switch, drafter_class, speculators_format, guarded)
    if from_manifest is not None:
        return from_manifest
    first = switch_read_since(release, switch, drafter_class, speculators_format)
    if first is not None and release.version >= first:
        return HONOURED, f"read since {release.name} {first}"
    guard = release.spec.drafter_rules.eagle31_guard
    if guarded and release.fixed(guard):
        return REFUSED, f"{release.name}/{guard} refuses it at load"
    prefix = SWITCH_WEIGHTS.get(switch)
    if has_weights and prefix is not None:
        return release.spec.drafter_rules.switch_weights(release, switch, drafter_class, prefix)
    return DROPPED, "nothing reads it, and no weight trips the loader"


_FACT_OUTCOME = {"honoured": HONOURED, "refused": REFUSED, "raises-at-load": REFUSED,
                 "dropped": DROPPED, "unused": DROPPED}


def _switch_fact(release: Release, switch: str, drafter_class: str, speculators_format: bool, guarded: bool = True):
    """What the family's [[drafter_fact]] entries (read from the wheels) say the release does with
    the switch, as published or with the family applied (``guarded``: where the family's check
    applies to this drafter); None where they say nothing."""
    rules = release.spec.drafter_rules
    facts_family = rules.eagle31_facts_family
    fam = release.family(facts_family) if facts_family else None
    if fam is None or release.version is None:
        return None
    cls = rules.built_classes[drafter_class]
    path = "speculators" if speculators_format else "config"
    for fact in fam.family.drafter_facts:
        if (fact.key, fact.path) == (switch, path) and fact.drafter == cls and contains(fact.versions, release.version):
            left_alone = fam.state in OK_STATES and not guarded and fact.patched == "refused"
            fixed = fam.state in OK_STATES and not left_alone
            state = fact.patched if fixed else fact.published
            # the family refuses a speculators config when it is converted, an HF config (the MLA
            # class) when the drafter class is built, before its weights load
            refused = "refused at config load" if path == "speculators" else "refused when the drafter is built"
            how = {"honoured": "read", "refused": refused, "raises-at-load": "stops the load on it",
                   "dropped": "dropped in silence", "unused": "loaded but never applied"}[state]
            where = (f"with {release.name}/{facts_family} {fam.state}" if fixed else
                     f"as published: {release.name}/{facts_family} leaves a key SpecForge 0.2.0 may have meant alone"
                     if left_alone else "as published")
            return _FACT_OUTCOME[state], f"{release.label()} {how} ({where})"
    return None
