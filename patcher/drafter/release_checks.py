"""``drafter check`` findings about the engine release rather than the checkpoint: what
``patcher verify`` says about each family there, whether its registry knows the drafter's and
the target's architecture, and which target layers it captures for this drafter.

Every engine fact comes from ``facts`` (family states, two documented tables); nothing here
compares versions.

Over 300 lines: one function per finding family (setup, registry, aux ids, capture, switches, RoPE),
each short; they share the wording helpers at the bottom.
"""

from __future__ import annotations

from dataclasses import replace

from patcher import engine_specs, program
from patcher.core.plan import State
from patcher.drafter import eagle31, facts, rope
from patcher.drafter.configs import EAGLE3_LLAMA, SPECULATORS, DrafterConfig, TargetConfig
from patcher.findings import HINT, UNKNOWN, Finding, hint, ok, problem, unknown
from patcher.release.release import Release

# Families that do not change how a drafter runs: reported as hints, never as problems.
NOT_ABOUT_THE_DRAFTER = ("sm120-allreduce-fusion",)
MLA_DRAFTERS = ("Eagle3DeepseekV2ForCausalLM", "Eagle3DeepseekV3ForCausalLM")


def _about(family: str, drafter: DrafterConfig | None) -> bool:
    """Whether the family changes how this drafter runs: reading ids from eagle_config matters only
    to a drafter that states its ids there alone (aux.capture says how), the EAGLE 3.1 switches
    only to a drafter that turns one on (eagle31.* says how)."""
    if family in NOT_ABOUT_THE_DRAFTER:
        return False
    if drafter is None:
        return True
    if family == facts.CONFIG_AUX_IDS_FAMILY:
        return drafter.eagle_aux_ids is not None and drafter.top_aux_ids is None
    if family == facts.EAGLE31_FAMILY:  # vLLM's: a drafter that turns no switch on runs as published
        return bool(drafter.switches)
    return True


def check_setup(release: Release, drafter: DrafterConfig | None = None) -> list[Finding]:
    """One finding per family, with what ``patcher verify`` would say about it: a problem when
    the family changes how this drafter runs, a hint otherwise."""
    out: list[Finding] = []
    for fam in release.families:
        code = f"setup.{fam.family.name}"
        if fam.ok:
            out.append(ok(code, f"{fam.family.id}: {fam.state} ({fam.detail})"))
            continue
        if fam.state is State.REFUSED:
            todo = f"use {release.name} {fam.use} or newer"
        elif fam.state in (State.PENDING, State.LOST):
            todo = f"run '{release.apply_command()}'"
        else:
            todo = fam.hint
        level = problem if _about(fam.family.name, drafter) else hint
        out.append(level(code, f"{fam.family.id} is {fam.state} on {release.label()}: {fam.detail}",
                         wanted=f"applied or upstream (what '{program.command('verify')}' accepts)", found=fam.state,
                         hint=todo))
    return out


_PROVEN_RELEASE = "use a release listed in VERSIONS.md: the releases whose files these rules are proven on"
_ASK_THE_RELEASE = ("run the check where the engine imports, with --target (--python or --site of its "
                    f"environment): its own code answers there; or {_PROVEN_RELEASE[0].lower()}{_PROVEN_RELEASE[1:]}")


def unproven(release: Release | None, findings: list[Finding], askable: bool = False) -> list[Finding]:
    """A rule's findings as they may be said on ``release``: as they are where the wheel tests prove
    the rule on its published files (``Release.proven``); elsewhere ``unknown``, the rule's word kept
    as what to expect. Hints stay hints: they decide nothing. ``askable``: the release's own code
    answers this where the engine imports (the loader child's capture), so the hint says so; the
    other rules (registry, RoPE, switches) have no such answer, and their hint names only what works."""
    if release is None or release.version is None or release.proven:
        return findings
    why = release.unproven_why()
    return [f if f.level in (HINT, UNKNOWN) else
            replace(f, level=UNKNOWN, message=f"{why}, and its own code was not asked; the rule says: {f.message}",
                    found=f.found or "a rule's word, not the release's",
                    hint=f.hint if f.level != "ok" and f.hint else _ASK_THE_RELEASE if askable else _PROVEN_RELEASE)
            for f in findings]


