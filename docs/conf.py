"""Sphinx configuration of the postdp documentation (``sphinx-build -W docs docs/_build``)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE / "_ext"))

import postdp  # noqa: E402

project = "postdp"
author = "postdp developers"
copyright = "2026, postdp developers"  # noqa: A001
release = version = postdp.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "myst_parser",
    "postdp_docs",  # the API reference from __all__ and the CLI reference from the parser
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
myst_enable_extensions = ["colon_fence", "dollarmath"]
myst_heading_anchors = 3

autodoc_typehints = "none"  # the numpydoc sections carry the types
autodoc_member_order = "bysource"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks: set[str] = set()

html_theme = "alabaster"
html_title = f"postdp {release}"
html_theme_options = {"description": "DP counts and what post-processing does to them"}
