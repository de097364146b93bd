"""EAGLE-3 drafter checkpoints: check how an engine release reads them, and convert them.

The modules by job (patcher/drafter/README.md says more):
- reading: safetensors_header (strict header reader), checkpoint (folder + shards), configs
  (drafter/target config fields), key_names (tensor names and the two decoder-layer spellings);
- the release: locate (the located install or --engine-version), facts (what that release does
  with a drafter: every engine fact the checks read);
- check: checks (the checkpoint, and the whole check), shape_checks, release_checks, flag_checks;
- fix: fix (the pipeline), fix_plan (what the copy gets), fix_copy (writing it, verified);
- findings. Its errors are in ``patcher.errors`` with every other; the release it is checked
  against is ``patcher.release.release``; the arguments and printed reports are
  ``patcher.cli.drafter_cli``.

May import: errors, findings, program, engine_specs, environment, core, release.
"""
