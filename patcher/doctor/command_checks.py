"""What the command asks for, as the release reads it (how it was read and what the release's
start-up made of it: reading_checks.py): which speculative method runs
(``flags.algorithm`` for methods doctor does not check, ``launch.mtp``), whether
the target and drafter it names exist (``launch.target``, ``launch.drafter``), and the environment
variables the engine module says doctor reads, as the install declares them and as the release
parses the value given (``env.*``); the release facts they rest on (which targets draft with their
own MTP layers, which *_mtp methods it names, which console commands it installs) are read here
from its files, where its engine module says. ``doctor`` asks ``method_of`` which checks apply: the drafter
check runs for EAGLE and EAGLE-3 alone. What only one engine's server does with the command lives in
its module (``LaunchReading.checks``).
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path

from patcher.drafter.configs import TargetConfig
from patcher.engine_specs.base import EngineSpec, EnvParsed, EnvVar, parse_file
from patcher.findings import Finding, hint, ok, problem, unknown
from patcher.release.launch_command import LaunchCommand, method_given
from patcher.release.release import Release

# What a launch's speculative method is, as the release reads it --------------------------------

EAGLE, MTP, NONE, OTHER = "eagle", "mtp", "none", "other"


@dataclass(frozen=True)
class Method:
    kind: str  # EAGLE (EAGLE or EAGLE-3 with a drafter: the drafter check judges it), MTP, NONE, OTHER
    name: str | None  # as the release reads it (SGLang upper-cased); None: none, or unreadable JSON
    written: str = ""  # the option's value as written
    findings: tuple[Finding, ...] = ()


def method_of(release: Release, cmd: LaunchCommand, target: TargetConfig | None,
              eagle3_drafter: bool = False) -> Method:
    """Every method the release accepts is placed: EAGLE/EAGLE-3 go to the drafter check; the
    release's multi-token-prediction methods (SGLang's NEXTN, and EAGLE without a draft model,
    which the release turns into the same launch; vLLM's mtp and *_mtp) are judged on the
    target's MTP layers; a method that runs the draft as a plain model (``plain_draft_methods``:
    vLLM's ``draft_model``, which it infers for a config without a method) given an EAGLE-3
    drafter (``eagle3_drafter``: its config says so) goes to the drafter check, which says it does
    not run one; any other is outside what doctor checks: unknown, never go."""
    launch = cmd.spec.launch_rules
    given = method_given(list(cmd.argv), cmd.engine)
    if given is None:
        return Method(NONE, None)
    written, name = given
    option, key, _ = launch.method_option
    if key is not None and not _is_json_object(written):  # judged without the engine (issue 53)
        return Method(OTHER, None, written, (problem(
            "launch.speculative_config", f"{option} is not a JSON object: the server stops at argument parsing",
            wanted=f"{option} '{{\"{key}\": ..., \"model\": ..., \"num_speculative_tokens\": ...}}'",
            found=written[:120], hint="quote the JSON for the shell: single quotes around it, double inside"),))
    if name is None:  # no "method": the drafter check says what the release does
        return Method(EAGLE, None, written)
    resolved = launch.method_aliases.get(name, name)
    mtp = mtp_methods(cmd.spec, release.site)
    eagle_as_mtp = resolved == launch.eagle_methods[0] and cmd.drafter is None and launch.eagle_without_drafter_is_mtp
    if name in mtp or resolved in mtp or eagle_as_mtp:
        return Method(MTP, name, written, tuple(_mtp_findings(release, cmd, name, eagle_as_mtp, target)))
    if resolved in launch.eagle_methods or (eagle3_drafter and resolved in launch.plain_draft_methods):
        return Method(EAGLE, resolved, written)
    return Method(OTHER, name, written, (unknown(
        "flags.algorithm", f"speculative method {name}: doctor checks EAGLE-3 and MTP launches, and has read "
        f"nothing of what {release.label()} does with a {name} draft; neither the draft nor what the target "
        "feeds it is checked", found=name),))


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


def _mtp_findings(release: Release, cmd: LaunchCommand, name: str, eagle_as_mtp: bool,
                  target: TargetConfig | None) -> list[Finding]:
    code = "launch.mtp"
    how = (f"{name} without a draft model is the target's own multi-token prediction ({release.label()} sets the "
           "draft model to the target for DeepSeek-V3 targets)" if eagle_as_mtp else
           f"{name} drafts with the target's own multi-token-prediction layers")
    if target is None:
        return [unknown(code, f"{how}; the target's config was not read, so whether it has any is not known",
                        hint="name the target's local folder in the command")]
    layers = target.mtp_layers
    arch = target.architectures[0] if target.architectures else "a target without architectures"
    if not layers:
        return [problem(code, f"{how}, and the target has none (num_nextn_predict_layers: "
                        f"{layers if layers is not None else 'not set'}): the server stops at start-up",
                        wanted="a target with MTP layers (DeepSeek-V3), or EAGLE-3 with a drafter",
                        found=f"{arch}, no MTP layers",
                        hint=f"use an EAGLE-3 drafter: {cmd.spec.launch_rules.eagle3_flags}")]
    loads = mtp_target_architectures(cmd.spec, release.site)
    if loads is not None and arch in loads:
        return [ok(code, f"{how}: {arch} with {layers} MTP layer(s), which {release.label()} loads as the draft; "
                         "nothing of EAGLE-3 applies")]
    return [unknown(code, f"{how}: {arch} has {layers} MTP layer(s), and whether {release.label()} loads them "
                    "for this architecture was not read", found=arch)]


def _looks_like_hub_id(value: str) -> bool:
    """``org/name``: vLLM and SGLang download it from the Hugging Face Hub."""
    parts = value.split("/")
    return len(parts) == 2 and all(parts) and not value.startswith((".", "~"))


def path_findings(cmd: LaunchCommand, method: Method) -> list[Finding]:
    out = []
    launch = cmd.spec.launch_rules  # the wanted forms are this engine's own spellings
    model = launch.spellings["model"][0] if "model" in launch.spellings else None
    serve = " ".join(launch.serve_commands[0]) if launch.serve_commands else None
    target_form = " or ".join([*([f"{serve} T"] if launch.serve_takes_model and serve else []),
                               *([f"{model} T"] if model else [])])
    # what the launch reading gives no way to name is not read: never "absent", never go
    unread = {"target": not target_form, "drafter": not ({"draft", "speculative_config"} & set(launch.spellings))}
    draft_form = (f"{launch.spellings['draft'][0]} D" if "draft" in launch.spellings else
                  f'"model": "D" in {launch.method_option[0]}')
    eagle3_form = launch.eagle3_flags.replace("DRAFTER", "D") + (
        f" {launch.spellings['draft'][0]} D" if "draft" in launch.spellings else "")
    for code, what, value in (("launch.target", "target", cmd.target), ("launch.drafter", "drafter", cmd.drafter)):
        if unread[what]:
            out.append(unknown(code, f"{cmd.spec.title}'s launch reading states no option naming the {what}: the "
                               f"{what} is not checked for this engine", found=cmd.flags[:80] or "(no options)"))
            continue
        if value is None:
            if what == "target":
                out.append(problem(code, "the command names no model", wanted=target_form, found="(absent)"))
            elif method.kind == EAGLE and method.name is not None:
                flag = launch.method_option[0]
                out.append(problem(code, f"{flag} {method.written} without a drafter path: the EAGLE-3 launch "
                                   "has no draft model", wanted=draft_form, found="(absent)"))
            elif method.kind == NONE:
                out.append(hint(code, "the command names no drafter: speculative decoding is off, nothing of "
                                "EAGLE-3 is checked", wanted=eagle3_form))
            continue  # MTP and other methods: their own line says what drafts
        path = Path(value).expanduser()
        if path.is_dir():
            out.append(ok(code, f"{what} folder {value} exists"))
        elif path.exists():
            out.append(problem(code, f"the {what} {value} is a file, not a model folder", wanted="a folder with "
                               "config.json", found="a file"))
        elif _looks_like_hub_id(value):  # nothing of it read: never go (issue 53)
            out.append(unknown(code, f"the {what} {value} is not a local folder: the engine will fetch it from the "
                               f"Hugging Face Hub; doctor reads no network, so nothing of the {what} was checked",
                               found=value, hint=f"download it (huggingface-cli download {value} --local-dir DIR) "
                               f"and put DIR in the command, or run doctor where the Hub cache holds it as a folder"))
        else:
            out.append(problem(code, f"the {what} folder {value} does not exist: the server stops at load",
                               wanted="an existing folder", found="missing"))
    if method.kind == NONE and cmd.drafter is not None:  # SGLang builds a draft worker only for a method
        out.append(problem("launch.method", f"the command names a drafter but no {launch.method_option[0]}: the "
                           "server builds no draft worker, and the drafter is never loaded (speculative decoding "
                           "is off)", wanted=eagle3_form, found=f"a drafter, no {launch.method_option[0]}",
                           hint=f"add {launch.eagle3_flags.split(' DRAFTER')[0]}"))
    return out


# The environment variables the release reads ----------------------------------------------------

def variables(spec: EngineSpec, site: Path | None) -> dict[str, EnvVar]:
    """The variables doctor reads for the engine, as the install at ``site`` declares them."""
    return spec.env.read(site) if spec.env is not None and site is not None else {}


def _parsed(spec: EngineSpec, site: Path | None, name: str, env: dict[str, str]) -> EnvParsed | None:
    """The release's own parsing of ``env[name]``; None: not runnable here."""
    return spec.env.parse(site, name, env) if spec.env is not None and site is not None else None