def _registry_finding(code: str, what: str, arch: str, release: Release) -> Finding:
    since = facts.registered_since(release, arch)
    known = facts.registers(release, arch)
    if known is None and not release.spec.registered_since:
        return hint(code, f"{release.spec.title}'s module states no model registry: whether {release.label()} "
                    f"registers {arch} is not known", found=release.label())
    if known is None:
        return hint(code, f"{release.label()} is older than the releases this check knows; "
                    f"whether it registers {arch} is not known", found=release.label(), hint="see VERSIONS.md")
    if known:
        return ok(code, f"{release.label()} registers {what} {arch}")
    todo = (f"use {release.name} {since} or newer" if since is not None
            else f"no {release.name} release registers it")
    return problem(code, f"{release.label()} has no model class for {what} {arch}: the server stops at load",
                   wanted=f"a {release.name} release that registers {arch}", found=f"{release.label()}", hint=todo)


def check_target_class(release: Release, target: TargetConfig | None) -> list[Finding]:
    if target is None or release.version is None or not target.architectures:
        return []
    arch = target.architectures[0]
    if arch not in facts.MLA_TARGETS:
        # Kimi-K3 on SGLang 0.5.17+ loads both models, then stops at the draft head's set-up (its class
        # has neither set_eagle3_layers_to_capture nor get_embed_and_head): a class the facts do not
        # cover is never guessed to capture anything.
        return [unknown("target.architecture", f"target architecture {arch}: none of what {release.label()} does "
                        "with it under EAGLE-3 (whether it captures aux hidden states, which layers) has been read "
                        "by this check; the Kimi-K2 / K2.5 patch set is written for DeepseekV3ForCausalLM / "
                        "KimiK25ForConditionalGeneration", found=arch,
                        hint="test the launch on a GPU before relying on it, or file an issue with the config")]
    return [_registry_finding("target.architecture", "the target's", arch, release)]


def check_drafter_class(d: DrafterConfig, release: Release | None) -> list[Finding]:
    """The drafter's architecture against the release's registry (EAGLE-3 configs only)."""
    if d.format != EAGLE3_LLAMA:
        return []
    archs = ", ".join(d.architectures) or "(none)"
    mla = next((a for a in d.architectures if a in MLA_DRAFTERS), None)
    if release is None or release.version is None:
        if mla:
            where = [f"from {s.registered_since[mla]}" if mla in s.registered_since else
                     "under no release (only " + ", ".join(a for a in MLA_DRAFTERS if a in s.registered_since) + ")"
                     for s in engine_specs.ALL]
            return [hint("config.format", f"architectures {archs}: an MLA EAGLE-3 drafter; "
                         + ", ".join(f"{s.title}{' registers it' if i == 0 else ''} {w}"
                                     for i, (s, w) in enumerate(zip(engine_specs.ALL, where))),
                         hint="pass --engine and --engine-version (or --python / --site) to check your release")]
        if "LlamaForCausalLMEagle3" in d.architectures:
            return [ok("config.format", "LlamaForCausalLMEagle3 config, the name both engines register")]
        return [hint("config.format", f"architectures {archs}: vLLM reads it, SGLang only knows LlamaForCausalLMEagle3",
                     wanted='"architectures": ["LlamaForCausalLMEagle3"]', found=archs)]
    if all(facts.registers(release, a) is None for a in d.architectures):
        return [_registry_finding("config.format", "the drafter's", d.architectures[0], release)]
    known = [a for a in d.architectures if facts.registers(release, a)]
    by_model_type = facts.reading(release).mla_model_type
    if known and mla and by_model_type is not None:
        return [by_model_type(d, release, archs)]
    if known:
        return [ok("config.format", f"architectures {archs}, registered by {release.label()}")]
    arch = mla or (d.architectures[0] if d.architectures else "LlamaForCausalLMEagle3")
    since = facts.registered_since(release, arch)
    table = release.spec.registered_since
    registered_mla = [a for a in MLA_DRAFTERS if a in table]
    if since is None and mla and registered_mla:
        todo = (f'{release.spec.title} registers the MLA drafter only as "{registered_mla[0]}" '
                f"(from {table[registered_mla[0]]}): rename the architecture")
    elif since is not None:
        todo = f"use {release.name} {since} or newer"
    else:
        todo = '"architectures": ["LlamaForCausalLMEagle3"]'
    return [problem("config.format", f"{release.label()} has no model class for architectures {archs}: "
                    "the server stops at load", wanted=f"an architecture {release.label()} registers",
                    found=archs, hint=todo)]


