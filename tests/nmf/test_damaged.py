"""Damaged runs of noisy measurement files: each read exactly or refused in one line that
names the file (or folder), the geocode and the query -- by ``nmf.read`` and by
``postdp postprocess`` alike."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from postdp import nmf
from postdp._files import fingerprint
from postdp.cli import main
from postdp.errors import ValidationError
from postdp.tables import load_strategy, measure

from .conftest import small_table

BLOCKS = "Block.parquet/DPQuery/State=011/part-0.parquet"
TRACTS = "Tract.parquet/DPQuery/State=011/part-0.parquet"
BLOCK_CONSTRAINTS = "Block.parquet/Constraint/State=011/part-0.parquet"


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    """A sound run (two states) that each case copies and damages."""
    t = small_table()
    m = measure(t, load_strategy("pl94-2020-persons").workload(t), secure=False, rng=2)
    return nmf.write(m, tmp_path_factory.mktemp("nmf") / "run")


# -- the damage, each returning what the refusal must name ---------------------------------
def _rows(run, rel, change):
    """Rewrite file ``rel`` of ``run`` as ``change(frame)`` (rows as pandas objects)."""
    path = run / rel
    frame = change(pq.read_table(path).to_pandas())
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)


def _one_answer(answer, value_type=None):
    """The 2nd answer of the 4th row of the State 11 blocks' file set to ``answer``, the
    ``value`` column stored as lists of ``value_type``."""

    def damage(run):
        path = run / BLOCKS
        table = pq.read_table(path)
        values = table.column("value").to_pylist()
        values[3][1] = answer
        column = pa.array(values, pa.list_(value_type or pa.float64()))
        table = table.set_column(table.column_names.index("value"), "value", column)
        pq.write_table(table, path)
        row = table.slice(3, 1).to_pylist()[0]
        return [BLOCKS, repr(row["geocode"]), row["query_name"]]

    return damage


def truncated(run):
    path = run / BLOCKS
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return [BLOCKS]


def flipped_bytes(run):
    path = run / BLOCKS
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    for k in range(middle, middle + 8):
        data[k] ^= 0xFF
    path.write_bytes(bytes(data))
    return [BLOCKS]


def missing_partition(run):
    shutil.rmtree(run / BLOCKS.rsplit("/", 1)[0])
    return ["Block.parquet/DPQuery/State=011", "'011'"]


def deleted_geounit(run):
    """A block's every row gone (it has none in Constraint): only the manifest's count of
    the level's geounits in the subtree finds it."""
    _rows(run, BLOCKS, lambda f: f[f["geocode"] != f["geocode"].iloc[0]])
    return ["Block.parquet/DPQuery/State=011", "Block", "'011'"]


def deleted_answer(run):
    """One row of a block gone: it answers its level's other noisy queries."""
    frame = pq.read_table(run / BLOCKS).to_pandas()
    geocode, query = frame["geocode"].iloc[4], frame["query_name"].iloc[4]
    _rows(run, BLOCKS, lambda f: f.drop(index=4))
    return [BLOCKS, repr(geocode), query.removesuffix("_dpq")]


def deleted_parent(run):
    """A tract's rows gone: its block groups have no parent."""
    frame = pq.read_table(run / TRACTS).to_pandas()
    tract = frame["geocode"].iloc[0]
    _rows(run, TRACTS, lambda f: f[f["geocode"] != tract])
    return ["Block_Group.parquet/DPQuery/State=011/part-0.parquet", f"'{tract}"]


def unmarked_bypass(run):
    """A block's noisy answers gone, a bound on it left in Constraint: not marked as a
    geounit measured with no budget."""
    frame = pq.read_table(run / BLOCKS).to_pandas()
    geocode = frame["geocode"].iloc[0]
    row = frame[(frame["geocode"] == geocode) & (frame["query_name"] == "total_dpq")]
    bound = row.drop(columns=["variance", "plb"]).assign(
        query_name="hhgq_total_lb_con", sign=">=", value=[[0]]
    )
    _rows(run, BLOCKS, lambda f: f[f["geocode"] != geocode])
    _rows(run, BLOCK_CONSTRAINTS, lambda f: pd.concat([f, bound], ignore_index=True))
    return [BLOCK_CONSTRAINTS, repr(geocode), "bypass"]


def _duplicate(conflicting):
    def damage(run):
        frame = pq.read_table(run / BLOCKS).to_pandas()
        extra = frame.iloc[[2]].copy()
        if conflicting:
            extra["value"] = [np.asarray(extra["value"].iloc[0]) + 1]
        _rows(run, BLOCKS, lambda f: pd.concat([f, extra], ignore_index=True))
        name = frame["query_name"].iloc[2].removesuffix("_dpq")
        how = "different answers" if conflicting else "identical"
        return [BLOCKS, repr(frame["geocode"].iloc[2]), f"'{name}'", how]

    return damage


def in_another_subtree(run):
    """A row of a block of State 10 copied into State 11's file."""
    other = pq.read_table(run / BLOCKS.replace("011", "010")).to_pandas()
    _rows(run, BLOCKS, lambda f: pd.concat([f, other.iloc[[0]]], ignore_index=True))
    return [BLOCKS, repr(other["geocode"].iloc[0]), "'011'"]


