"""``python -m patcher``: the command line (``patcher.cli.main``)."""

import sys

from patcher.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
