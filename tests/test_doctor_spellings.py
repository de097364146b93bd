"""`doctor` on every spelling of the options it reads, generated from each release's own option
table (issue 46: the line was read by our approximation of two parsers, and misread spellings
gave 23 false "go" and 7 false "no-go").

For a release in its CPU environment (the engine imports, so its own parser runs), the option
table is read from the parser the server's entry point builds (``release_parser.option_table``).
From it, for each option doctor reads, every spelling the parser accepts is generated: each
option string, a unique prefix (argparse's abbreviation), ``--name=value``, vLLM's underscore,
dotted and ``--spec-*`` forms where the table has them, and a ``--config`` YAML file. Each
spelling must be judged exactly as the canonical line is (the same verdict and the same level on
every finding); an ambiguous prefix, which the release refuses, must be a no-go naming the
parser's error. The same lines on the bare published tree (no dependencies: the parser cannot
run) must be judged as the canonical line is, or 'cannot tell', never another go or no-go (a bare
tree cannot run the release's loader either: the canonical line is 'cannot tell' for the keys alone).
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from patcher import engine_specs
from patcher.cli.main import main
from patcher.core import manifest, matrix
from patcher.environment import engines
from patcher.maintainer import cpu_env, wheels
from patcher.release import release_parser
from patcher.release.launch_command import parse
from tests.support import progress, recorded
from tests.support import real_drafters as rd
from tests.support.tiers import SAMPLE, release_param

EXIT = {"go": 0, "no-go": 1, "cannot tell": 3}


def doctor(*argv: str) -> tuple[int, dict]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["doctor", "--json", *argv], out=out, err=err)
    return code, json.loads(out.getvalue())


def judged(doc: dict) -> tuple:
    """What a launch is judged to be: the verdict, the paths and TP read, every finding's level."""
    levels = {f["code"]: f["level"] for f in doc["findings"] if f["code"] != "launch.parse"}
    return doc["verdict"], doc["target"], doc["drafter"], doc["tp"], levels


def base_options(engine: str, target: Path, drafter: Path) -> list[tuple[str, object]]:
    """(dest, value) of the canonical EAGLE-3 launch; True: a flag."""
    if engine == "sglang":
        return [("model_path", str(target)), ("speculative_algorithm", "EAGLE3"),
                ("speculative_draft_model_path", str(drafter)), ("tp_size", "8"), ("enable_dp_attention", True)]
    spec = json.dumps({"method": "eagle3", "model": str(drafter), "num_speculative_tokens": 3})
    return [("model", str(target)), ("speculative_config", spec), ("tensor_parallel_size", "8")]


def unique_prefix(option: str, options: list[str]) -> str | None:
    """The shortest proper prefix argparse resolves to ``option`` alone, if any."""
    for n in range(3, len(option)):
        p = option[:n]
        if [o for o in options if o.startswith(p)] == [option]:
            return p
    return None


def ambiguous_prefix(option: str, options: list[str]) -> str | None:
    """The longest proper prefix of ``option`` that two or more options share (argparse refuses it)."""
    for n in range(len(option) - 1, 2, -1):
        p = option[:n]
        if p not in options and len([o for o in options if o.startswith(p)]) > 1:
            return p
    return None


def spell(engine: str, table: dict, dest: str, value: object, folder: Path) -> list[tuple[str, list[str]]]:
    """Every spelling of one option the release's parser accepts: (label, argv words)."""
    options = table["options"]
    words = lambda opt: [opt] if value is True else [opt, str(value)]  # noqa: E731
    out = []
    for opt in table["dests"].get(dest, []):
        out.append((opt, words(opt)))
        if opt.startswith("--") and value is not True:
            out.append((f"{opt}=", [f"{opt}={value}"]))
        if opt.startswith("--") and table["abbrev"]:
            prefix = unique_prefix(opt, options)
            if prefix:
                out.append((f"prefix {prefix}", words(prefix)))
        if engine == "vllm" and opt.startswith("--") and "-" in opt[2:]:
            out.append((f"underscores {opt}", words("--" + opt[2:].replace("-", "_"))))
    if engine == "vllm" and dest == "speculative_config":
        spec = json.loads(str(value))
        dotted = [w for k, v in spec.items() for w in (f"--speculative-config.{k}", str(v))]
        out.append(("dotted", dotted))
        if "--spec-method" in options:
            out.append(("--spec-*", ["--spec-method", spec["method"], "--spec-model", spec["model"],
                                     "--spec-tokens", str(spec["num_speculative_tokens"])]))
    if "--config" in options:
        key = next((o[2:] for o in table["dests"].get(dest, []) if o.startswith("--")), None)
        if key is not None and not (engine == "vllm" and dest == "model"):
            yaml = folder / f"{dest}.yaml"
            text = json.dumps(json.loads(str(value))) if dest == "speculative_config" else json.dumps(value)
            yaml.write_text(f"{key}: {text}\n")  # JSON is YAML: a path, a number, true, an object
            out.append(("--config", ["--config", str(yaml)]))
    return out


