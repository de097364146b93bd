"""EAGLE-3 drafter checkpoints: check how an engine release reads them, and convert them.

Modules: safetensors_header (strict header reader), checkpoint (folder + shards),
configs (drafter/target config fields), release (the engine release and its family
states), facts (what that release does with a drafter), key_names, checks (the checkpoint),
shape_checks, release_checks (the release), launch_flags, convert (fix's plan), fix (the
writing), cli (the only printer).
"""
