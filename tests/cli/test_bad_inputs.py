"""A catalogue of bad and extreme inputs, run through the ``postdp`` entry point.

Each case must exit with status 2 and exactly one line on stderr that names the flag or
column (as typed), with no traceback and no true count, and leave every file that existed
byte-identical with no new file (issue 10). The cases run one after another in this process
(``postdp.cli.main``, each in its own copy of the input folder); a sample of them also runs
through the installed console script, which must say and return exactly the same.
"""

from __future__ import annotations

import pytest

from tests.cli._helpers import (
    TRUE_COUNTS,
    copy_inputs,
    run_postdp,
    run_postdp_process,
    snapshot,
    write_inputs,
)

R = ["release", "--input", "t.csv", "-o", "out.csv"]  # a valid release, to spoil
RS = [*R, "--study"]
A = ["audit", "--input", "t.csv", "--draws", "10", "--no-figures", "--output-dir", "A"]
P = ["posterior", "--components", "250,357"]
F = ["fairness", "title1", "--state", "RI", "--draws", "10", "--output-dir", "F"]
S = ["fairness", "section203", "--draws", "10", "--output-dir", "S"]

CASES: dict[str, tuple[list[str], str]] = {
    # -- release: outputs -----------------------------------------------------------------
    "output-is-input": ([*R[:-2], "-o", "t.csv", "--overwrite"], "-o 't.csv'"),
    "output-is-input-by-another-path": ([*R[:-2], "-o", "./outdir/../t.csv"], "-o"),
    "output-exists": ([*R[:-2], "-o", "existing.csv"], "pass --overwrite"),
    "output-is-folder": ([*R[:-2], "-o", "outdir"], "is a folder"),
    "output-not-creatable": ([*R[:-2], "-o", "/proc/postdp/out.csv"], "-o '/proc/postdp"),
    "output-is-device": ([*R[:-2], "-o", "/dev/full", "--overwrite"], "not a regular file"),
    "output-empty": ([*R[:-2], "-o", ""], "-o ''"),
    "ledger-garbage": ([*R, "--ledger", "ledger_bad.jsonl"], "--ledger"),
    "ledger-is-folder": ([*R, "--ledger", "outdir"], "--ledger"),
    "ledger-is-input": ([*R, "--ledger", "t.csv"], "--ledger"),
    "ledger-with-study": ([*RS, "--ledger", "l.jsonl"], "--ledger"),
    # -- release: options that would be ignored without a word (issue 22) ------------------
    "replicates-without-uncertainty": ([*R, "--replicates", "20"], "--replicates 20: applies"),
    "ci-level-without-uncertainty": ([*R, "--ci-level", "0.8"], "--ci-level 0.8: sets the"),
    "format-on-a-hierarchy": ([*R, "--format", "wide"], "--format wide: applies to table"),
    "weights-without-projection": (
        [*R, "--weights", "inverse-variance", "--postprocess", "clamp"],
        "--weights inverse-variance: weights the projection steps",
    ),
    "weights-on-a-table": (
        ["release", "--table", "p1-us-county", "-o", "o.csv", "--weights", "inverse-variance"],
        "--weights: a table's projection",
    ),
    "audit-table-entities": ([*A, "--table", "p1-us-county", "--entities", "01001"], "--entities"),
    "audit-table-shifts": ([*A, "--table", "p1-us-county", "--shifts", "5"], "--shifts: applies"),
    "audit-weights-without-projection": (
        [*A, "--weights", "inverse-variance"],
        "--weights inverse-variance: weights the projection steps",
    ),
    # -- release: input file ----------------------------------------------------------------
    "latin1-without-encoding": (["release", "--input", "latin.csv", "-o", "o.csv"], "--encoding"),
    "unknown-encoding": ([*R, "--encoding", "klingon"], "--encoding"),
    "input-missing": (["release", "--input", "nope.csv", "-o", "o.csv"], "--input 'nope.csv'"),
    "input-is-folder": (["release", "--input", "outdir", "-o", "o.csv"], "--input 'outdir'"),
    "input-empty": (["release", "--input", "empty.csv", "-o", "o.csv"], "--input 'empty.csv'"),
    "input-header-only": (["release", "--input", "header.csv", "-o", "o.csv"], "--input"),
    "parent-sum-off-by-one": (["release", "--input", "off.csv", "-o", "o.csv"], "--input"),
    "count-above-2-53": (["release", "--input", "big.csv", "-o", "o.csv"], "--count 'count'"),
    # one limit for every count: 2**52, where float64 still holds the fractions of noise
    "count-at-2-52": (["release", "--input", "big52.csv", "-o", "o.csv"], "is 2**52 (about"),
    "fractional-count": (["release", "--input", "frac.csv", "-o", "o.csv"], "--count 'count'"),
    "negative-count": (["release", "--input", "neg.csv", "-o", "o.csv"], "--count 'count'"),
    "nan-count": (["release", "--input", "nan.csv", "-o", "o.csv"], "--count 'count'"),
    "nan-count-laplace": (
        ["release", "--input", "nan.csv", "-o", "o.csv", "--mechanism", "laplace"],
        "--count 'count'",
    ),
    "duplicate-ids": (["release", "--input", "dup.csv", "-o", "o.csv"], "--input"),
    "orphan": (["release", "--input", "orphan.csv", "-o", "o.csv"], "--input"),
    "no-root": (["release", "--input", "noroot.csv", "-o", "o.csv"], "--input"),
    "ragged-rows": (["release", "--input", "ragged.csv", "-o", "o.csv"], "--input"),
    "empty-id": (["release", "--input", "emptyid.csv", "-o", "o.csv"], "--id 'id'"),
    "no-id-column": ([*R, "--id", "geo"], "--id 'geo'"),
    "no-parent-column": ([*R, "--parent", "up"], "--parent 'up'"),
    "no-count-column": ([*R, "--count", "pop"], "--count 'pop'"),
    # -- release: study path ----------------------------------------------------------------
    "seed-without-study": ([*R, "--seed", "3"], "--seed 3"),
    "seed-negative": ([*RS, "--seed", "-1"], "--seed"),
    "seed-text": ([*RS, "--seed", "abc"], "--seed"),
    "seed-fraction": ([*RS, "--seed", "1.5"], "--seed"),
    "seed-huge": ([*RS, "--seed", str(2**70)], "--seed"),
    # -- release: noise ----------------------------------------------------------------------
    "epsilon-empty": ([*R, "--epsilon="], "--epsilon"),
    "epsilon-zero": ([*R, "--epsilon", "0"], "--epsilon"),
    "epsilon-negative": ([*R, "--epsilon", "-1"], "--epsilon"),
    "epsilon-nan": ([*R, "--epsilon", "nan"], "--epsilon"),
    "epsilon-inf": ([*R, "--epsilon", "inf"], "--epsilon"),
    "epsilon-1e200-publishes-truth": ([*R, "--epsilon", "1e200"], "--epsilon '1e+200'"),
    "epsilon-one-level-1e200": ([*R, "--epsilon", "1,1e200,1"], "--epsilon"),
    "epsilon-1e-20-overflows": ([*R, "--epsilon", "1e-20"], "--epsilon"),
    "epsilon-wrong-count": ([*R, "--epsilon", "1,2"], "--epsilon '1,2'"),
    "epsilon-empty-part": ([*R, "--epsilon", "1,,2"], "--epsilon"),
    "epsilon-text": ([*R, "--epsilon", "abc"], "--epsilon"),
    "epsilon-for-gaussian": ([*R, "--mechanism", "gaussian", "--epsilon", "1"], "--epsilon"),
    "rho-for-geometric": ([*R, "--rho", "0.5"], "--rho"),
    "rho-zero": ([*R, "--mechanism", "gaussian", "--rho", "0"], "--rho"),
    "rho-huge": ([*R, "--mechanism", "discrete-gaussian", "--rho", "1e9"], "--rho"),
    "rho-tiny": ([*R, "--mechanism", "gaussian", "--rho", "1e-40"], "--rho"),
    "mechanism-unknown": ([*R, "--mechanism", "exponential"], "--mechanism"),
    "sensitivity-zero": ([*R, "--sensitivity", "0"], "--sensitivity"),
    "sensitivity-fraction-integer-noise": ([*R, "--sensitivity", "1.5"], "--sensitivity"),
    "sensitivity-nan": ([*R, "--sensitivity", "nan"], "--sensitivity"),
    "delta-zero": ([*R, "--mechanism", "gaussian", "--delta", "0"], "--delta"),
    "delta-one": ([*R, "--delta", "1"], "--delta"),
    "delta-text": ([*R, "--delta", "small"], "--delta"),
    # -- release: post-processing ---------------------------------------------------------------
    "postprocess-unknown": ([*R, "--postprocess", "bogus"], "--postprocess 'bogus'"),
    "modified-T-text": ([*R, "--postprocess", "modified:T=abc"], "--postprocess"),
    "modified-no-T": ([*R, "--postprocess", "modified"], "--postprocess"),
    "modified-T-negative": ([*R, "--postprocess", "modified:T=-1"], "--postprocess"),
    "modified-T-nan": ([*R, "--postprocess", "modified:T=nan"], "--postprocess"),
    "clamp-lower-text": ([*R, "--postprocess", "clamp:lower=x"], "--postprocess"),
    "public-without-projection": ([*R, "--public", "01"], "--public '01'"),
    "public-unknown": ([*R, "--postprocess", "project", "--public", "zz"], "--public 'zz'"),
    "public-derives-only-child": (
        [*R, "--postprocess", "project", "--public", "01"],
        "--allow-derived-public",
    ),
    "public-derives-everything": (
        [*R, "--postprocess", "project", "--public", "root,01"],
        "--allow-derived-public",
    ),
    "public-empty": ([*R, "--postprocess", "project", "--public", ""], "--public"),
    "weights-unknown": ([*R, "--weights", "gls"], "--weights"),
    "keep-unknown": ([*R, "--keep", "zzz"], "--keep"),
    "keep-true-counts": ([*R, "--keep", "count"], "--keep"),
    "keep-empty": ([*R, "--keep", ""], "--keep"),
    # -- release: budget ----------------------------------------------------------------------
    "budget-cap-zero": ([*R, "--budget-cap", "0"], "--budget-cap"),
    "budget-cap-negative": ([*R, "--budget-cap", "-5"], "--budget-cap"),
    "budget-cap-exceeded": ([*R, "--budget-cap", "2"], "--budget-cap 2"),
    "budget-cap-with-study": ([*RS, "--budget-cap", "5"], "--budget-cap"),
    "unknown-flag": ([*R, "--foo"], "--foo"),
    "abbreviated-flag": ([*R, "--eps", "1"], "--eps"),
    # -- audit ------------------------------------------------------------------------------------
    "audit-draws-one": ([*A, "--draws", "1"], "--draws"),
    "audit-draws-negative": ([*A, "--draws", "-5"], "--draws"),
    "audit-draws-text": ([*A, "--draws", "many"], "--draws"),
    "audit-batch-zero": ([*A, "--batch", "0"], "--batch"),
    "audit-workers-zero": ([*A, "--workers", "0"], "--workers"),
    "audit-bins-one": ([*A, "--bins", "1"], "--bins"),
    "audit-seed-negative": ([*A, "--seed", "-1"], "--seed"),
    "audit-entities-unknown": ([*A, "--entities", "zz"], "--entities"),
    "audit-shifts-negative": ([*A, "--shifts", "-3"], "--shifts"),
    "audit-shifts-text": ([*A, "--shifts", "a"], "--shifts"),
    "audit-shifts-fraction": ([*A, "--shifts", "1.5"], "--shifts"),
    "audit-format-unknown": ([*A, "--format", "xml"], "--format"),
    "audit-max-memory-tiny": ([*A, "--max-memory", "10k"], "--max-memory"),
    "audit-max-memory-text": ([*A, "--max-memory", "lots"], "--max-memory"),
    "audit-output-dir-is-file": ([*A, "--output-dir", "t.csv"], "--output-dir 't.csv'"),
    "audit-output-dir-not-postdp": ([*A, "--output-dir", "notmine"], "--output-dir 'notmine'"),
    "audit-output-dir-not-postdp-overwrite": (
        [*A, "--output-dir", "notmine", "--overwrite"],
        "--output-dir 'notmine'",
    ),
    "audit-output-dir-earlier-run": ([*A, "--output-dir", "prev"], "--overwrite"),
    "audit-output-dir-cwd": ([*A, "--output-dir", ".", "--overwrite"], "--output-dir '.'"),
    "audit-output-dir-empty": ([*A, "--output-dir", ""], "--output-dir"),
    "audit-epsilon-1e-20": ([*A, "--epsilon", "1e-20"], "--epsilon"),
    "audit-epsilon-1e308": ([*A, "--epsilon", "1e308"], "--epsilon"),
    "audit-modified-T-text": ([*A, "--postprocess", "modified:T=abc"], "--postprocess"),
    "audit-latin1": (
        ["audit", "--input", "latin.csv", "--draws", "10", "--output-dir", "A"],
        "--encoding",
    ),
    "audit-public-unknown": ([*A, "--postprocess", "project", "--public", "zz"], "--public"),
    "audit-off-by-one": (
        ["audit", "--input", "off.csv", "--draws", "10", "--output-dir", "A"],
        "--input",
    ),
    # -- posterior --------------------------------------------------------------------------------
    "components-nan": (["posterior", "--components", "nan"], "--components"),
    "components-fraction": (["posterior", "--components", "250.7,357"], "--components"),
    "components-negative": (["posterior", "--components", "-3,4"], "--components"),
    "components-empty": (["posterior", "--components", ""], "--components"),
    "components-empty-part": (["posterior", "--components", "1,,2"], "--components"),
    "components-missing": (["posterior"], "--components"),
    "window-negative": ([*P, "--window", "-3"], "--window"),
    "window-zero": ([*P, "--window", "0"], "--window"),
    "level-two": ([*P, "--level", "2"], "--level"),
    "level-zero": ([*P, "--level", "0"], "--level"),
    "top-negative": ([*P, "--top", "-3"], "--top"),
    "top-zero": ([*P, "--top", "0"], "--top"),
    "total-mismatch": ([*P, "--total", "9"], "--total 9"),
    "total-negative": ([*P, "--total", "-1"], "--total"),
    "posterior-epsilon-zero": ([*P, "--epsilon", "0"], "--epsilon"),
    "posterior-epsilon-count": ([*P, "--epsilon", "1,2,3"], "--epsilon"),
    "epsilon-total-nan": ([*P, "--epsilon-total", "nan"], "--epsilon-total"),
    "mcmc-draws-zero": ([*P, "--method", "mcmc", "--draws", "0"], "--draws"),
    "mcmc-chains-one": ([*P, "--method", "mcmc", "--chains", "1"], "--chains"),
    "method-unknown": ([*P, "--method", "gibbs"], "--method"),
    "plot-exists": ([*P, "--plot", "existing.csv"], "--plot"),
    "plot-is-folder": ([*P, "--plot", "outdir"], "--plot"),
    "plot-format": ([*P, "--plot", "p.gif"], "--plot"),
    # -- fairness ---------------------------------------------------------------------------------
    "fairness-second-epsilon-zero": ([*F, "--epsilon", "0.1,0"], "--epsilon"),
    "fairness-epsilon-1e200": ([*F, "--epsilon", "0.1,1e200"], "--epsilon"),
    "fairness-modified-T-text": ([*F, "--postprocess", "modified:T=abc"], "--postprocess"),
    "fairness-postprocess-projection": (
        [*F, "--postprocess", "project"],
        "--postprocess 'project'",
    ),
    "fairness-state-unknown": ([*F, "--state", "ZZ"], "--state 'ZZ'"),
    "fairness-s203-state-unknown": ([*S, "--state", "ZZ"], "--state 'ZZ'"),
    "fairness-amount-negative": ([*F, "--amount", "-5"], "--amount"),
    "fairness-amount-nan": ([*F, "--amount", "nan"], "--amount"),
    "fairness-s203-amount": ([*S, "--amount", "5e9"], "--amount"),
    "fairness-draws-one": ([*F, "--draws", "1"], "--draws"),
    "fairness-output-dir-file": ([*F, "--output-dir", "t.csv"], "--output-dir"),
    "fairness-output-dir-not-postdp": ([*F, "--output-dir", "notmine"], "--output-dir"),
    "fairness-problem-unknown": (["fairness", "title2"], "problem"),
    "fairness-mechanism-unknown": ([*F, "--mechanism", "gaussian"], "--mechanism"),
    # -- the command itself -----------------------------------------------------------------------
    "no-command": ([], "COMMAND"),
    "unknown-command": (["publish"], "publish"),
}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """The input folder that each case copies."""
    source = tmp_path_factory.mktemp("inputs")
    write_inputs(source)
    return source


