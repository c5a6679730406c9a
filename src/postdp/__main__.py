"""Run the command line with ``python -m postdp``."""

import sys

from postdp.cli import main

if __name__ == "__main__":
    sys.exit(main())