def _ids_text(ids: list[int] | None, n: int | None) -> str:
    return str(ids) if ids is not None else (str(facts.default_aux_layer_ids(n)) if n is not None else "the default")


def check_aux_ids(d: DrafterConfig, t: TargetConfig | None) -> list[Finding]:
    """The ids the drafter states: in range, what they mean, and the two keys agreeing."""
    n = t.num_hidden_layers if t is not None else None
    ids = list(d.aux_layer_ids) if d.aux_layer_ids else None
    out: list[Finding] = []
    top, in_eagle = d.top_aux_ids, d.eagle_aux_ids
    if top is not None and in_eagle is not None and list(top) != list(in_eagle):
        out.append(problem("aux.ids_keys", f"eagle_aux_hidden_state_layer_ids differ: {list(top)} at the top level, "
                           f"{list(in_eagle)} in eagle_config. vLLM takes the top-level list (it wins on both "
                           "runners), SGLang reads only eagle_config: the two engines run different drafters",
                           wanted="one list, the same in both places", found=f"top {list(top)}, eagle_config "
                           f"{list(in_eagle)}", hint="keep the list the drafter was trained on in both places"))
    if ids is not None and n is not None:
        bad = [i for i in ids if not 0 <= i < n]
        if bad:
            out.append(problem("aux.layer_ids", f"aux layer ids {ids} reach outside the target's {n} layers",
                               wanted=f"ids in 0..{n - 1}", found=str(ids)))
            return out
    trained, meaning = facts.trained_layers(d.format == SPECULATORS, ids)
    if meaning:
        out.append(ok("aux.layer_ids", f"aux layer ids {meaning}"))
    elif ids is not None and n is not None:
        out.append(ok("aux.layer_ids", f"aux layer ids {ids} are within the target's {n} layers"))
    elif ids is None and n is not None:
        out.append(ok("aux.layer_ids", f"no explicit aux layer ids: the engine uses "
                      f"{facts.default_aux_layer_ids(n)} for the target's {n} layers"))
    return out


def _modes(cap: facts.Capture) -> str:
    if cap.stops:
        return f"stops at load with an {cap.stops}, before anything is captured"
    if cap.nothing:
        return "captures nothing"
    if cap.graph != cap.eager:
        return f"captures {cap.eager} in eager mode and {cap.graph or '(the default)'} with CUDA graphs"
    return f"captures {cap.eager} in eager and graph mode"


def _matches(cap: facts.Capture | None, want: list[int] | None) -> bool | None:
    if cap is None or want is None:
        return None
    return not cap.nothing and cap.eager == want and cap.graph in (want, [])


ASKED = "asked of the release's own code"


def _as_asked(rule: facts.Capture | None, layers: tuple[int, ...] | str | None,
              release: Release) -> facts.Capture | None:
    """The capture of one runner with the release's own answer in the rule's place. Its code answers
    the eager capture (the runner's reading of the drafter's config, the target's setter); graph
    mode keeps the rule's word where the rule says the CUDA graphs reset the ids, and a load that
    stops or a target that captures nothing stays the rule's (the code then raised, not answered)."""
    if not isinstance(layers, tuple) or (rule is not None and (rule.nothing or rule.stops)):
        return rule
    eager = list(layers)
    if rule is None:
        return facts.Capture(eager, eager, f"{ASKED} in its interpreter")
    graph = eager if rule.graph == rule.eager else rule.graph
    if rule.eager == eager:
        return replace(rule, eager=eager, graph=graph, why=f"{ASKED} in its interpreter: {rule.why}")
    return replace(rule, eager=eager, graph=graph, why=f"{ASKED} in its interpreter; patcher's rule for "
                   f"{release.label()} said {rule.eager} ({rule.why}) and is overruled")


