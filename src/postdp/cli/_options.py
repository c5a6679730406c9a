"""Shared flags, strict value parsers and the one-line argument parser of the command line.

Every parser here raises ``argparse.ArgumentTypeError``, which argparse turns into one line
naming the flag as the user typed it (``argument --seed: ...``), or :class:`CliError` with
the flag and value already in the message.
"""

from __future__ import annotations

import argparse
import codecs
import math
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn

from postdp.postprocess.estimators import estimators, method_help

__all__ = [
    "CliError",
    "Parser",
    "add_mechanism_options",
    "add_output_options",
    "add_postprocess_options",
    "add_table_options",
    "flag",
    "float_list",
    "int_list",
    "positive_float",
    "probability",
    "whole",
]


class CliError(Exception):
    """A rejected command-line input; the message names the flag as typed and its value."""


class _Help(argparse.RawDescriptionHelpFormatter):
    """Shows each default once, and only where there is one."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            "%(default)" in text
            or "Default:" in text  # the help text states it in the user's units
            or default in (None, False, argparse.SUPPRESS)
            or action.option_strings == []
        ):
            return text
        return text + " (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on stderr with exit status 2."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)  # a flag is named only as written
        kwargs.setdefault("formatter_class", _Help)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")


@contextmanager
def flag(name: str, value: object) -> Iterator[None]:
    """Re-raise a library error met while using ``value`` as one naming the flag ``name``."""
    from postdp.errors import PostdpError

    try:
        yield
    except (PostdpError, TypeError, ValueError) as exc:
        shown = value if isinstance(value, str) else repr(value)
        raise CliError(f"{name} {shown!r}: {exc}") from exc


def typed(args: argparse.Namespace, *names: str) -> str:
    """The spelling of a flag the user typed (e.g. ``-o`` rather than ``--output``)."""
    words = getattr(args, "_typed", ())
    return next((n for n in names if n in words), names[0])


# -- value parsers (argparse ``type=``) ---------------------------------------------------
_INT = re.compile(r"[+-]?\d+")


def whole(low: int = 0, high: int | None = None) -> Callable[[str], int]:
    """An integer in [low, high], written as digits (no '2.5', 'nan' or '1e3')."""

    def parse(text: str) -> int:
        if not _INT.fullmatch(text.strip()):
            raise argparse.ArgumentTypeError(f"must be a whole number; got {text!r}")
        value = int(text)
        if value < low or (high is not None and value > high):
            bound = f"at least {low}" if high is None else f"between {low} and {high}"
            raise argparse.ArgumentTypeError(f"must be {bound}; got {text!r}")
        return value

    return parse


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number; got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number; got {text!r}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0."""
    value = _finite(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive; got {text!r}")
    return value


def fraction(text: str) -> float:
    """A number in (0, 1]."""
    value = _finite(text)
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in (0, 1]; got {text!r}")
    return value


def probability(text: str) -> float:
    """A number strictly between 0 and 1."""
    value = _finite(text)
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must lie strictly between 0 and 1; got {text!r}")
    return value


def float_list(*, positive: bool = True) -> Callable[[str], list[float]]:
    """Comma-separated finite numbers (positive unless told); empty parts are refused."""

    def parse(text: str) -> list[float]:
        parts = text.split(",")
        if not text.strip() or any(not p.strip() for p in parts):
            raise argparse.ArgumentTypeError(
                f"must be a number or comma-separated numbers; got {text!r}"
            )
        values = [_finite(p) for p in parts]
        if positive and any(v <= 0 for v in values):
            raise argparse.ArgumentTypeError(f"must be positive; got {text!r}")
        return values

    return parse


def int_list(*, allow_empty: bool = False) -> Callable[[str], list[int]]:
    """Comma-separated nonnegative whole numbers ('' for none when ``allow_empty``)."""

    def parse(text: str) -> list[int]:
        if allow_empty and text.strip() == "":
            return []
        parts = text.split(",")
        if any(not _INT.fullmatch(p.strip()) for p in parts):
            raise argparse.ArgumentTypeError(f"must be comma-separated whole numbers; got {text!r}")
        values = [int(p) for p in parts]
        if any(v < 0 for v in values):
            raise argparse.ArgumentTypeError(f"must be nonnegative; got {text!r}")
        return values

    return parse


def byte_size(text: str) -> int:
    """A size in bytes: a whole number with an optional K, M or G suffix (powers of 1024)."""
    match = re.fullmatch(r"\s*(\d+)\s*([kKmMgG]?)[iI]?[bB]?\s*", text)
    if not match:
        raise argparse.ArgumentTypeError(f"must be a size such as 512M or 2G; got {text!r}")
    power = " KMG".index((match.group(2) or " ").upper())
    value: int = int(match.group(1)) * (1 << (10 * power))
    if value < 1 << 20:
        raise argparse.ArgumentTypeError(f"must be at least 1M; got {text!r}")
    return value


def encoding(text: str) -> str:
    """A text encoding Python knows; UTF-8 also accepts a byte-order mark."""
    try:
        name = codecs.lookup(text).name
    except LookupError:
        raise argparse.ArgumentTypeError(f"is not a known text encoding; got {text!r}") from None
    return "utf-8-sig" if name == "utf-8" else name


def ids(text: str) -> list[str]:
    """Comma-separated ids or column names, none empty."""
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or any(not p for p in parts):
        raise argparse.ArgumentTypeError(f"must be comma-separated names; got {text!r}")
    return parts


# -- shared groups of flags ---------------------------------------------------------------
def add_table_options(parser: argparse.ArgumentParser) -> None:
    """--input, --encoding and the column flags of a hierarchy table."""
    parser.add_argument(
        "--input",
        metavar="CSV",
        help="count table, one row per node (default: the bundled 2010 Census nation > "
        "state > county populations)",
    )
    parser.add_argument(
        "--encoding",
        type=encoding,
        default="utf-8",
        help="text encoding of --input, e.g. latin-1 (a UTF-8 byte-order mark is accepted)",
    )
    parser.add_argument("--id", default="id", metavar="COL", help="column of node ids")
    parser.add_argument(
        "--parent", default="parent", metavar="COL", help="column of parent ids, empty for the root"
    )
    parser.add_argument("--count", default="count", metavar="COL", help="column of true counts")


MECHANISMS = ("geometric", "laplace", "gaussian", "discrete-gaussian")


def add_mechanism_options(parser: argparse.ArgumentParser) -> None:
    """--mechanism, --epsilon, --rho and --sensitivity."""
    parser.add_argument("--mechanism", default="geometric", choices=MECHANISMS, help="noise")
    parser.add_argument(
        "--epsilon",
        type=float_list(),
        metavar="E[,E...]",
        help="epsilon of geometric/laplace noise, one value for every level or one per level, "
        "root first (1 when not given)",
    )
    parser.add_argument(
        "--rho",
        type=float_list(),
        metavar="R[,R...]",
        help="rho of the Gaussian mechanisms, one value or one per level (0.5 when not given)",
    )
    parser.add_argument(
        "--sensitivity",
        type=positive_float,
        default=1.0,
        help="sensitivity of each count (a whole number for the integer mechanisms)",
    )


def table_solvers() -> str:
    """The table estimators a ``,round`` may follow, comma-separated (for help texts)."""
    return ", ".join(e.name for e in estimators("table") if not e.finisher)


def add_postprocess_options(parser: argparse.ArgumentParser) -> None:
    """--postprocess, --public, --allow-derived-public and --weights."""
    parser.add_argument(
        "--postprocess",
        default="none",
        metavar="STEP[,STEP...]",
        help="post-processing written to column released_count, steps applied in order; "
        f"of a hierarchy: {method_help('hierarchy', alone=False)}. Example: "
        "project-nonneg,round. Of a table (--table, --categories): one of "
        f"{table_solvers()}, optionally followed by ',round'. postdp release also takes, "
        f"as the only step: {method_help('hierarchy', alone=True)}",
    )
    parser.add_argument(
        "--public",
        type=ids,
        metavar="root|ID[,ID...]",
        help="nodes whose true counts are published as invariants (e.g. 'root' for the "
        "national total, or state ids); the post-processing keeps them exactly",
    )
    parser.add_argument(
        "--allow-derived-public",
        action="store_true",
        help="also publish the nodes that the --public ones determine exactly (e.g. the only "
        "county of a public state); without it such a --public is refused",
    )
    parser.add_argument(
        "--weights",
        default="equal",
        choices=["equal", "inverse-variance"],
        help="weights of the projection: equal (the seeds' (P)/(P+)) or 1/Var of each level's "
        "noise (generalised least squares, better when levels get different budgets)",
    )


def add_output_options(parser: argparse.ArgumentParser, *, quiet: bool = True) -> None:
    """--overwrite (and --quiet for commands with progress bars)."""
    parser.add_argument(
        "--overwrite", action="store_true", help="replace outputs that already exist"
    )
    if quiet:
        parser.add_argument("--quiet", action="store_true", help="no progress bars")


def progress(
    label: str,
    total: int | None,
    *,
    quiet: bool,
    unit: str = "step",
    lines: bool = False,
    name: Callable[[int], str] | None = None,
) -> Any:
    """A tqdm progress bar on stderr (rates and ETA).

    ``lines``: when stderr is not a terminal (a log file, a pipe), no bar and no escape
    codes but one plain line each time the count grows, ``<what>: done (<n>/<total>)``,
    ``<what>`` being ``name(n)`` (e.g. ``State 011``) or ``label``."""
    if lines and not quiet and not _terminal(sys.stderr):
        return _Lines(label, total, name)
    from tqdm import tqdm

    return tqdm(
        total=total,
        desc=label,
        unit=unit,
        file=sys.stderr,
        disable=quiet,
        leave=False,
        mininterval=0.5,
        dynamic_ncols=True,
    )


def _terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class _Lines:
    """The part of a tqdm bar that the commands use, writing one plain line per step done
    (for a log: no carriage returns, no cursor moves)."""

    def __init__(self, label: str, total: int | None, name: Callable[[int], str] | None) -> None:
        self.label, self.total, self.name = label, total, name
        self.n = self._shown = 0

    def update(self, k: int = 1) -> None:
        self.n += k
        self.refresh()

    def refresh(self) -> None:
        if self.n > self._shown:
            self._shown = self.n
            what = self.name(self.n) if self.name is not None else self.label
            of = "" if self.total is None else f"/{self.total}"
            print(f"{what}: done ({self.n}{of})", file=sys.stderr, flush=True)

    def close(self) -> None:
        """Nothing to clear: every line written stays."""

    def __enter__(self) -> _Lines:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextmanager
def run_bars(state: Any, *, quiet: bool) -> Iterator[Callable[[str, int, int], None]]:
    """A ``progress(label, done, total)`` callback for a library call that runs several
    labelled simulations: one bar per label (the previous one closed when the next starts),
    and ``state.phase`` naming the run; every bar closed on exit."""
    bars: dict[str, Any] = {}

    def tick(label: str, done: int, total: int) -> None:
        if label not in bars:
            for bar in bars.values():
                bar.close()
            state.phase = f"simulating ({label})"
            bars[label] = progress(label, total, quiet=quiet)
        bars[label].total = total
        bars[label].n = done
        bars[label].refresh()

    try:
        yield tick
    finally:
        for bar in bars.values():
            bar.close()


def split_levels(
    values: Sequence[float], n_levels: int, option: str, text: Sequence[float]
) -> list[float]:
    """One value per level from one value or one per level."""
    out = list(values)
    if len(out) == 1:
        out *= n_levels
    if len(out) != n_levels:
        raise CliError(
            f"{option} {','.join(f'{v:g}' for v in text)!r}: needs one value or one per level, "
            f"root first ({n_levels} levels); got {len(values)}"
        )
    return out


#: Bundled tables by their command-line name.
BUNDLED_TABLES = {"p1-pa-blockgroup": "pa-blockgroup", "p1-us-county": "us-county"}
_QUERY_HELP = '"detailed", "total", a list of category codes, or {"name": .., "groups": [[..]]}'


def add_table_flags(parser: argparse.ArgumentParser, *, formats: bool = True) -> None:
    """--table, --categories, --design (and --format for a release)."""
    parser.add_argument(
        "--table",
        choices=sorted(BUNDLED_TABLES),
        help="work on a bundled table instead of a hierarchy: the 2020 P.L. 94-171 table P1 "
        "(race, 63 detailed cells) of Pennsylvania's block groups or of every US county",
    )
    parser.add_argument(
        "--categories",
        metavar="CSV",
        help="category tree (columns code, parent, optional label) of a table given as a wide "
        "--input: one row per geounit (--id, --parent) and one column per category code; "
        "counts are needed on the leaf geounits' rows, other rows are checked when filled; "
        "any other column is refused unless named in --ignore-columns",
    )
    parser.add_argument(
        "--ignore-columns",
        metavar="COL,COL",
        help="columns of the wide --input that hold no counts (names, notes); without it a "
        "column that is not a category code is refused",
    )
    parser.add_argument(
        "--design",
        metavar="JSON",
        help='table workload: {"measurements": [{"level": 1, "query": "detailed", '
        '"mechanism": "gaussian", "rho": 0.1}, {"level": 0, "query": "total", "public": '
        "true}, ...]}; a query is " + _QUERY_HELP + ". Without it: the detailed cells at "
        "every level with --mechanism and --epsilon/--rho per level",
    )
    if not formats:
        return
    parser.add_argument(
        "--format",
        default="long",
        choices=["long", "wide"],
        help="table output: long (geo_id, parent, category, counts) or wide (one column per "
        "category, the released counts, or the noisy ones without --postprocess)",
    )


def check_weights(args: argparse.Namespace) -> None:
    """``--weights`` other than equal needs a projection step to weight (else refused)."""
    if getattr(args, "weights", "equal") == "equal":
        return
    steps = {s.strip().split("(")[0] for s in args.postprocess.split(",")}
    if not steps & {e.name for e in estimators("hierarchy") if e.solver}:
        raise CliError(
            f"--weights {args.weights}: weights the projection steps, and --postprocess "
            f"{args.postprocess!r} has none"
        )


def refuse_hierarchy_options(args: argparse.Namespace, command: str) -> None:
    """Options of hierarchy runs that a table run would ignore: refused, naming the flag."""
    defaults = {
        "--entities": ("entities", None),
        "--shifts": ("shifts", [0, 10, 100]),
        "--weights": ("weights", "equal"),
        "--allow-derived-public": ("allow_derived_public", False),
        "--count": ("count", "count"),
        "--keep": ("keep", None),
        "--audit": ("audit", False),
    }
    for option, (name, default) in defaults.items():
        if hasattr(args, name) and getattr(args, name) != default:
            reason = (
                "a table's projection is already weighted by the inverse variances; other "
                "weights go in --design ('weight' per measurement)"
                if option == "--weights"
                else f"applies to hierarchy {command}s, not to tables"
            )
            raise CliError(f"{option}: {reason}")


def wants_table(args: argparse.Namespace) -> bool:
    """Whether the command works on a table (``--table`` or ``--categories``)."""
    if getattr(args, "ignore_columns", None) is not None and args.categories is None:
        raise CliError(
            f"--ignore-columns {args.ignore_columns!r}: only for a wide table read with "
            "--input and --categories"
        )
    return args.table is not None or args.categories is not None