def launch_words(engine: str, rest: list[str]) -> list[str]:
    return ["python", "-m", "sglang.launch_server", *rest] if engine == "sglang" else ["vllm", "serve", *rest]


def lines(engine: str, table: dict, base: list[tuple[str, object]], folder: Path) -> dict[str, list[str]]:
    """The canonical line and, for each option, each other spelling of it (the rest as canonical)."""
    def canonical(dest: str, value: object) -> list[str]:
        if engine == "vllm" and dest == "model":
            return [str(value)]  # vllm serve's positional model tag
        opt = next(o for o in table["dests"][dest] if o.startswith("--"))
        return [opt] if value is True else [opt, str(value)]

    out = {"canonical": launch_words(engine, [w for d, v in base for w in canonical(d, v)])}
    for i, (dest, value) in enumerate(base):
        for label, words in spell(engine, table, dest, value, folder):
            rest = [w for j, (d, v) in enumerate(base) if j != i for w in canonical(d, v)]
            rest = (rest[:1] + words + rest[1:]) if engine == "vllm" and dest != "model" else words + rest
            out[f"{dest}: {label}"] = launch_words(engine, rest)
    return out


# The default tier's sample (the newest release of each CPU env line), then in --full the doctor
# grid's other releases.
RELEASES = [release_param(e, v) for e, v in sorted(SAMPLE)] + [
    release_param(e, v) for e, v in (("sglang", "0.5.13.post1"), ("vllm", "0.22.1"), ("vllm", "0.26.0"),
                                     ("vllm", "0.30.0"))]


# Option strings a release refuses by a rule of its own: (engine, label) -> its words. vLLM 0.10.x
# takes the model of 'vllm serve' only as the positional argument (or from --config).
OWN_RULES = {("vllm", "model: --model"): "you should provide the model as a positional argument"}


def settled_inputs(tmp_path: Path) -> tuple[Path, ...]:
    """Kimi-K2's target and SpecForge's drafter, settled at a path named by their bytes: the
    release's answers to lines naming them are found by the next run."""
    return recorded.settled_paths(tmp_path, lambda made: rd.kimi_target(made, "kimi-k2", k25=False),
                                  rd.specforge_kimi)


def read_spellings(engine: str, python: Path, target: Path, drafter: Path, folder: Path, fresh: bool = False):
    """The release's option table, every spelling of the canonical launch, and how its parser reads
    each: (table, variants, readings, refused). Asserts what holds on every release: doctor's
    spellings are in the table, every option string of the options doctor reads is accepted, and
    every accepted spelling is read as the canonical line is.

    The table is recorded per input (``recorded``: the parser child's code, the release's files, the
    CPU env); with a record, the lines are read through ``read_many``, whose answers the last run
    cached, instead of importing the engine for the table. ``fresh`` (the default tier's releases)
    asks the release again and compares its table with the record."""
    install = engines.find_first([engine], python=str(python), site=None)[0]
    spec = engine_specs.spec(engine)
    read_as = spec.launch.read
    base, variants = [], {}

    def spell(table: dict) -> list:
        # The parser's own dest for each field doctor reads (SGLang <= 0.5.19 parses
        # --tensor-parallel-size into tensor_parallel_size, and from_cli_args maps it to tp_size).
        dest_of = {field: next(d for d, opts in table["dests"].items() if opt in opts)
                   for field, opt in read_as.items() if opt in table["options"]}
        base.extend((dest_of[f], v) for f, v in base_options(engine, target, drafter))
        made = folder / "configs"
        made.mkdir()
        spelled = lines(engine, table, base, made)
        home = recorded.settled(made)  # the --config files, at a path named by their bytes
        variants.update({label: [w.replace(str(made), str(home)) for w in words] for label, words in spelled.items()})
        return [parse(v) for v in variants.values()]

    # One interpreter gives the table and parses every line spelled from it (doctor then answers
    # each from the cache); what the release does with each is its parser's answer: accepted, or
    # refused with its message.
    parts = [release_parser._script(spec.launch.parser_child), "serve", json.dumps(sorted(read_as.items())),
             *recorded.release_parts(install)]
    table = None if fresh else recorded.lookup("parser-table", parts)
    if table is not None:
        read = release_parser.read_many(spell(table), install)
    else:
        table, read = release_parser.table_then_read(engine, install, spell)
        assert table is not None, f"{engine}: its parser does not import in the CPU env"
        recorded.record("parser-table", parts, table)
    # The spelling doctor rewrites each option to is one the release's parser has (the fusion
    # switches exist only on some releases: launch.allreduce_fusion reads which).
    missing = {opt for opt in read_as.values() if opt not in table["options"]} - {
        "--enable-flashinfer-allreduce-fusion", "--enforce-disable-flashinfer-allreduce-fusion"}
    assert not missing, f"doctor's spellings the release's parser lacks: {sorted(missing)}"
    readings = dict(zip(variants, read))
    refused = {label for label, (_, r) in readings.items() if r.status == "rejected"}
    assert readings["canonical"][1].status == "parsed", readings["canonical"][1]
    # Every option string of every option doctor reads is a spelling the release takes, or one it
    # refuses by a rule of its own, in its own words (doctor then says no-go with them).
    strings = refused & {f"{d}: {o}" for d, _ in base for o in table["dests"].get(d, [])}
    unexplained = {s: readings[s][1].error for s in strings
                   if OWN_RULES.get((engine, s), "\0") not in readings[s][1].error}
    assert not unexplained, unexplained
    assert len(variants) - len(refused) >= 2 * len(base), sorted(refused)  # the axis is not empty
    want = readings["canonical"][0].argv
    misread = [f"{label}: {cmd.argv}" for label, (cmd, r) in readings.items()
               if label not in refused and (r.status, cmd.argv) != ("parsed", want)]
    assert not misread, "read otherwise than the canonical line:\n" + "\n".join(misread)
    return table, variants, readings, refused


