"""EAGLE-3 drafter checkpoints: check how an engine release reads them, and convert them.

Modules: safetensors_header (strict header reader), checkpoint (folder + shards),
configs (drafter/target config fields), engines (per-release loader facts),
key_names, checks, launch_flags, fix, cli (the only printer).
"""
