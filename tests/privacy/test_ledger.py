"""The library's privacy accounting, without the command line: a Ledger records the releases
of Mechanism.release, tables.measure(secure=True) and nmf.write, and refuses one over its cap
before any noise is drawn."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import postdp
from postdp import Geometric, Ledger
from postdp.errors import BudgetCapError, ValidationError
from postdp.privacy import array_content, statement, table_content, write_statement
from postdp.tables import load_strategy, measure
from tests.nmf.conftest import small_table

pytest.importorskip("opendp")

COUNTS = [101, 202, 303]


@pytest.fixture
def draws(monkeypatch):
    """Every call of the secure path's samplers (spies on OpenDP's and postdp's exact one)."""
    import postdp.mechanisms.release as release

    calls = []
    real_opendp, real_exact = release.opendp_release, release.exact_release

    def spy(mechanism, values):
        calls.append(np.size(values))
        return real_opendp(mechanism, values)

    def exact_spy(mechanism, values, **kwargs):
        calls.append(np.size(values))
        return real_exact(mechanism, values, **kwargs)

    monkeypatch.setattr(release, "opendp_release", spy)
    monkeypatch.setattr(release, "exact_release", exact_spy)
    return calls


def test_the_ledger_is_public_at_the_top_and_as_a_subpackage():
    assert postdp.Ledger is postdp.privacy.Ledger
    assert "Ledger" in postdp.__all__ and "privacy" in dir(postdp)


def test_a_library_release_records_one_entry_without_a_count(tmp_path, draws):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    out = Geometric(epsilon=0.5).release(COUNTS, ledger=ledger)
    (record,) = ledger.records()
    assert record["mechanism"] == "geometric"
    assert record["budget"] == {"epsilon": 0.5, "rho": 0.0}
    assert record["input_sha256"] == array_content(COUNTS)
    assert record["input_content_sha256"] == array_content(COUNTS)
    assert record["output_sha256"] == array_content(out)
    assert record["path"] == "secure" and record["postdp_version"]
    text = (tmp_path / "ledger.jsonl").read_text()
    for value in record.values():  # digests, names and budgets only: no count, no answer
        assert not isinstance(value, list)
    assert text.count("\n") == 1
    assert ledger.spent(COUNTS).releases == 1 and draws == [3]


def test_a_release_over_the_cap_is_refused_before_any_draw(tmp_path, draws):
    ledger = Ledger(tmp_path / "ledger.jsonl", cap=1.0)
    Geometric(epsilon=0.75).release(COUNTS, ledger=ledger)
    assert draws == [3]
    with pytest.raises(BudgetCapError, match=r"1 earlier release.*epsilon = 1\.5.*cap of 1") as e:
        Geometric(epsilon=0.75).release(COUNTS, ledger=ledger)
    assert "\n" not in str(e.value) and not any(str(c) in str(e.value) for c in COUNTS)
    assert draws == [3]  # the sampler never ran
    assert len(ledger.records()) == 1
    Geometric(epsilon=0.75).release([1, 2, 3], ledger=ledger)  # another input: its own budget
    assert len(ledger.records()) == 2 and draws == [3, 3]


def test_the_cap_counts_a_zcdp_release_at_the_ledgers_delta(tmp_path, draws):
    from postdp.mechanisms import Budget, DiscreteGaussian

    ledger = Ledger(tmp_path / "l.jsonl", cap=Budget.zcdp(0.02).to_approx_dp(1e-6), delta=1e-6)
    DiscreteGaussian(rho=0.01).release(COUNTS, ledger=ledger)
    DiscreteGaussian(rho=0.01).release(COUNTS, ledger=ledger)  # exactly the cap: allowed
    with pytest.raises(BudgetCapError):
        DiscreteGaussian(rho=0.001).release(COUNTS, ledger=ledger)
    assert len(draws) == 2


def test_the_ledger_checks_its_arguments(tmp_path):
    with pytest.raises(ValidationError, match="`cap` must be positive"):
        Ledger(tmp_path / "l.jsonl", cap=0)
    with pytest.raises(ValidationError, match="`delta` must lie in"):
        Ledger(tmp_path / "l.jsonl", delta=1.0)
    with pytest.raises(TypeError, match="`ledger` must be a Ledger"):
        Geometric(epsilon=1.0).release(COUNTS, ledger=str(tmp_path / "l.jsonl"))