def check_aux_capture(d: DrafterConfig, t: TargetConfig | None, release: Release | None,
                      env: dict[str, str] | None = None,
                      asked: dict[str, tuple[int, ...] | str] | None = None,
                      selected: str | None = None) -> list[Finding]:
    """Which target layers the release captures for this drafter: per engine path (vLLM's
    runners), as the release stands and once 'patcher apply' has run. ``env``: the launch's
    environment (doctor), whose runner is the one judged; None: the runner of a launch that sets none.
    ``asked``: what the release's own code answered in its interpreter (``LoadAnswer.capture``), per
    runner: where it answered, its layers are the eager capture, whatever the rules say; the rules
    stay for what it cannot answer (graph mode, the release once patched, a release not installed).
    ``selected``: the runner doctor decided the launch uses (one decision for the whole launch)."""
    if release is None or release.version is None or not d.use_aux_hidden_state:
        return []
    n = t.num_hidden_layers if t is not None else None
    arch = t.architectures[0] if t is not None and t.architectures else None
    ids = list(d.aux_layer_ids) if d.aux_layer_ids else None
    trained, _ = facts.trained_layers(d.format == SPECULATORS, ids)
    want = trained if trained is not None else (facts.default_aux_layer_ids(n) if n is not None else None)
    top = list(d.top_aux_ids) if d.top_aux_ids is not None else None
    in_eagle = list(d.eagle_aux_ids) if d.eagle_aux_ids is not None else None
    layer_ids = list(d.eagle_layer_ids) if d.eagle_layer_ids is not None else None
    if want is None and layer_ids is not None:
        want = layer_ids  # the only ids the drafter states: what it was trained on, as far as it says
    applied = facts.after_apply(release)
    selects = facts.reading(release).model_runners
    if selects:  # a release with several runners: the default first
        default = selected if selected in facts.runners(release) else facts.default_runner(release, arch, env)
        runners = sorted(facts.runners(release), key=lambda r: r != default)
    else:
        default, runners = "", [""]
    out: list[Finding] = []
    if default == facts.UNKNOWN_RUNNER:
        out.append(hint("aux.capture", f"which model runner a launch of {release.label()} uses is not known here: "
                        "the release picks it by the target's architecture, and the target's config was not read; "
                        "each runner's capture follows", hint="pass --target with the target's local folder"))
    for runner in runners:
        answer = (asked or {}).get(runner)
        now = _as_asked(facts.capture(release, runner, top, in_eagle, arch, n, layer_ids), answer, release)
        later = facts.capture(applied, runner, top, in_eagle, arch, n, layer_ids)
        if isinstance(answer, tuple) and now is not None and later is not None and \
                release.families == applied.families:
            later = now  # nothing to apply: the release as it stands is the release once patched
        if now is None:
            if runner == default and _capture_family_unknown(release, arch):
                out.append(unknown("aux.capture", f"which target layers {release.label()} captures for this drafter "
                                   "cannot be told: its aux-capture family is unknown there and its own code was not "
                                   "asked", found=f"{facts.reading(release).capture_family[0]}: unknown",
                                   hint=_ASK_THE_RELEASE))
            continue
        asked_here = isinstance(answer, tuple)  # the release's own answer: a verdict on any release
        who = release.label()
        if runner == default and len(runners) > 1:
            other = next(r for r in runners if r != default)
            who += (f", {runner} runner (the one this launch uses)" if env is not None else
                    f", {runner} runner (the one this launch uses by default; {selects[other]})")
        elif runner and runner == default:
            who += f", {runner} runner (the only one)"
        elif runner:
            who += f", {runner} runner (if the launch selects it)"
        message = f"{who} {_modes(now)} ({now.why})"
        if later is not None and (later.eager, later.graph, later.nothing) != (now.eager, now.graph, now.nothing):
            message += f"; after '{release.apply_command()}' it {_modes(later)} ({later.why})"
        elif later is not None and later.nothing and later.why != now.why and not later.stops:
            message += f"; after '{release.apply_command()}' it still captures nothing ({later.why})"
        good, good_later = _matches(now, want), _matches(later, want)
        code = "aux.capture" if runner == default else f"aux.capture.{runner}"
        if good is None or good or want is None:
            out += [ok(code, message)] if asked_here else unproven(release, [ok(code, message)], askable=True)
            continue
        trained_text = f"; the drafter was trained on {_ids_text(want, n)}"
        found = (f"the load stops ({now.stops})" if now.stops else "nothing" if now.nothing else
                 f"eager {now.eager}, graph {now.graph or '(default, N unknown)'}")
        level = problem if runner == default else hint
        said = level(code, message + trained_text, wanted=f"capture {want} in both modes", found=found,
                     hint=_capture_hint(release, d, want, n, good_later))
        out += [said] if asked_here else unproven(release, [said], askable=True)
    return out


