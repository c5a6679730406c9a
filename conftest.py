"""Root test configuration: applies to the tests and to the doctests of the package."""

import os

# figures in doctests and tests are drawn off screen, whatever the machine's display
os.environ.setdefault("MPLBACKEND", "Agg")
