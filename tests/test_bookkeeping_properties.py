"""Property tests of our bookkeeping as untrusted input (patcher/core/bookkeeping.py, write.py): arbitrary
bytes, arbitrary JSON and one-field mutants of what patcher writes, planted in each of our files on
a real SGLang release, pristine or patched: never a traceback, never a write outside RECORD, and
revert still gives the published files. The cases by table: test_bookkeeping.py. The figures of
the campaign are printed at the end of the module.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from patcher.core import write
from patcher.environment.engines import sha256_record
from tests.support import bookkeeping_site
from tests.support.bookkeeping_site import ENGINE, VERSION, _files_we_read, _plant, assert_clean_error, run, snapshot
from tests.support.tiers import examples

release_site = bookkeeping_site.release_site
starts = bookkeeping_site.starts

pytestmark = pytest.mark.wheels

FIGURES = {"hostile inputs": 0, "tracebacks": 0, "writes outside RECORD": 0, "left unrevertable": 0}

FAMILY = "sglang/eagle3-drafter-keys"
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
                    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=12), kids, max_size=4),
                    max_leaves=12)


HOSTILE = st.one_of(
    st.binary(max_size=200).map(lambda b: ("bytes", b, [])),
    JSON.map(lambda v: ("json", v, [])),
    st.tuples(st.lists(st.integers(0, 7), min_size=1, max_size=5), JSON).map(lambda t: ("mutant", t[1], t[0])),
)


FILES = ["state", "journal", "backup", "state.orig", "lock"]


def _record(site: Path) -> dict[str, str]:
    (info,) = site.glob(f"{ENGINE}-*.dist-info")
    from patcher.environment.engines import _record as parse

    return parse(info)


@pytest.mark.parametrize("which", FILES)
def test_hostile_bookkeeping_never_tracebacks_nor_writes_outside_record(starts, tmp_path_factory, which):
    record = _record(starts["pristine"])

    @settings(max_examples=examples(40), deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(start=st.sampled_from(["pristine", "applied"]), how=HOSTILE)
    def one(start, how):
        box = tmp_path_factory.mktemp("h")
        site, outside = box / "site", box / "outside"
        shutil.copytree(starts[start], site)
        outside.mkdir()
        (outside / "sentinel").write_bytes(b"untouched\n")
        _plant(site, starts["applied"], which, how)
        before = snapshot(box, skip_ours=True)
        FIGURES["hostile inputs"] += 1
        errors = []
        for action in ("verify", "apply", "verify", "revert"):
            code, _, err = run(action, site)
            if code not in (0, 1, 2) or "Traceback" in err:
                FIGURES["tracebacks"] += 1
                pytest.fail(f"{which} {how!r}: {action} -> {code}: {err}")
            if code == 2:
                assert_clean_error(code, err)
                errors.append(err)
        after = snapshot(box, skip_ours=True)
        stray = sorted(k for k in before.keys() | after.keys()
                       if before.get(k) != after.get(k) and k.removeprefix("site/") not in record)
        if stray:
            FIGURES["writes outside RECORD"] += 1
            pytest.fail(f"{which} {how!r}: written outside RECORD: {stray}")
        if errors:  # every error here names our file or folder and says to delete it
            assert all(write.DIRNAME in e and "delete" in e for e in errors), errors
            shutil.rmtree(site / write.DIRNAME)
        code, _, err = run("revert", site)
        if code != 0 or any(sha256_record((site / rel).read_bytes()) != record[rel]
                            for rel in _files_we_read(VERSION) if (site / rel).exists()):
            FIGURES["left unrevertable"] += 1
            pytest.fail(f"{which} {how!r}: revert after the campaign: {code} {err}")
        shutil.rmtree(box)

    one()


@pytest.fixture(scope="module", autouse=True)
def _figures():
    yield
    print("\nbookkeeping campaign: " + ", ".join(f"{k}: {v}" for k, v in FIGURES.items()))