def _capture_family_unknown(release: Release, arch: str | None) -> bool:
    family, targets = facts.reading(release).capture_family
    return (arch is None or arch in targets) and release.state(family) is State.UNKNOWN


def _capture_hint(release: Release, d: DrafterConfig, want: list[int], n: int | None,
                  fixed_by_apply: bool | None) -> str:
    if fixed_by_apply:
        return f"run '{release.apply_command()}': the patched release captures them"
    rules, title = facts.reading(release), release.spec.title
    if rules.ids_keys[0] == "top-level" and d.top_aux_ids is None and d.eagle_aux_ids is not None:
        return (f'state the ids at the top level too ("eagle_aux_hidden_state_layer_ids": {want}), which every '
                f"{title} runner reads: {_fix_hint(release)}")
    if rules.ids_keys == ("eagle_config",) and d.eagle_aux_ids is None and d.top_aux_ids is not None:
        return f"{title} reads ids only from eagle_config: state them there too: {_fix_hint(release)}"
    shifts = bool(rules.aux_ids_as_published)  # explicit ids are shifted as published, the default is not
    if n is not None and want == facts.default_aux_layer_ids(n) and shifts:
        return "omit eagle_aux_hidden_state_layer_ids: they equal the engine default, which it captures as given"
    if not shifts:
        return f'state the trained layers as given ("eagle_aux_hidden_state_layer_ids": {want}): {_fix_hint(release)}'
    rule = facts.shift_rule(release)
    if rule is not None and rule[1] == "first-is-1":
        return f"no SGLang rule explains this capture; file an issue with '{program.command('drafter check --json')}'"
    return "SGLang 0.5.13 and later take explicit ids not starting at 1 as given, in both modes"


def _fix_hint(release: Release) -> str:
    where = release.located_by or f" --engine-version {release.version}"
    return program.command(f"drafter fix DRAFTER --out NEW --engine {release.name}{where}")