def env_findings(variables: dict[str, EnvVar], env: dict[str, str],
                 cmd: LaunchCommand, site: Path | None = None) -> list[Finding]:
    out = []
    for name, var in variables.items():
        code = f"env.{name}"
        given = "in the command" if name in cmd.env else "in the environment"
        parsed = _parsed(cmd.spec, site, name, env) if name in env and var.read else None
        if parsed is not None and parsed.raises:
            out.append(problem(code, f"{name}={env[name]} ({given}): {parsed.how}, and that raises "
                               f"{parsed.raises}: the server stops at start-up", wanted=parsed.wanted,
                               found=f"{name}={env[name]}", hint=f"set {name} to {parsed.wanted}, or unset it"))
            continue
        if parsed is not None and parsed.ignored:
            out.append(hint(code, f"{name}={env[name]} ({given}): {parsed.how}, which ignores it with a warning "
                            f"({parsed.ignored}) and uses the default {var.default!r}", wanted=parsed.wanted,
                            found=f"{name}={env[name]}"))
            continue
        if var.only is not None:  # the one value start-up accepts; launch.runner says what any other does
            if name not in env:
                out.append(ok(code, f"{name} is not set: the release has one model runner and start-up checks it"))
            elif env[name] == var.only:
                out.append(ok(code, f"{name}={env[name]} ({given}): redundant, the release has one model runner"))
            continue
        if not var.read:
            if name in env:
                out.append(hint(code, f"{name}={env[name]} is set {given}, but this release does not read it",
                                found=f"{name}={env[name]}"))
            continue
        if name in env:
            default = f"default {var.default!r}" if var.default is not None else "no default"
            out.append(ok(code, f"{name}={env[name]} ({given}; {default})"))
        elif var.default is not None:
            out.append(ok(code, f"{name} is not set: the release's default {var.default!r}"))
        else:
            out.append(ok(code, f"{name} is not set, and the release has no default for it (it decides by itself)"))
    return out


