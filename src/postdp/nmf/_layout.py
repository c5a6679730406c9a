"""The noisy measurement file (NMF) layout of the Census Bureau's 2020 releases.

Facts (``shared/research/pl94-2020-design.md`` section 2; the Census's 2023 NMF README, the
GLS code of ``uscensusbureau/DAS_2020_Redistricting_Production_Code`` and
``google-research/census-bluedown`` ``constants.py`` / ``io.py``):

- one folder per run; inside, one Parquet dataset per geolevel, ``<Geolevel>.parquet``,
  each with ``DPQuery/`` (the noisy answers) and ``Constraint/`` (invariants and
  structural constraints);
- below the root level the datasets are Hive-partitioned by spine subtree,
  ``State=NNN``: a 1-digit AIAN flag (0 off, 1 on an AIAN branch) and the 2-digit state
  FIPS; the root level (``US``) is not partitioned; readers take the one file of a folder;
- a geocode is the flag and the tabulation GEOID (state 2, county 5, tract 11, block
  group 12, block 15 characters), the root's the empty string, so every geounit's geocode
  starts with its parent's;
- a row per geounit and query: ``geocode``, ``query_name`` (the marginal's name with a
  4-character suffix, ``_dpq`` or ``_con``), one text column per schema attribute (the
  attribute or recode kept, ``*`` when summed out), ``query_shape`` (counts per
  attribute), ``value`` (the counts in C order of ``query_shape``, integers);
  ``DPQuery`` adds ``variance`` (each count's) and ``plb`` (the query's share of the run's
  budget, an exact fraction); ``Constraint`` adds ``sign`` (``=``, ``<=``, ``>=``).

postdp reads and writes ``value`` as a Parquet list of int64 (the Census's first release
stored it binary-encoded for a Spark decoder; the layout is otherwise the same), except
the ``DPQuery`` answers of a run drawn with a continuous mechanism (Laplace, Gaussian):
float64, which its manifest records (``"answers": "float64"``). postdp's manifest
(:data:`MANIFEST`, version :data:`VERSION`) records what the files cannot: each
measurement's mechanism, parameter and exact cost (see :func:`postdp.nmf.write`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from postdp.errors import ValidationError
from postdp.tables import Attribute, Marginal, Recode, Schema

__all__ = [
    "CONSTRAINT",
    "DPQUERY",
    "LEVELS_2020",
    "MANIFEST",
    "SUFFIX_LEN",
    "check_columns",
    "columns",
    "folder",
    "level_names",
    "marginal_of",
    "schema_from_json",
    "schema_to_json",
]

DPQUERY = "DPQuery"
CONSTRAINT = "Constraint"
#: The geolevels of the 2020 runs, root first.
LEVELS_2020 = ("US", "State", "County", "Tract", "Block_Group", "Block")
#: Length of the suffix every query name carries (``_dpq``, ``_con``).
SUFFIX_LEN = 4
#: Written last by postdp into a run it wrote (the published runs have none).
MANIFEST = "postdp-nmf.json"
#: The manifest version this postdp writes, and the newest it reads (1: the run's rho,
#: neighbours and one mechanism name; 2 adds each measurement's mechanism, parameter and
#: cost, and the type of the noisy answers).
VERSION = 2
#: The one file postdp writes in each folder of a run.
PART = "part-0.parquet"

_KEYS = ("geocode", "query_name")
_DPQUERY_TAIL = ("query_shape", "value", "variance", "plb")
_CONSTRAINT_TAIL = ("query_shape", "value", "sign")
_FOLDER = re.compile(r"^State=([0-9A-Za-z]+)$")


def level_names(n_levels: int, names: Sequence[str] | None = None) -> tuple[str, ...]:
    """The geolevel names of a run: the 2020 names for a 6-level geography, else ``Level0``..."""
    if names is not None:
        out = tuple(str(n) for n in names)
        if len(out) != n_levels or len(set(out)) != n_levels:
            raise ValidationError(
                f"`levels` must name each of the {n_levels} geographic levels once; got {out}"
            )
        if any(not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", n) for n in out):
            raise ValidationError(f"level names must be letters, digits and _; got {out}")
        return out
    if n_levels == len(LEVELS_2020):
        return LEVELS_2020
    return tuple(f"Level{d}" for d in range(n_levels))


def folder(code: str) -> str:
    """The partition folder of a spine subtree: ``State=`` and its 3-character code."""
    return f"State={code}"


def subtree_of(name: str) -> str | None:
    """The subtree code of a partition folder name, or None."""
    match = _FOLDER.match(name)
    return match.group(1) if match else None


def columns(schema: Schema, kind: str) -> tuple[str, ...]:
    """The column names of a ``DPQuery`` or ``Constraint`` dataset of this schema."""
    tail = _DPQUERY_TAIL if kind == DPQUERY else _CONSTRAINT_TAIL
    return (*_KEYS, *schema.names, *tail)


def check_columns(frame_columns: Sequence[str], schema: Schema, kind: str, where: str) -> None:
    """Refuse a dataset that lacks a column of the Census layout (extra ones are kept)."""
    missing = [c for c in columns(schema, kind) if c not in frame_columns]
    if kind == DPQUERY and missing == ["plb"]:
        return  # optional: some releases leave the budget share out
    if missing:
        raise ValidationError(f"{where}: not a {kind} dataset of the NMF layout; missing {missing}")


def attribute_columns(marginal: Marginal) -> dict[str, str]:
    """The text of each attribute column for a marginal: the term kept, or ``*``."""
    kept = dict.fromkeys(marginal.schema.names, "*")
    for term in marginal.terms:
        k = marginal.schema._term(term)[0]
        kept[marginal.schema.names[k]] = term
    return kept


def marginal_of(schema: Schema, name: str, attributes: dict[str, str], where: str) -> Marginal:
    """The marginal a row names, checked against its attribute columns."""
    try:
        marginal = schema.marginal(name)
    except ValidationError as err:
        raise ValidationError(f"{where}: query {name!r} is not a marginal of the schema") from err
    expected = attribute_columns(marginal)
    if any(attributes.get(k, "*") != v for k, v in expected.items()):
        raise ValidationError(
            f"{where}: query {name!r} has attribute columns {attributes}; expected {expected}"
        )
    return marginal


def strip_suffix(name: str) -> str:
    """A query name without its 4-character suffix (``_dpq``, ``_con`` or another)."""
    if len(name) > SUFFIX_LEN and name[-SUFFIX_LEN] == "_":
        return name[:-SUFFIX_LEN]
    return name


def schema_to_json(schema: Schema) -> list[dict[str, Any]]:
    """A schema as plain data (for a run's manifest)."""
    out = []
    for a in schema.attributes:
        recodes = []
        for r in a.recodes:
            member = r.matrix(a.size)
            groups = {
                label: [int(i) for i, v in enumerate(member[j]) if v]
                for j, label in enumerate(r.labels)
            }
            recodes.append({"name": r.name, "groups": groups})
        out.append({"name": a.name, "levels": list(a.levels), "recodes": recodes})
    return out


def schema_from_json(data: Any) -> Schema:
    """The schema of :func:`schema_to_json` (:meth:`Schema.shared`: every read of a run
    shares one schema and its caches)."""
    try:
        return Schema.shared(
            [
                Attribute(
                    str(a["name"]),
                    [str(v) for v in a["levels"]],
                    recodes=[Recode(str(r["name"]), r["groups"]) for r in a.get("recodes", [])],
                )
                for a in data
            ]
        )
    except (KeyError, TypeError) as err:
        raise ValidationError(f"the run's manifest holds no readable schema ({err})") from None


def read_manifest(run: Path) -> dict[str, Any] | None:
    """The manifest postdp wrote into a run, or None for a run written by others.

    Refused (one line naming the manifest): a manifest of a version above :data:`VERSION`
    (written by a newer postdp: what it adds cannot be read here), and one whose
    ``levels`` do not name every ``<Geolevel>.parquet`` folder of the run, or name one the
    run lacks (a level left out would be dropped without a word)."""
    path = run / MANIFEST
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ValidationError(f"{path}: not a readable manifest ({err})") from None
    if not isinstance(data, dict):
        raise ValidationError(f"{path}: not a readable manifest")
    version = data.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValidationError(f"{path}: manifest version {version!r} is not a version number")
    if version > VERSION:
        raise ValidationError(
            f"{path}: manifest version {version}; this postdp reads versions 1 to {VERSION} "
            "(upgrade postdp to read this run)"
        )
    levels = data.get("levels")
    if not isinstance(levels, list) or not levels or not all(isinstance(n, str) for n in levels):
        raise ValidationError(f"{path}: `levels` must be a list of geolevel names")
    folders = sorted(p.name for p in run.glob("*.parquet") if p.is_dir())
    named = [f"{n}.parquet" for n in levels]
    left_out = [f for f in folders if f not in named]
    if left_out:
        raise ValidationError(f"{path}: `levels` leaves out the run's folders {left_out}")
    absent = [f for f in named if f not in folders]
    if absent:
        raise ValidationError(f"{path}: `levels` names folders the run lacks: {absent}")
    return data
