"""The ledger knows an input by its content, not its bytes: the same counts re-saved with
CRLF line endings or with the rows (and columns) in another order are the same input, and
their budget accumulates under --budget-cap (issue 41)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from postdp import privacy as _ledger
from postdp.cli import main
from tests.cli._helpers import TABLE

pytest.importorskip("opendp")

WIDE = (
    "id,parent,T,x,y,y1,y2\n"
    "S,,,,,,\n"
    "a,S,,,,,\n"
    "b,S,31,17,14,9,5\n"
    "a1,a,29,13,16,8,8\n"
    "a2,a,43,21,22,11,11\n"
)
TREE = "code,parent,label\nT,,Total\nx,T,Ex\ny,T,Why\ny1,y,Why one\ny2,y,Why two\n"


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def _shuffled(text: str, seed: int, *, columns: bool = False) -> str:
    """The same CSV with its data rows (and, with ``columns``, its columns) in another
    order, CRLF line endings and counts spelled as decimals where they are whole."""
    header, *rows = [line.split(",") for line in text.strip().split("\n")]
    order = list(range(len(header)))
    if columns:
        order = order[:2] + order[2:][::-1]
    rows = [[r[k] for k in order] for r in rows]
    random.Random(seed).shuffle(rows)
    lines = [",".join(header[k] for k in order)] + [",".join(r) for r in rows]
    return "\r\n".join(lines) + "\r\n"


def test_a_crlf_or_shuffled_copy_is_the_same_input_under_the_cap(tmp_path, capsys):
    ledger = tmp_path / "ledger.jsonl"
    (tmp_path / "good.csv").write_text(TABLE)
    crlf = TABLE.replace("\n", "\r\n")
    (tmp_path / "crlf.csv").write_bytes(crlf.encode())
    (tmp_path / "shuffled.csv").write_bytes(_shuffled(TABLE, 3).encode())
    assert (tmp_path / "shuffled.csv").read_bytes() != crlf.encode()

    def release(name: str, out: str, cap: str) -> int:
        argv = ["release", "--input", str(tmp_path / name), "-o", str(tmp_path / out)]
        return main([*argv, "--epsilon", "1", "--ledger", str(ledger), "--budget-cap", cap])

    assert release("good.csv", "a.csv", "3") == 0  # three levels of epsilon 1
    capsys.readouterr()
    for name in ("crlf.csv", "shuffled.csv"):  # epsilon 6 on the same people under a cap of 3
        assert release(name, f"{name}.out.csv", "3") == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--budget-cap 3" in err
        assert "record 1 earlier release(s) of this input" in err and "epsilon = 6" in err
        assert not (tmp_path / f"{name}.out.csv").exists()
    assert len(_lines(ledger)) == 1
    # under a cap with room, they accumulate: the third release sees two earlier ones
    assert release("crlf.csv", "b.csv", "6") == 0
    assert release("shuffled.csv", "c.csv", "9") == 0
    assert "2 earlier release(s) of this input; cumulative budget now epsilon = 9" in (
        capsys.readouterr().out
    )
    records = _lines(ledger)
    assert len({r["input_sha256"] for r in records}) == 3  # three files ...
    assert len({r[_ledger.CONTENT_KEY] for r in records}) == 1  # ... one content
    # other counts are another input
    (tmp_path / "other.csv").write_text(TABLE.replace("7919", "7920").replace("104729", "104730"))
    assert release("other.csv", "d.csv", "3") == 0


def test_a_table_with_rows_and_columns_reordered_is_the_same_input(tmp_path, capsys):
    ledger = tmp_path / "ledger.jsonl"
    (tmp_path / "wide.csv").write_text(WIDE)
    (tmp_path / "tree.csv").write_text(TREE)
    (tmp_path / "wide2.csv").write_bytes(_shuffled(WIDE, 1, columns=True).encode())
    (tmp_path / "tree2.csv").write_bytes(_shuffled(TREE, 2).encode())

    def release(wide: str, tree: str, out: str) -> int:
        argv = ["release", "--input", str(tmp_path / wide), "--categories", str(tmp_path / tree)]
        argv += ["-o", str(tmp_path / out), "--epsilon", "0.5", "--ledger", str(ledger)]
        return main([*argv, "--budget-cap", "1.5"])

    assert release("wide.csv", "tree.csv", "a.csv") == 0  # three levels of 0.5
    capsys.readouterr()
    assert release("wide2.csv", "tree2.csv", "b.csv") == 2
    assert "record 1 earlier release(s) of this input" in capsys.readouterr().err
    assert len(_lines(ledger)) == 1


def test_old_records_without_a_content_digest_still_count_for_the_same_bytes(tmp_path, capsys):
    # a ledger line written before the content digest existed: it has input_sha256 only
    (tmp_path / "good.csv").write_text(TABLE)
    from postdp._files import sha256

    old = {
        "time": "2024-01-01T00:00:00+00:00",
        "input": str(tmp_path / "good.csv"),
        "input_sha256": sha256(tmp_path / "good.csv"),
        "budget": {"epsilon": 3.0, "rho": 0.0},
    }
    ledger = tmp_path / "ledger.jsonl"
    ledger.write_text(json.dumps(old) + "\n")
    argv = ["release", "--input", str(tmp_path / "good.csv"), "-o", str(tmp_path / "a.csv")]
    assert main([*argv, "--ledger", str(ledger), "--budget-cap", "5"]) == 2
    assert "record 1 earlier release(s)" in capsys.readouterr().err
    assert main([*argv, "--ledger", str(ledger), "--budget-cap", "6"]) == 0
