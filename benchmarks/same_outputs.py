"""What the user sees, recorded, so that a change of the code's layout can be shown to change none
of it (issue 45): every command's exit code, stdout and stderr on real published releases.

    python benchmarks/same_outputs.py OUTDIR            # record (this checkout's patcher)
    diff -r BEFORE AFTER                                # nothing, when nothing the user sees moved

Run it from two checkouts (``git worktree add /tmp/before <commit>``, copy this script there) into
two folders and diff them. Per release (the newest of each CPU env line, as the default test tier
samples them, and one older release of each engine), on a fresh copy of the published tree:
``list``, ``verify`` (text, ``--json``), ``apply --dry-run``, ``apply``, ``verify`` again,
``doctor`` on an EAGLE-3 launch with the tests' real-tool Kimi-K2.5 drafter and target (text and
``--json``), ``drafter check``, ``revert``; then the text commands that print a command to run, and
two usage errors, as ``python -m patcher`` prints them (``main``'s ``prog``: every "patcher <command>"
it prints reads as the program was started). Probes are off (``--no-probes``): they run the same code
either way and need the engine's CPU env. Temporary paths read ``<WORK>``, and the seconds under
``timings`` read ``<s>`` (they are measured, not shown the same twice).
"""

from __future__ import annotations

import io
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

AS_INVOKED = "/venv/bin/python -m patcher"  # patcher/__main__.py's name for `python -m patcher`
RELEASES = [("vllm", "0.34.0"), ("vllm", "0.22.1"), ("vllm", "0.15.1"), ("vllm", "0.10.1.1"),
            ("sglang", "0.5.23"), ("sglang", "0.5.13.post1"), ("sglang", "0.5.9"), ("sglang", "0.5.3")]


def _launch(engine: str, target: Path, drafter: Path) -> list[str]:
    if engine == "vllm":
        spec = json.dumps({"method": "eagle3", "model": str(drafter), "num_speculative_tokens": 3})
        return ["vllm", "serve", str(target), "--speculative-config", spec, "-tp", "8"]
    return ["python", "-m", "sglang.launch_server", "--model-path", str(target), "--speculative-algorithm",
            "EAGLE3", "--speculative-draft-model-path", str(drafter), "--tp", "8"]


def record(out_dir: Path) -> None:
    from patcher.cli.main import main
    from patcher.maintainer import wheels
    from tests.support.real_drafters import kimi_target, specforge_kimi

    out_dir.mkdir(parents=True, exist_ok=True)
    for engine, version in RELEASES:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            site = work / "site"
            shutil.copytree(wheels.tree(engine, version), site)
            target, drafter = kimi_target(work), specforge_kimi(work)
            s = ["--site", str(site)]
            doctor = ["doctor", *s, "--", *_launch(engine, target, drafter)]
            commands = [["list", "--engine", engine], ["verify", *s, "--no-probes"],
                        ["verify", *s, "--no-probes", "--json"],
                        ["apply", "--engine", engine, *s, "--no-probes", "--dry-run"],
                        ["apply", "--engine", engine, *s, "--no-probes"], ["verify", *s, "--no-probes"],
                        doctor, [*doctor[:1], "--json", *doctor[1:]],
                        ["drafter", "check", str(drafter), "--engine", engine, *s],
                        ["revert", *s, "--no-probes"]]
            named = [["verify", *s, "--no-probes"], ["apply", "--engine", engine, *s, "--no-probes", "--dry-run"],
                     doctor, ["drafter", "check", str(drafter), "--engine", engine, *s],
                     ["verify", "--frobnicate"], ["verify", "--engine", "nonesuch"], ["doctor", "--", "ls"],
                     ["verify", "--help"], ["doctor", "--help"], ["drafter", "check", "--help"], ["list", "--help"],
                     ["doctor", "--site", str(site), "--frobnicate"], ["list", "--only", "nonesuch"]]
            lines = []
            for prog, argv in [*(("patcher", a) for a in commands), *((AS_INVOKED, a) for a in named)]:
                o, e = io.StringIO(), io.StringIO()
                code = main(argv, out=o, err=e, prog=prog)
                lines.append(f"$ {prog} {' '.join(argv)}\nexit {code}\n--- out\n{o.getvalue()}--- err\n{e.getvalue()}")
            text = re.sub(r'("(?:locate|read|write|probes|plan|total)": )[0-9.e-]+', r"\1<s>",
                          "\n".join(lines).replace(tmp, "<WORK>"))
            (out_dir / f"{engine}-{version}.txt").write_text(text)
            print(f"{engine} {version}: {len(lines)} commands", flush=True)


if __name__ == "__main__":
    record(Path(sys.argv[1]))
