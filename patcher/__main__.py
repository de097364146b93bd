"""``python -m patcher``: the command line (``patcher.cli.main``), its hints naming it as it was run."""

import sys

from patcher.cli.main import as_invoked, main

if __name__ == "__main__":
    sys.exit(main(prog=as_invoked(sys.executable)))