def check_switches(tensor_names: list[str], d: DrafterConfig, release: Release | None) -> list[Finding]:
    """EAGLE 3.1 switches: per release and drafter class, honoured, refused at load, or dropped in
    silence; and weights of a switch the config leaves off (trained with it, run without it)."""
    names = [n.removeprefix("model.") for n in tensor_names]
    drafter_class = "mla" if any(a in MLA_DRAFTERS for a in d.architectures) else "llama"
    speculators = d.format == SPECULATORS
    out: list[Finding] = []
    for switch, prefix in eagle31.SWITCH_WEIGHTS.items():
        weights = [n for n in names if n.startswith(prefix)]
        if weights and switch not in d.switches:
            out.append(problem(f"eagle31.{switch}", f"{len(weights)} {prefix}* tensor(s), but the config does not set "
                               f"{switch}: the drafter was trained with it and the engine runs it without",
                               wanted=f'"{switch}": true', found=f"{switch} unset or false; e.g. {weights[0]}"))
    specforge_possible = _may_be_specforge_norm_output(names, d, drafter_class)
    if specforge_possible and "norm_output" in d.switches_off:
        out.append(hint("eagle31.norm_output", "norm_output is false: every engine release reads it as EAGLE 3.1's "
                        "switch, off (the next draft step gets the pre-norm state, lm_head the normed one). "
                        f"{eagle31.SPECFORGE_NORM_OUTPUT}: their false trains lm_head on the un-normed state, which "
                        "no engine release runs",
                        hint="trained with SpecForge 0.2.0 or earlier and norm_output false: retrain with it "
                        "true or unset; trained otherwise: nothing to do"))
    for switch in d.switches:
        weight_prefix = eagle31.SWITCH_WEIGHTS.get(switch)
        has_weights = weight_prefix is not None and any(n.startswith(weight_prefix) for n in names)
        if release is None or release.version is None:
            out.append(hint(f"eagle31.{switch}", f"{switch} is on (EAGLE 3.1): whether the engine runs it depends "
                            "on the release", hint="pass --engine and --engine-version (or --python / --site)"))
            continue
        either = specforge_possible and switch == "norm_output"
        now = eagle31.switch_outcome(release, switch, drafter_class, speculators, has_weights, either)
        later = eagle31.switch_outcome(facts.after_apply(release), switch, drafter_class, speculators, has_weights,
                                     either)
        if now is None:
            continue
        outcome, why = now
        if either and outcome != eagle31.REFUSED:
            out.append(_norm_output_of_unknown_meaning(release, now, later, drafter_class, speculators))
            continue
        what = f"{switch} (EAGLE 3.1) on {release.label()} with this {drafter_class} drafter"
        if speculators:
            what += " (speculators config)"
        if outcome == eagle31.HONOURED:
            out.append(ok(f"eagle31.{switch}", f"{what}: honoured ({why})"))
            continue
        todo = _todo_for_unread(release, switch, drafter_class, speculators)
        if later is not None and later[0] == eagle31.HONOURED:  # our family carries it, as upstream later does
            todo = f"run '{release.apply_command()}'"
        if outcome == eagle31.REFUSED:
            message = f"{what}: refused loudly, the server stops at load ({why})"
        else:
            message = f"{what}: dropped in silence ({why}); the drafter runs without it, unlike training"
        if later is not None and later[0] != outcome:
            after = "it is honoured" if later[0] == eagle31.HONOURED else "it is refused at load"
            message += f"; after '{release.apply_command()}' {after} ({later[1]})"
        out.append(problem(f"eagle31.{switch}", message, wanted=f"a release that runs {switch}",
                           found=release.label(), hint=todo))
    return out


def _todo_for_unread(release: Release, switch: str, drafter_class: str, speculators: bool) -> str:
    since = eagle31.switch_read_since(release, switch, drafter_class, speculators)
    return (f"use {release.name} {since} or newer" if since is not None
            else f"no {release.name} release runs {switch} for this drafter")


