"""The diff core: hunks (parse, match, apply a unified diff), manifests (one per patch family),
release_files and plan (the state of every family on one install, and what to write), selection
and catalogue (which families a command names), matrix (VERSIONS.md), write and bookkeeping
(all-or-nothing writes under ``.kimi-patcher/``), bytecode (stale ``.pyc`` removed).

Reads and writes files; runs no engine code.

May import: errors, findings, program, engine_specs, environment.
"""