def without_manifest(damage):
    """A run as the Census publishes it (no manifest: discrete Gaussian noise)."""

    def both(run):
        (run / "postdp-nmf.json").unlink()
        return damage(run)

    return both


CATALOGUE = {
    "truncated": truncated,
    "flipped bytes": flipped_bytes,
    "missing partition": missing_partition,
    "NaN answer": _one_answer(float("nan")),
    "infinite answer": _one_answer(float("inf")),
    "answer 2**62": _one_answer(2**62, pa.int64()),
    "answer -2**62 as a float": _one_answer(-float(2**62)),
    "non-integral answer": _one_answer(2.5),
    "non-integral answer, no manifest": without_manifest(_one_answer(2.5)),
    "deleted geounit": deleted_geounit,
    "deleted answer": deleted_answer,
    "deleted parent": deleted_parent,
    "constraint only, not bypassed": unmarked_bypass,
    "duplicate row": _duplicate(False),
    "duplicate conflicting row": _duplicate(True),
    "duplicate row, no manifest": without_manifest(_duplicate(True)),
    "row in another subtree": in_another_subtree,
}


@pytest.mark.parametrize("case", list(CATALOGUE))
def test_a_damaged_run_is_refused_naming_file_geocode_and_query(original, tmp_path, capsys, case):
    run = tmp_path / "run"
    shutil.copytree(original, run)
    named = CATALOGUE[case](run)
    with pytest.raises(ValidationError) as caught:
        nmf.read(run)
    message = str(caught.value)
    assert "\n" not in message
    for piece in named:
        assert piece in message, (piece, message)
    out = tmp_path / "out"
    args = ["postprocess", str(run), "--method", "project", "--output-dir", str(out), "--quiet"]
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for piece in named:
        assert piece in err, (piece, err)


def test_answers_of_a_continuous_mechanism_are_read_exactly(original, tmp_path):
    """A run whose manifest names a continuous mechanism keeps a fractional answer as it
    is (not cut to an integer); its non-finite answers are still refused."""
    run = tmp_path / "run"
    shutil.copytree(original, run)
    manifest = json.loads((run / "postdp-nmf.json").read_text())
    records = [  # the same rho, Gaussian in place of discrete Gaussian: the same cost
        {**e, "mechanism": "gaussian"} if e["mechanism"] else e for e in manifest["measurements"]
    ]
    changed = {**manifest, "mechanism": "gaussian", "measurements": records}
    (run / "postdp-nmf.json").write_text(json.dumps(changed))
    _one_answer(2.5)(run)
    m = nmf.read(run)
    geo = m.table.geography
    row = pq.read_table(run / BLOCKS).slice(3, 1).to_pylist()[0]
    node = list(geo.ids[geo.levels[5]]).index(row["geocode"][1:])
    i = next(
        k for k, x in enumerate(m.workload.measurements)
        if x.level == 5 and x.query.name == row["query_name"].removesuffix("_dpq")
    )  # fmt: skip
    assert m.values[i][node][1] == 2.5
    _one_answer(float("nan"))(run)
    with pytest.raises(ValidationError, match="not a number"):
        nmf.read(run)


def test_the_fingerprint_follows_the_content(original, tmp_path):
    """A byte of a file changed in place (size and modification time kept) is another run,
    which an output folder of the original is not resumed from."""
    run = tmp_path / "run"
    shutil.copytree(original, run)
    before = fingerprint(run)
    path = run / BLOCKS
    stat = path.stat()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns
    assert fingerprint(run) != before
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    assert fingerprint(run) == before
    (run / ".part-0.parquet.tmp").write_bytes(b"a killed writer's temporary")
    assert fingerprint(run) == before


def _changed_row(run, column, change):
    """Row 3 of the State 11 blocks' file with ``column`` changed (a list column); the
    row's query name without its suffix."""
    path = run / BLOCKS
    table = pq.read_table(path)
    values = table.column(column).to_pylist()
    values[3] = change(values[3])
    field = table.schema.field(column)
    table = table.set_column(table.column_names.index(column), field, pa.array(values, field.type))
    pq.write_table(table, path)
    return str(table.column("query_name")[3]).removesuffix("_dpq")


@pytest.mark.parametrize(
    ("column", "change", "named"),
    [
        ("query_shape", lambda s: [2 * s[0], *s[1:]], "query_shape"),
        ("value", lambda v: v[:-1], "answers per geounit"),
    ],
)
def test_one_row_of_another_shape_or_length_is_refused(original, tmp_path, column, change, named):
    """A query's rows must all have the schema's shape and as many answers: one row out of
    many that differs is refused, naming the level and the query."""
    run = tmp_path / "run"
    shutil.copytree(original, run)
    query = _changed_row(run, column, change)
    with pytest.raises(ValidationError, match=named) as caught:
        nmf.read(run)
    assert f"query {query!r}" in str(caught.value) and "level 5" in str(caught.value)
