"""A server line for any engine that states a launch reading, written from its ``LaunchReading`` (issue 59:
a test of shared behaviour builds the line from the engine's module, never spells one by its name)."""

from __future__ import annotations

import json
from pathlib import Path

from patcher import engine_specs


def line(engine: str, target: Path, drafter: Path | None = None, method: str | None = None,
         tp: int | None = None) -> list[str]:
    """``<entry> <target> [tp] [method and drafter]`` as the engine's parser spells them: its serve
    command with a positional model where it takes one, else ``python -m <module>`` (or its serve
    command) with its model option; the method in its method option (a JSON key, or upper-cased)."""
    launch = engine_specs.spec(engine).launch_rules
    if launch.serve_takes_model:
        words = [*launch.serve_commands[0], str(target)]
    else:
        start = ["python", "-m", launch.modules[0]] if launch.modules else list(launch.serve_commands[0])
        words = [*start, launch.spellings["model"][0], str(target)]
    if tp is not None:
        words += [launch.spellings["tp"][0], str(tp)]
    if method is not None:
        option, key, upper = launch.method_option
        if key is None:
            words += [option, method.upper() if upper else method]
            words += [launch.spellings["draft"][0], str(drafter)] if drafter is not None else []
        else:
            config = {key: method, **({"model": str(drafter)} if drafter is not None else {}),
                      "num_speculative_tokens": 3}
            words += [option, json.dumps(config)]
    return words