@pytest.mark.cpuenv
@pytest.mark.parametrize("engine,version", RELEASES)
def test_every_spelling_the_release_accepts_is_judged_as_the_canonical_line(tmp_path, engine, version):
    target, drafter = settled_inputs(tmp_path)
    with cpu_env.using(engine, version, log=progress.say) as python:
        table, variants, readings, refused = read_spellings(engine, python, target, drafter, tmp_path,
                                                            fresh=(engine, version) in SAMPLE)
        want = judged(doctor("--python", str(python), "--", *variants["canonical"])[1])
        assert want[0] != "cannot tell" and want[2] == str(drafter) and want[3] == 8, want
        wrong = []
        for label, words in variants.items():
            code, doc = doctor("--python", str(python), "--", *words)
            parsed = next(f for f in doc["findings"] if f["code"] == "launch.parse")
            if label in refused:  # the server stops at argument parsing: no-go, with the parser's words
                ok = (code, doc["verdict"], parsed["level"], parsed["found"]) == (
                    1, "no-go", "problem", readings[label][1].error)
            else:
                ok = parsed["level"] == "ok" and judged(doc) == want and code == EXIT[want[0]]
            if not ok:
                wrong.append(f"{label}: {' '.join(words[-6:])}: {parsed['level']} {judged(doc)}")
        assert not wrong, f"{engine} {version}, judged otherwise than the release reads it:\n" + "\n".join(wrong)

        # A prefix two options share: the release refuses the line, and so does doctor.
        algo = engine_specs.spec(engine).launch_rules.method_option[0]  # the method's option
        shared = ambiguous_prefix(algo, table["options"])
        if shared is not None:
            words = [w if w != algo else shared for w in variants["canonical"]]
            code, doc = doctor("--python", str(python), "--", *words)
            parsed = next(f for f in doc["findings"] if f["code"] == "launch.parse")
            assert (code, parsed["level"]) == (1, "problem") and "ambiguous" in parsed["found"], parsed

    # Without the release's parser (the published tree, patched, without dependencies): the same
    # judgement, or 'cannot tell'; never another go or no-go.
    tree = str(tmp_path / "site")
    shutil.copytree(wheels.tree(engine, version), tree)
    assert main(["apply", "--engine", engine, "--site", tree, "--no-probes"], out=io.StringIO(), err=io.StringIO()) == 0
    bare = doctor("--site", tree, "--", *variants["canonical"])[1]
    static = judged(bare)
    # a bare tree: the release's loader cannot run, so the drafter's keys are all it cannot tell (issue 52)
    assert static[0] == "cannot tell" and all(r.startswith("keys.load:") for r in bare["reasons"]), bare["reasons"]
    wrong = []
    for label, words in variants.items():
        doc = doctor("--site", tree, "--", *words)[1]
        if judged(doc) != static and doc["verdict"] != "cannot tell":
            wrong.append(f"{label}: {judged(doc)}")
    assert not wrong, f"{engine} {version}, read by spellings, judged otherwise:\n" + "\n".join(wrong)


# Every other release the CPU envs reach: its own parser reads each spelling as the canonical line
# (doctor then judges the same words the same way: the test above proves that on the grid's releases).
OTHERS = [release_param(e, v) for e in manifest.ENGINES for v in matrix.releases(e)
          if (e, v) not in {(p.values[0], p.values[1]) for p in RELEASES} and cpu_env.reaches(e, v)]


@pytest.mark.cpuenv
@pytest.mark.parametrize("engine,version", OTHERS)
def test_every_release_reads_every_spelling_as_the_canonical_line(tmp_path, engine, version):
    target, drafter = settled_inputs(tmp_path)
    with cpu_env.using(engine, version, log=progress.say) as python:
        read_spellings(engine, python, target, drafter, tmp_path)