# What the release does with a whole launch command, read from its files where its engine module says

def mtp_target_architectures(spec: EngineSpec, site: Path | None) -> frozenset[str] | None:
    """The target architectures whose own MTP layers the release loads as the draft model, read
    where the engine module says (its MTP model file and the targets it serves; the
    ``if model_arch in [...]`` lists under which the release sets the draft model to the target);
    None: not read (no install, or the release's code moved)."""
    if site is None:
        return None
    launch = spec.launch_rules
    found: set[str] = set()
    if launch.mtp_model is not None and (site / launch.mtp_model[0]).is_file():
        found |= set(launch.mtp_model[1])
    for rel in launch.mtp_arch_lists:
        base = site / rel
        for path in sorted(base.glob("*.py")) if base.is_dir() else [base]:
            tree = parse_file(path)
            for node in ast.walk(tree) if tree is not None else ():
                if isinstance(node, ast.If) and _draft_is_the_target(node):
                    found |= _listed(node.test)
    return frozenset(found) or None


def _draft_is_the_target(node: ast.If) -> bool:
    """``if model_arch in [...]: if ...draft_model_path is None: <draft path> = <the model path>``."""
    text = ast.unparse(ast.Module(body=node.body, type_ignores=[]))
    return "speculative_draft_model_path" in text and re.search(
        r"speculative_draft_model_path\s*=\s*\w+\.model_path", text) is not None


def _listed(test: ast.expr) -> set[str]:
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.In) \
            and isinstance(test.left, ast.Name) and test.left.id.endswith("arch") \
            and isinstance(test.comparators[0], (ast.List, ast.Tuple, ast.Set)):
        return {e.value for e in test.comparators[0].elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return set()


def mtp_methods(spec: EngineSpec, site: Path | None) -> frozenset[str]:
    """The *_mtp methods the release's Literal types name (vLLM's MTPModelTypes, or SpeculativeMethod
    before it existed), and "mtp" itself where named."""
    out: set[str] = set()
    for rel in spec.launch_rules.mtp_declarations:
        tree = parse_file(site / rel) if site is not None else None
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id in ("MTPModelTypes", "SpeculativeMethod") for t in targets):
                    out |= {c.value for c in ast.walk(node.value or node) if isinstance(c, ast.Constant)
                            and isinstance(c.value, str) and (c.value == "mtp" or c.value.endswith("_mtp"))}
    return frozenset(out)



def console_scripts(dist_info: Path) -> frozenset[str] | None:
    """The console commands a release installs, as its ``entry_points.txt`` declares them (SGLang
    declares ``sglang`` from 0.5.5: none before, and no such file); None where that cannot be read."""
    import configparser

    parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # names keep their case
    try:
        parser.read_string((dist_info / "entry_points.txt").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return frozenset() if (dist_info / "METADATA").is_file() else None  # a wheel that declares none
    except (OSError, UnicodeDecodeError, configparser.Error):
        return None
    return frozenset(parser["console_scripts"]) if parser.has_section("console_scripts") else frozenset()