@pytest.fixture(scope="module")
def outcomes(inputs, tmp_path_factory):
    """Run every case in this process; return {case: (result, before, after)}."""
    base = tmp_path_factory.mktemp("cases")
    runs = {}
    for name, (argv, _) in CASES.items():
        folder = copy_inputs(inputs, base / name)
        before = snapshot(folder)
        result = run_postdp(argv, folder)
        runs[name] = (result, before, snapshot(folder))
    return runs


def test_the_catalogue_has_at_least_100_cases():
    assert len(CASES) >= 100


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_one_clear_line_and_changes_nothing(name, outcomes):
    _, expected = CASES[name]
    result, before, after = outcomes[name]
    err = result.stderr
    assert result.returncode == 2, (result.returncode, err, result.stdout)
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert "Traceback" not in err
    assert expected in err, err
    assert err.startswith("postdp"), err
    for count in TRUE_COUNTS:
        assert count not in err, err
    assert after == before  # every earlier file byte-identical, nothing new
    assert "privacy budget spent" not in result.stdout


#: Cases of each command (and of none) run again through the installed console script.
IN_A_PROCESS = [
    "output-is-device",
    "audit-output-dir-not-postdp",
    "components-missing",
    "no-command",
]


@pytest.mark.parametrize("name", IN_A_PROCESS)
def test_the_console_script_says_what_the_in_process_run_says(name, inputs, outcomes, tmp_path):
    """The in-process runner stands in for the real command: same status, same lines."""
    argv, _ = CASES[name]
    folder = copy_inputs(inputs, tmp_path / name)
    before = snapshot(folder)
    done = run_postdp_process(argv, folder)
    in_process, _, _ = outcomes[name]
    assert (done.returncode, done.stdout, done.stderr) == (
        in_process.returncode,
        in_process.stdout,
        in_process.stderr,
    )
    assert snapshot(folder) == before
