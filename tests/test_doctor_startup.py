"""doctor asks the release's own start-up configuration (issue 53): vLLM's ``create_engine_config``,
SGLang's ``ServerArgs`` post-processing (``__post_init__``, or ``resolve_once`` from 0.5.20) on the
parsed line, in the release's interpreter; SGLang's is shown a stand-in GPU (``--gpu``, else Hopper).

A field-report failure class: a line the parser takes and the server refuses seconds after start,
in words doctor had no rule for (a speculative config without its token count, a draft
tensor-parallel size the release does not take, a key it does not know). No rule of ours is
asserted here: the refusal's words are the release's, and a line it accepts says what it resolved.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from patcher.cli.main import main
from patcher.environment import engines
from patcher.maintainer import cpu_env
from patcher.release import release_parser
from patcher.release.launch_command import parse
from tests.support import progress, recorded
from tests.support import real_drafters as rd

pytestmark = [pytest.mark.wheels, pytest.mark.cpuenv]

# The default tier's vLLM (the loader test's release: its environment is built once for both);
# the release of the field report's vLLM launches in --full.
RELEASES = [pytest.param("0.34.0"), pytest.param("0.22.1", marks=pytest.mark.full)]
# SGLang: the default tier's newest (resolve_once), and the GPU-proof release (__post_init__, the
# fused-capture bug the fusion verdict is about) in --full.
SGLANG = [pytest.param("0.5.23"), pytest.param("0.5.13.post1", marks=pytest.mark.full)]


def _kimi_k2(folder: Path) -> Path:
    return rd.kimi_target(folder, "kimi-k2", k25=False)


def _thinking(folder: Path) -> Path:
    """Kimi-K2-Thinking's config: the target's, its checkpoint compressed-tensors."""
    config = json.loads((_kimi_k2(folder / "base") / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "compressed-tensors", "format": "pack-quantized",
                                     "config_groups": {}}
    (folder / "kimi-k2-thinking").mkdir()
    (folder / "kimi-k2-thinking" / "config.json").write_text(json.dumps(config))
    return folder / "kimi-k2-thinking"


def _doctor(python: Path, *line: str, gpu: str | None = None) -> tuple[int, dict]:
    out = io.StringIO()
    code = main(["doctor", "--json", "--python", str(python), *(["--gpu", gpu] if gpu else []), "--", *line],
                out=out, err=io.StringIO())
    return code, json.loads(out.getvalue())


@pytest.mark.parametrize("version", RELEASES)
def test_the_release_s_start_up_refusals_are_no_go_in_its_own_words(tmp_path: Path, version: str) -> None:
    target, drafter, thinking = recorded.settled_paths(tmp_path, _kimi_k2, rd.specforge_kimi, _thinking)

    def line(**spec: object) -> list[str]:
        return ["vllm", "serve", str(target), "-tp", "8", "--speculative-config",
                json.dumps({"method": "eagle3", "model": str(drafter), **spec})]

    # Kimi-K2-Thinking's checkpoint is compressed-tensors: --quantization fp8 on it (the field report)
    fp8 = ["vllm", "serve", str(thinking), "-tp", "8", "--quantization", "fp8", "--speculative-config",
           json.dumps({"method": "eagle3", "model": str(drafter), "num_speculative_tokens": 3})]
    refused = {  # what the release's words name, each line otherwise the accepted one
        "no token count": (line(), "num_speculative_tokens"),
        "--quantization fp8 on a compressed-tensors checkpoint": (fp8, "compressed-tensors"),
        "draft TP 2 at TP 8": (line(num_speculative_tokens=3, draft_tensor_parallel_size=2), "tensor_parallel"),
        "a key it does not know": (line(num_speculative_tokens=3, draft_layers=2), "draft_layers"),
    }
    with cpu_env.using("vllm", version, log=progress.say) as python:
        # every line in one interpreter (doctor then finds each parse cached): one engine import
        install = engines.find_first(["vllm"], python=str(python))[0]
        assert install is not None
        lines = [line(num_speculative_tokens=3), *(words for words, _ in refused.values())]
        release_parser.read_many([parse(words) for words in lines], install)
        code, doc = _doctor(python, *line(num_speculative_tokens=3))
        said = {f["code"]: f for f in doc["findings"]}
        assert said["launch.parse"]["level"] == "ok"
        assert said["launch.startup"]["level"] == "ok", said["launch.startup"]
        assert said["launch.startup"]["message"].endswith(f"speculative method eagle3, 3 token(s), draft {drafter}")
        assert "keys.load" in said, "an accepted line goes on to the drafter check"
        wrong = []
        for name, (words, named) in refused.items():
            code, doc = _doctor(python, *words)
            found = {f["code"]: f for f in doc["findings"]}
            f = found.get("launch.startup", {})
            if (code, f.get("level")) != (1, "problem") or named not in f.get("found", ""):
                wrong.append(f"{name}: exit {code}, {f}")
            elif "keys.load" in found:  # the server stops before it loads anything: no drafter verdict
                wrong.append(f"{name}: judged the drafter of a line that stops at start-up")
        assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("version", RELEASES)
def test_what_vllm_infers_is_what_doctor_judges(tmp_path: Path, version: str) -> None:
    """A speculators drafter served as the model is EAGLE-3 with its verifier (vLLM's own override),
    and a --speculative-config without "method" runs the method the release picks: doctor judges
    the launch the release resolved, whatever the line left out (issue 53, item 2)."""
    (target,) = recorded.settled_paths(tmp_path / "target", _kimi_k2)

    def trained_from_it(folder: Path) -> Path:  # a drafter trained from the local copy, at its settled path
        drafter = rd.speculators_kimi(folder)
        config = json.loads((drafter / "config.json").read_text())
        config["speculators_config"]["verifier"]["name_or_path"] = str(target)
        (drafter / "config.json").write_text(json.dumps(config))
        return drafter

    (drafter,) = recorded.settled_paths(tmp_path / "drafter", trained_from_it)
    served = ["vllm", "serve", str(drafter)]
    no_method = ["vllm", "serve", str(target), "--speculative-config",
                 json.dumps({"model": str(drafter), "num_speculative_tokens": 3})]
    with cpu_env.using("vllm", version, log=progress.say) as python:
        install = engines.find_first(["vllm"], python=str(python))[0]
        assert install is not None
        release_parser.read_many([parse(served), parse(no_method)], install)
        code, doc = _doctor(python, *served)
        said = {f["code"]: f for f in doc["findings"]}
        startup = said["launch.startup"]
        if startup["level"] == "problem":  # 0.34.0: "Speculators verifier must name a remote model repository"
            assert code == 1 and "verifier" in startup["found"] and "keys.load" not in said, startup
        else:
            assert "speculative method eagle3" in startup["message"], startup
            assert said["launch.target"]["message"] == f"target folder {target} exists", said["launch.target"]
            assert "keys.load" in said and said["flags.algorithm"]["level"] == "ok", "the drafter is judged as EAGLE-3"

        code, doc = _doctor(python, *no_method)
        said = {f["code"]: f for f in doc["findings"]}
        method = said["launch.startup"]["message"].split("speculative method ", 1)[1].split(",")[0]
        algorithm = said["flags.algorithm"]
        if method == "eagle3":
            assert algorithm["level"] == "ok", algorithm
        else:  # the release runs the EAGLE-3 drafter as another method: no target features reach it
            assert (code, algorithm["level"]) == (1, "problem") and method in algorithm["found"], algorithm


@pytest.mark.parametrize("version", SGLANG)
def test_sglang_s_start_up_refusals_and_its_own_fusion_choice(tmp_path: Path, version: str) -> None:
    target, drafter = recorded.settled_paths(tmp_path, _kimi_k2, rd.specforge_kimi)
    accepted = ["python", "-m", "sglang.launch_server", "--model-path", str(target), "--tp", "8",
                "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(drafter)]
    refused = {  # what the release's words name; each line otherwise the accepted one
        "STANDALONE with DP attention": (["--speculative-algorithm", "STANDALONE", "--enable-dp-attention",
                                          "--dp", "8"], "dp attention"),
        "a draft window of 0": (["--speculative-draft-window-size", "0"], "must be positive"),
    }
    off = [*accepted, "--enforce-disable-flashinfer-allreduce-fusion"]
    with cpu_env.using("sglang", version, log=progress.say) as python:
        install = engines.find_first(["sglang"], python=str(python))[0]
        assert install is not None
        release_parser.read_many([parse(words) for words in
                                  (accepted, off, *([*accepted, *extra] for extra, _ in refused.values()))], install)
        code, doc = _doctor(python, *accepted)
        said = {f["code"]: f for f in doc["findings"]}
        assert said["launch.parse"]["level"] == "ok"
        startup = said["launch.startup"]
        assert startup["level"] == "ok", startup
        assert "compute capability 9.0; assumed" in startup["message"], startup  # no GPU here: it says so
        assert "speculative method EAGLE3" in startup["message"] and f"draft {drafter}" in startup["message"]
        assert "keys.load" in said, "an accepted line goes on to the drafter check"
        fusion = said["launch.allreduce_fusion"]
        buggy = "pending" in fusion["message"]  # the fused-capture fix not applied (0.5.13.post1 as published)
        if buggy:  # the release's own auto-enable at TP 8 on Hopper, on a DeepSeek-V3 target
            assert fusion["level"] == "problem" and "start-up configuration turns it on" in fusion["message"], fusion
        wrong = []
        for name, (extra, named) in refused.items():
            code, doc = _doctor(python, *accepted, *extra)
            found = {f["code"]: f for f in doc["findings"]}
            f = found.get("launch.startup", {})
            if (code, f.get("level")) != (1, "problem") or named not in f.get("found", ""):
                wrong.append(f"{name}: exit {code}, {f}")
            elif "keys.load" in found:
                wrong.append(f"{name}: judged the drafter of a line that stops at start-up")
        assert not wrong, "\n".join(wrong)
        if buggy:  # the release leaves the fusion off where told to, and on a GPU it does not fuse on
            for words, gpu in ((off, None), (accepted, "sm120")):
                _, doc = _doctor(python, *words, gpu=gpu)
                fusion = {f["code"]: f for f in doc["findings"]}["launch.allreduce_fusion"]
                assert fusion["level"] == "ok" and "leaves the allreduce fusion off" in fusion["message"], fusion


def _config_lines(engine: str, target: Path, drafter: Path, folder: Path) -> tuple[list[str], Path]:
    """A server line without speculative options, and a config file holding them, as each engine's
    ``--config`` takes it (YAML: option names without their dashes)."""
    path = folder / "serve.yaml"
    if engine == "sglang":
        path.write_text(f"speculative-algorithm: EAGLE3\nspeculative-draft-model-path: {drafter}\n")
        return ["python", "-m", "sglang.launch_server", "--model-path", str(target), "--tp", "8"], path
    path.write_text("tensor-parallel-size: 4\n")
    return ["vllm", "serve", str(target)], path


@pytest.mark.parametrize("engine,version", [
    *(pytest.param("vllm", p.values[0], marks=p.marks, id=f"vllm-{p.values[0]}") for p in RELEASES),
    *(pytest.param("sglang", p.values[0], marks=p.marks, id=f"sglang-{p.values[0]}") for p in SGLANG)])
def test_a_config_file_named_in_one_word_is_not_merged_and_doctor_says_so(tmp_path: Path, engine: str,
                                                                          version: str) -> None:
    """Found on a GPU (SGLang 0.5.13.post1): with ``--config=FILE`` the server ran without the
    speculative options the file held, and doctor said go. The release's own reading of the
    spellings is the truth: where it parses ``--config=FILE`` (or the abbreviation ``--conf FILE``)
    and its reading differs from the two-word one, doctor says no-go naming what the file would
    set; where it refuses the abbreviation (ambiguous), the parse says so and nothing of the file;
    in two words the file is merged and nothing is said of it."""
    target, drafter = recorded.settled_paths(tmp_path, _kimi_k2, rd.specforge_kimi)
    (tmp_path / "config").mkdir()
    head, config = _config_lines(engine, target, drafter, tmp_path / "config")
    config = recorded.settled(tmp_path / "config") / config.name  # the same line each run: its answer is kept
    two = [*head, "--config", str(config)]
    spellings = {f"--config={config}": [f"--config={config}"], "--conf": ["--conf", str(config)]}
    with cpu_env.using(engine, version, log=progress.say) as python:
        install = engines.find_first([engine], python=str(python))[0]
        assert install is not None
        (merged_cmd, merged), *alone = release_parser.read_many(
            [parse(two), *(parse([*head, *words]) for words in spellings.values())], install)
        assert merged.status == "parsed", merged
        assert alone[0][1].status == "parsed", alone[0]  # every release takes the one-word form
        said = {token: _doctor(python, *head, *words) for token, words in spellings.items()}
        _, doc_two = _doctor(python, *two)
    named = "--speculative-algorithm" if engine == "sglang" else "--tensor-parallel-size"
    assert named in merged_cmd.argv, merged_cmd.argv
    for (token, (code, doc)), (_, reading) in zip(said.items(), alone):
        found = {f["code"]: f for f in doc["findings"]}
        if reading.status == "parsed":
            got = found.get("launch.config")
            assert got is not None and (code, got["level"]) == (1, "problem"), (token, got)
            assert got["found"] == token and got["wanted"] == f"--config {config}", got
            assert named in got["message"], got
        else:  # the release stops at argument parsing: that is the reason, not the file
            assert reading.status == "rejected" and code == 1, (token, reading)
            assert found["launch.parse"]["level"] == "problem" and "launch.config" not in found, found
    assert "launch.config" not in {f["code"] for f in doc_two["findings"]}
