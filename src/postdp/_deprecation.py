"""Deprecated names kept for one release (private): the warning names the call to use."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Mapping
from typing import Any


def renamed(package: str, name: str, table: Mapping[str, tuple[str, str]]) -> Any:
    """The object behind the deprecated ``package.name``, after a DeprecationWarning naming
    its replacement; ``table`` maps each old name to (defining module, call to use)."""
    module, call = table[name]
    warnings.warn(
        f"{package}.{name} is deprecated; use {call}. The old name will be removed in the "
        "next release",
        DeprecationWarning,
        stacklevel=3,
    )
    return getattr(importlib.import_module(module), name)
