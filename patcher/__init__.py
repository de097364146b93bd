"""Versioned patches that make EAGLE-3 work on Kimi-K2 / K2.5 targets in vLLM and SGLang,
and let SM120 GPUs use FlashInfer's allreduce fusion; installed, verified and reverted.

One folder per job, listed from the bottom of the import order to the top. Each folder's
``__init__`` says its job and, on its "May import:" line, the folders below it that it uses;
tests/test_layout.py holds every import (at the top of a module or inside a function) to it.

- ``errors.py``: the exceptions every job raises (what failed, wanted, found, one hint).
- ``findings.py``: one judged fact (ok, problem, hint, unknown): what checks return, engines' included.
- ``program.py``: the program's name as the user started it, for every command a line names.
- ``engine_specs/``: one module per engine: its names, launch spellings, env files, drafter rules.
- ``environment/``: the engine's environment: the install's site-packages, RECORD, interpreter.
- ``core/``: the diff core: hunks, manifests, plans, writing, bookkeeping, bytecode.
- ``probes/``: import-time probes run in the engine's own interpreter.
- ``installer/``: apply, verify, revert: the core's plans written, then probed.
- ``release/``: what an installed release does, read from its files; the server command.
- ``drafter/``: EAGLE-3 drafter checkpoints: checked against a release, and mended.
- ``doctor/``: ``doctor``'s judgement of one server command.
- ``maintainer/``: porting, wheels, CPU environments, mutation runs (never on apply's path).
- ``cli/``: the command line: arguments in, reports out; the only folder that prints.
"""

__version__ = "0.1.0"