def _norm_output_of_unknown_meaning(release: Release, now: tuple[str, str], later: tuple[str, str] | None,
                                    drafter_class: str, speculators: bool) -> Finding:
    """norm_output: true where the checkpoint cannot tell whose switch it is (issue 32, case 3): SpecForge
    0.2.0's (the norm before lm_head; the next step gets the pre-norm state: plain EAGLE-3) or EAGLE 3.1's
    (the post-norm state fed to the next step). What the release runs is a fact; whether that is the
    training is not: unknown, never ok, and our guards refuse neither reading."""
    outcome, why = now
    if outcome == eagle31.HONOURED:
        runs = ("the next draft step gets the post-norm state (EAGLE 3.1): as speculators, TorchSpec and SpecForge "
                f"after {eagle31.SPECFORGE_NORM_OUTPUT_REF} train it, unlike a SpecForge 0.2.0 drafter")
        todo_31 = "nothing to do"
    else:
        runs = ("the next draft step gets the pre-norm state (plain EAGLE-3): as SpecForge 0.2.0 and earlier train "
                "it, unlike an EAGLE 3.1 drafter")
        todo_31 = _todo_for_unread(release, "norm_output", drafter_class, speculators)
    if later is not None and later[0] == outcome:
        runs += f"; the same after '{release.apply_command()}', whose guards leave this key alone"
    return unknown("eagle31.norm_output",
                   f"norm_output: true on {release.label()} ({why}): {runs}. {eagle31.SPECFORGE_NORM_OUTPUT}; "
                   "EAGLE 3.1 trainers mean the post-norm state fed on. This checkpoint cannot tell which "
                   "(no norm_before_fc, which SpecForge 0.2.0 never writes), so whether it runs as trained is unknown",
                   wanted="a config whose norm_output has one meaning", found='"norm_output": true, no norm_before_fc',
                   hint="trained with SpecForge 0.2.0 or earlier: delete norm_output from config.json (its default "
                   f"is the same) and every release runs it as trained; trained for EAGLE 3.1: {todo_31}")


def _may_be_specforge_norm_output(names: list[str], d: DrafterConfig, drafter_class: str) -> bool:
    """Whether the drafter's norm_output may be SpecForge 0.2.0's other switch (eagle31.SPECFORGE_NORM_OUTPUT):
    the HF-layout Llama drafter SpecForge writes, without norm_before_fc, which SpecForge 0.2.0 never trains."""
    if d.format == SPECULATORS or drafter_class != "llama" or "norm_before_fc" in d.switches:
        return False
    return not any(n.startswith(eagle31.SWITCH_WEIGHTS["norm_before_fc"]) for n in names)


def check_rope(d: DrafterConfig, release: Release | None) -> list[Finding]:
    """The RoPE the release runs the drafter with, read as its own transformers reads config.json."""
    if release is None or (d.format == SPECULATORS and not facts.reads_speculators_config(release)):
        return []  # a config the release cannot read at all: config.format says so
    trained = rope.trained_rope(d.rope_theta, d.rope_scaling, d.rope_parameters)
    read = rope.rope_as_read(release, d.rope_theta, d.rope_scaling, d.rope_parameters)
    if read is None:
        return []
    if read == trained:
        return [ok("config.rope", f"{release.label()} reads the RoPE the drafter was trained with: rope_theta "
                   f"{trained['rope_theta']:g}, {trained['rope_type']}")]
    return [problem("config.rope", f"{release.label()} reads config.json with transformers 4, which knows only "
                    f"rope_theta and rope_scaling: it runs the drafter at {read} instead of the trained {trained} "
                    "(from rope_parameters), without a message",
                    wanted=f"rope_theta and rope_scaling stating {trained}", found=str(read),
                    hint=f"write the legacy keys: {_fix_hint(release)}")]


def check_use_aux(ckpt_fc_cols: int | None, d: DrafterConfig, target_hidden: int | None) -> list[Finding]:
    """``use_aux_hidden_state: false`` feeds the drafter one layer and skips fc in silence."""
    if d.use_aux_hidden_state:
        return []
    if ckpt_fc_cols is not None and target_hidden and ckpt_fc_cols > target_hidden:
        k = ckpt_fc_cols // target_hidden
        return [problem("config.use_aux_hidden_state",
                        f"eagle_config.use_aux_hidden_state is false, but fc.weight takes {ckpt_fc_cols} = "
                        f"{k} x {target_hidden} features: the engine captures no aux layers, feeds the drafter the "
                        "last layer only and skips fc without a message",
                        wanted='"use_aux_hidden_state": true', found='"use_aux_hidden_state": false')]
    return [ok("config.use_aux_hidden_state", "use_aux_hidden_state is false and fc does not fuse several layers: "
               "a drafter trained on the last layer only")]

