"""Engine facts the drafter check needs: installed release and our key-naming family's state."""

from __future__ import annotations

from packaging.version import Version

from . import actions, engines, write
from .errors import PatcherError
from .plan import assess


def drafter_detect(engine: str | None) -> tuple[str, Version, str | None] | None:
    for name in ([engine] if engine else ["sglang", "vllm"]):
        try:
            install = engines.find(name)
        except PatcherError:
            continue
        fams = tuple(f for f in actions.manifest.load_all(actions.manifest.PATCHES, (name,))
                     if f.name == "eagle3-drafter-keys")
        state = None
        if fams:
            (st,) = assess(install, fams, write.read_state(install))
            state = st.state.value
        return name, install.version, state
    return None
