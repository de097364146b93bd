"""Run inside the target interpreter (stdlib only, no engine import): where does the
engine's package come from, which copies are installed, how does this Python cache bytecode.

Printed as one JSON object. Also imported and called in-process when the target is
the running interpreter, so both paths share this code.
"""

import importlib.metadata as md
import importlib.util
import json
import sys


def _norm(name):
    return name.lower().replace("_", "-").replace(".", "-")


def describe(package, distribution, wanted):
    spec = importlib.util.find_spec(package)
    imported = None
    if spec is not None:
        locs = list(spec.submodule_search_locations or [])
        imported = locs[0] if locs else spec.origin
    # distributions(name=...) matches on folder names: no need to parse every METADATA.
    copies = [{"dist_info": str(getattr(d, "_path", "")), "version": d.version}
              for d in md.distributions(name=distribution)]
    others = {}
    for name in wanted:
        for dist in md.distributions(name=name):
            others.setdefault(_norm(name), dist.version)  # first on sys.path wins, as for imports
    return {
        "executable": sys.executable,
        "python": ".".join(map(str, sys.version_info[:3])),
        "cache_tag": sys.implementation.cache_tag,
        "pycache_prefix": sys.pycache_prefix,
        "imported": imported,
        "copies": copies,
        "others": others,
    }


if __name__ == "__main__":
    print(json.dumps(describe(sys.argv[1], sys.argv[2], sys.argv[3:])))
