"""Preparation shared by ``release`` and ``audit``: the table, its hierarchy, the noise per
level and the public nodes, each checked with errors that name the flag as typed."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from postdp.cli._io import parse_counts, read_table
from postdp.cli._options import CliError, flag, split_levels

__all__ = [
    "Loaded",
    "add_interval",
    "interval_seed",
    "load_hierarchy",
    "mechanisms_for",
    "option_of",
    "prepare",
    "public_ids",
]

_INTEGER_MECHANISMS = ("geometric", "discrete-gaussian")
_BUNDLED = "county_populations_2010.csv"


@dataclass(frozen=True)
class Loaded:
    """An input table read strictly, and the hierarchy built from it."""

    frame: Any  # pandas.DataFrame of text columns
    hierarchy: Any  # postdp.Hierarchy (holds the true counts)
    path: Path
    sha256: str
    bundled: bool


def load_hierarchy(args: argparse.Namespace) -> Loaded:
    """Read ``--input`` (or the bundled counties) and build its validated hierarchy."""
    from postdp.hierarchy import Hierarchy

    integers = args.mechanism in _INTEGER_MECHANISMS
    if args.input is None:
        source = resources.files("postdp.data") / "_files" / _BUNDLED
        with resources.as_file(source) as bundled:
            frame, path, digest = read_table(str(bundled), "--input", "utf-8-sig")
        bundled_data = True
    else:
        frame, path, digest = read_table(args.input, "--input", args.encoding)
        bundled_data = False
    for option in ("--id", "--parent", "--count"):
        column = getattr(args, option[2:])
        if column not in frame.columns:
            raise CliError(
                f"{option} {column!r}: no such column in the input; its columns are: "
                f"{', '.join(map(str, frame.columns))}"
            )
    ids = [str(v).strip() for v in frame[args.id]]
    for row, value in enumerate(ids):
        if value == "":
            raise CliError(f"--id {args.id!r}: the id at row {row + 1} is empty")
    counts = parse_counts(
        frame[args.count], ids, integers=integers, flag="--count", name=args.count
    )
    table = frame[[args.id, args.parent]].copy()
    table["__count__"] = counts
    with flag("--input", args.input or "bundled county populations"):
        h = Hierarchy.from_frame(table, id=args.id, parent=args.parent, count="__count__")
    return Loaded(frame, h, path, digest, bundled_data)


def mechanisms_for(args: argparse.Namespace, n_levels: int) -> list[Any]:
    """One validated mechanism per level from --mechanism, --epsilon/--rho, --sensitivity."""
    from postdp.mechanisms import DiscreteGaussian, Gaussian, Geometric, Laplace

    name = args.mechanism
    pure = name in ("geometric", "laplace")
    if pure and args.rho is not None:
        raise CliError(f"--rho: applies to the Gaussian mechanisms, not to --mechanism {name}")
    if not pure and args.epsilon is not None:
        raise CliError(f"--epsilon: applies to geometric and laplace, not to --mechanism {name}")
    option = "--epsilon" if pure else "--rho"
    given = args.epsilon if pure else args.rho
    values = split_levels(given or ([1.0] if pure else [0.5]), n_levels, option, given or [])
    cls: Any = {
        "geometric": Geometric,
        "laplace": Laplace,
        "gaussian": Gaussian,
        "discrete-gaussian": DiscreteGaussian,
    }[name]
    out = []
    with flag("--sensitivity", f"{args.sensitivity:g}"):
        cls(**{"epsilon" if pure else "rho": 1.0}, sensitivity=args.sensitivity)
    for value in values:
        with flag(option, f"{value:g}"):
            out.append(cls(**{"epsilon" if pure else "rho": value}, sensitivity=args.sensitivity))
    return out


def check_values(h: Any, mechanisms: list[Any], counts: Any, option: str) -> None:
    """Check, before any draw, that each level's counts suit its mechanism."""
    for mechanism, nodes in zip(mechanisms, h.levels, strict=True):
        with flag(option, f"{mechanism.privacy_cost()}"):
            mechanism._values(counts[nodes])


def public_ids(args: argparse.Namespace, h: Any) -> list[str] | None:
    """Ids named by --public ('root' names the root unless a node is called that)."""
    if args.public is None:
        return None
    if args.postprocess.strip() in ("", "none"):
        raise CliError(
            f"--public {','.join(args.public)!r}: public nodes are enforced by a projection; "
            "add --postprocess (e.g. project, project-nonneg or topdown)"
        )
    from postdp.hierarchy import public_ids as resolve

    known = {str(i) for i in h.ids}
    out = resolve(h, public=args.public)
    unknown = [p for p in out if p not in known]
    if unknown:
        shown = ", ".join(map(repr, unknown[:5]))
        raise CliError(f"--public {','.join(args.public)!r}: no node with id {shown}")
    from postdp.hierarchy import derived_public

    derived = derived_public(h, public=out)
    if derived and not args.allow_derived_public:
        shown = ", ".join(repr(d) for d in derived[:5])
        more = f" and {len(derived) - 5} more" if len(derived) > 5 else ""
        raise CliError(
            f"--public {','.join(args.public)!r}: also publishes exactly {shown}{more} (parents "
            "equal the sums of their children); pass --allow-derived-public to accept that"
        )
    return out


def prepare(args: argparse.Namespace, state: Any) -> tuple[Loaded, list[Any]]:
    """Read the input and build one checked mechanism per level (nothing drawn)."""
    state.phase = "reading the input"
    loaded = load_hierarchy(args)
    h = loaded.hierarchy
    state.phase = "checking the options"
    mechanisms = mechanisms_for(args, h.n_levels)
    check_values(h, mechanisms, h.counts, option_of(mechanisms))
    return loaded, mechanisms


def option_of(mechanisms: list[Any]) -> str:
    """The flag that set the mechanisms' budget."""
    return "--epsilon" if mechanisms[0].family == "laplace" else "--rho"


def level_labels(frame: Any, h: Any) -> list[str]:
    """Names of the levels from a ``level`` column when it has one per depth."""
    labels = [f"level {d}" for d in range(h.n_levels)]
    if "level" in frame.columns:
        for d, nodes in enumerate(h.levels):
            names = frame["level"].iloc[nodes].astype(str).unique()
            if len(names) == 1:
                labels[d] = names[0]
    return labels


def add_interval(frame: Any, after: str, low: Any, high: Any, level: float) -> None:
    """Insert ``ci_low``, ``ci_high``, ``moe`` (half the interval's width, the margin of
    error ACS users read; exact for symmetric intervals, a summary of the others) and
    ``ci_level`` after column ``after``, in place."""
    import numpy as np

    at = list(frame.columns).index(after) + 1
    frame.insert(at, "ci_low", low)
    frame.insert(at + 1, "ci_high", high)
    half = (np.asarray(high, dtype=np.float64) - np.asarray(low, dtype=np.float64)) / 2.0
    frame.insert(at + 2, "moe", np.round(half, 6))
    frame.insert(at + 3, "ci_level", level)


def interval_seed(args: argparse.Namespace, secure: bool) -> int | None:
    """Seed of the randomness behind the intervals: none on the release path, a seed derived
    from --seed on the study path (so the intervals do not reuse the release's draws)."""
    return None if secure or args.seed is None else int(args.seed) + 1
