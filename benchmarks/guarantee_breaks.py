"""Deliberate breaks of the code each guarantee test guards: every break must make its tests fail.

Each entry edits one line of a copy of the repository (never the checkout itself), runs the named
tests there and prints CAUGHT (they failed, as they must) or SURVIVED (the test passes with its
guarantee removed: a defect). The "mm" entries are mutmut survivors (issue 13) that the tests
added for them now kill.

Usage: python benchmarks/guarantee_breaks.py [substring of a break's name ...]
Exit 1 when any break survives.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# (name, file, exact text, replacement, tests)
BREAKS = [
    ('blocked ignored', 'patcher/core/plan.py',
     'if req.severity == "blocked" and',
     'if False and',
     'test_actions.py::test_blocked_precondition_applies_nothing_and_exits_1'),
    ('strict ignores warnings', 'patcher/installer/actions.py',
     'out.extend(f"{fid} has a warning (--strict)" for _ in st.warnings[:1])',
     'pass',
     'test_actions.py::test_warning_is_exit_0_and_exit_1_with_strict'),
    ('modes dropped', 'patcher/core/write.py',
     '_write_file(_tmp_for(targets[e["rel"]]), changes[e["rel"]], e["mode"])',
     '_write_file(_tmp_for(targets[e["rel"]]), changes[e["rel"]])',
     'test_write.py::test_file_modes_are_kept_by_apply_and_revert'),
    ('revert RECORD check off', 'patcher/installer/actions.py',
     'if rel not in still and not install.pristine(rel, data)}',
     'if False}',
     'test_actions.py::test_revert_refuses_when_it_would_not_give_the_published_file'),
    ('our earlier diff called a hand edit', 'patcher/core/plan.py',
     '    return bool(written) and all(',
     '    return False and all(',
     'test_actions.py::test_our_earlier_diff_is_told_apart_from_a_hand_edit'),
    ('refusal evidence warning off', 'patcher/core/plan.py',
     'st.warnings.append(f"the refusal\'s evidence',
     '(f"the refusal\'s evidence',
     'test_actions.py::test_refusal_whose_evidence_does_not_hold_says_so'),
    ('torn backup hash unchecked', 'patcher/core/write.py',
     'if backup.is_symlink() or not backup.is_file() or sha256_record(backup.read_bytes()) != e.old:',
     'if backup.is_symlink() or not backup.is_file():',
     'test_write.py::test_torn_backup_is_refused_by_its_hash'),
    ('other tags kept', 'patcher/core/bytecode.py',
     'out.extend(d.glob(f"{stem}.*.pyc"))',
     'out.extend(p for p in d.glob(f"{stem}.*.pyc") if "399" not in p.name)',
     'test_bytecode.py::test_pyc_of_other_tags_and_legacy_pyc_are_removed'),
    ('legacy pyc kept', 'patcher/core/bytecode.py',
     'if legacy.exists():',
     'if False:',
     'test_bytecode.py::test_pyc_of_other_tags_and_legacy_pyc_are_removed'),
    ('opt level dropped', 'patcher/core/bytecode.py',
     'py_compile.compile(src, doraise=True, optimize=opt,',
     'py_compile.compile(src, doraise=True, optimize=0,',
     'test_bytecode.py::test_shipped_bytecode_is_rebuilt_in_its_mode_at_every_optimisation_level'),
    ('mode dropped', 'patcher/core/bytecode.py',
     'invalidation_mode=py_compile.PycInvalidationMode[mode])',
     'invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)',
     'test_bytecode.py::test_shipped_bytecode_is_rebuilt_in_its_mode_at_every_optimisation_level'),
    ('no exclusive lock', 'patcher/core/write.py',
     '        _flock(fd, fcntl.LOCK_EX, install, timeout)\n',
     '        pass\n',
     'test_write.py::test_second_writer_times_out_with_the_documented_error_while_the_lock_is_held '
     'test_write.py::test_second_writer_waits_for_the_first_then_proceeds'),
    ('no shared lock', 'patcher/core/write.py',
     '        _flock(fd, fcntl.LOCK_SH, install, timeout)\n',
     '        pass\n',
     'test_write.py::test_verify_takes_the_shared_lock'),
    ('detect state None', 'patcher/release/release.py',
     'states = [FamilyState.of(st, install.version) for st in statuses]',
     'states = [] and [FamilyState.of(st, install.version) for st in statuses]',
     'test_drafter_locate.py::test_detect_reports_the_installed_engine_and_its_key_family_state'),
    ('prefix ignored', 'patcher/core/bytecode.py',
     '    if install.pycache_prefix:\n',
     '    if False:\n',
     'test_bytecode.py::test_bytecode_cached_files_honours_the_prefix '
     'test_bytecode.py::test_pycache_prefix_bytecode_is_removed'),
    ('prefix mirror resolved only', 'patcher/core/bytecode.py',
     'dict.fromkeys((os.path.abspath(src.parent), os.path.realpath(src.parent)))',
     'dict.fromkeys((os.path.realpath(src.parent),))',
     'test_bytecode.py::test_cached_files_under_the_prefix_mirror_the_imported_path_and_the_real_one '
     'test_bytecode.py::test_pycache_prefix_bytecode_is_removed'),
    ('new release not by its line', 'patcher/core/plan.py',
     'fits = [line] if line is not None and line in matching(family, files) else []',
     'fits = []',
     'test_plan.py::test_a_new_release_is_judged_by_the_entry_of_the_release_it_descends_from'),
    ('backport read as ours', 'patcher/core/plan.py',
     'if any(not isinstance(e, Variant) for e in fits):',
     'if False:',
     'test_lifecycle.py::test_untested_release_with_the_fix_is_upstream_by_content'),
    ('ambiguity guessed', 'patcher/core/plan.py',
     '    if len(fits) > 1:\n',
     '    if len(fits) > 1 and False:\n',
     'test_plan.py::test_two_other_entries_that_fit_are_flagged_not_guessed'),
    ('mm hint', 'patcher/core/plan.py',
     'st.hint = f"\'{program.command(\'apply --allow-untested\')}\' applies it"',
     'st.hint = None',
     'test_actions.py::test_untested_release_matching_a_pre_image_names_the_flag'),
    ('mm recompile check False', 'patcher/core/bytecode.py',
     'check=True, capture_output=True,\n',
     'check=False, capture_output=True,\n',
     'test_bytecode.py::test_failed_bytecode_rebuild_is_a_note_not_a_crash'),
    ('mm recompile capture False', 'patcher/core/bytecode.py',
     'check=True, capture_output=True,\n',
     'check=True, capture_output=False,\n',
     'test_bytecode.py::test_failed_bytecode_rebuild_is_a_note_not_a_crash'),
    ('mm shipped and', 'patcher/core/bytecode.py',
     'if len(parts) < 3 or parts[1] != install.cache_tag:',
     'if len(parts) < 3 and parts[1] != install.cache_tag:',
     'test_bytecode.py::test_pyc_of_other_tags_and_legacy_pyc_are_removed'),
    ('mm shipped break', 'patcher/core/bytecode.py',
     "                continue\n            opt = int",
     "                break\n            opt = int",
     'test_bytecode.py::test_own_bytecode_is_rebuilt_beside_other_interpreters_bytecode'),
    ('mm shipped default mode', 'patcher/core/bytecode.py',
     '_MODES.get(flags, "TIMESTAMP")',
     '_MODES.get(flags, "timestamp")',
     'test_bytecode.py::test_pyc_with_an_unknown_flags_word_is_rebuilt_as_timestamp'),
]


def run(name: str, rel: str, old: str, new: str, tests: str) -> bool:
    with tempfile.TemporaryDirectory(prefix="kimi-break-") as tmp:
        copy = Path(tmp) / "repo"
        shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".git", "__pycache__", ".mypy_cache",
                                                                  ".ruff_cache", "mutants"))
        target = copy / rel
        text = target.read_text()
        if text.count(old) != 1:
            print(f"STALE     {name:32} the text to break is not found once in {rel}")
            return False
        target.write_text(text.replace(old, new))
        ids = [f"tests/{x}" for x in tests.split()]
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *ids], cwd=copy,
                           capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(copy)))
    last = (r.stdout.strip().splitlines() or ["no output"])[-1]
    print(f"{'CAUGHT  ' if r.returncode else 'SURVIVED'}  {name:32} {last}", flush=True)
    return r.returncode != 0


def main(argv: list[str]) -> int:
    ok = [run(*b) for b in BREAKS if not argv or any(s in b[0] for s in argv)]
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