def test_a_library_release_and_a_command_line_release_share_the_file_format(tmp_path):
    """The CLI's reader accepts the library's records (the same file counts both)."""
    from postdp.privacy import read, spent_on

    path = tmp_path / "l.jsonl"
    Geometric(epsilon=1.0).release(COUNTS, ledger=Ledger(path))
    records = read(path, "--ledger")
    assert spent_on(records, array_content(COUNTS)).epsilon == 1.0


def test_measure_records_a_draw_and_refuses_one_over_the_cap(tmp_path, draws):
    table = small_table()
    work = load_strategy("pl94-2020-persons").workload(table)
    cap = work.budget.to_approx_dp(1e-10) * 1.5
    ledger = Ledger(tmp_path / "ledger.jsonl", cap=cap)
    m = measure(table, work, ledger=ledger)
    (record,) = ledger.records()
    assert record["input_sha256"] == table_content(table)
    assert record["status"] == "drawn, not published" and record["reservation"] == m.recorded
    assert len(record["measurements"]) == len(work.measurements)
    assert record["budget"] == {"epsilon": work.budget.epsilon, "rho": work.budget.rho}
    assert record["sampler"].startswith("postdp-exact ")
    n = len(draws)
    assert n > 0
    with pytest.raises(BudgetCapError, match="nothing was drawn"):
        measure(table, work, ledger=ledger)
    assert len(draws) == n and len(ledger.records()) == 1
    with pytest.raises(ValidationError, match="study-path draw"):
        measure(table, work, secure=False, rng=0, ledger=ledger)


def test_a_measured_draw_written_with_the_same_ledger_counts_once(tmp_path):
    table = small_table()
    work = load_strategy("pl94-2020-persons").workload(table)
    ledger = Ledger(tmp_path / "ledger.jsonl", cap=work.budget.to_approx_dp(1e-10) * 1.5)
    m = measure(table, work, ledger=ledger)
    run = postdp.nmf.write(m, tmp_path / "run", ledger=ledger)
    drawn, published = ledger.records()
    assert published["status"] == "published" and published["reservation"] == m.recorded
    assert published["output"] == str(run.resolve()) and published["output_sha256"]
    spent = ledger.spent(content=table_content(table))
    assert spent.releases == 1 and spent.rho == pytest.approx(work.budget.rho)
    about = json.loads((run / "privacy.json").read_text())
    assert about["path"] == "secure" and about["output_sha256"] == published["output_sha256"]
    assert about["budget"] == drawn["budget"]


def test_writing_an_unrecorded_draw_records_it_and_is_capped(tmp_path):
    table = small_table()
    work = load_strategy("pl94-2020-persons").workload(table)
    m = measure(table, work)  # no ledger: not recorded
    ledger = Ledger(tmp_path / "ledger.jsonl", cap=work.budget.to_approx_dp(1e-10) * 1.5)
    postdp.nmf.write(m, tmp_path / "a", ledger=ledger)
    (record,) = ledger.records()
    assert "reservation" not in record and record["input_sha256"] == table_content(table)
    with pytest.raises(BudgetCapError):  # the same draw again is another release: refused
        postdp.nmf.write(m, tmp_path / "b", ledger=ledger)
    assert not (tmp_path / "b").exists() and len(ledger.records()) == 1
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    study = measure(table, work, secure=False, rng=0)
    with pytest.raises(ValidationError, match="study-path draw"):
        postdp.nmf.write(study, tmp_path / "c", ledger=ledger)


def test_the_statement_is_written_atomically(tmp_path, monkeypatch):
    path = tmp_path / "out.csv.privacy.json"
    path.write_text('{"earlier": true}\n')
    record = {"budget": {"epsilon": 1.0, "rho": 0.0}, "input_sha256": "x"}
    content = statement(record, secure=True, derived=[])

    def failing(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", failing)
    with pytest.raises(OSError, match="No space"):
        write_statement(path, content)
    assert path.read_text() == '{"earlier": true}\n'  # what was there, whole
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary left
    monkeypatch.undo()
    write_statement(path, content)
    assert json.loads(path.read_text())["epsilon_delta"][0]["epsilon"] == 1.0
