"""Workloads with budgets in exact fractions (issue 23): the 2020 persons configuration.

Shares from ``shared/research/pl94-2020-design.md`` sections 1.2 (geolevel shares, US
persons run) and 1.3 (query shares); total rho = (542/339)^2 = 293764/114921 and its
(epsilon, delta = 1e-10) = 17849145/1041158 (about 17.14) from its table of designs."""

from __future__ import annotations

from fractions import Fraction

import pytest

from postdp.errors import ValidationError
from postdp.tables import Workload, pl94_schema

LEVELS = {  # geolevel share, then each query's share of it (section 1.3 columns)
    0: ("104/4099", {"cenrace": "52/4097", "hispanic": "26/4097", "votingage": "26/4097",
                     "hhinstlevels": "26/4097", "hhgq": "26/4097", "hispanic * cenrace": "130/4097",
                     "votingage * cenrace": "130/4097", "votingage * hispanic": "26/4097",
                     "votingage * hispanic * cenrace": "26/241", "detailed": "189/241"}),
    1: ("1440/4099", {"total": "3773/4097", "cenrace": "6/4097", "hispanic": "6/4097",
                      "votingage": "6/4097", "hhinstlevels": "6/4097", "hhgq": "6/4097",
                      "hispanic * cenrace": "12/4097", "votingage * cenrace": "12/4097",
                      "votingage * hispanic": "6/4097",
                      "votingage * hispanic * cenrace": "2/241", "detailed": "230/4097"}),
}  # fmt: skip


def test_exact_shares_compose_to_the_exact_total():
    s = pl94_schema()
    rho = Fraction(293764, 114921)  # (542/339)^2
    # the two measured levels above, and the rest of the budget on one more level's detailed
    rest = 1 - Fraction(104, 4099) - Fraction(1440, 4099)
    levels = {**LEVELS, 2: (str(rest), {"detailed": 1})}
    w = Workload.from_shares(levels, total=str(rho), schema=s)
    assert sum(r for r in w.exact_rho if r is not None) == rho  # exactly
    assert w.budget.rho == float(rho)
    assert w.budget.to_approx_dp(1e-10) == pytest.approx(17849145 / 1041158, abs=1e-6)
    us_detailed = rho * Fraction(104, 4099) * Fraction(189, 241)
    assert w.exact_rho[9] == us_detailed and w.measurements[9].query.name == "detailed"
    # the US level's rho as the notes compute it (0.0649)
    us = sum(r for m, r in zip(w.measurements, w.exact_rho, strict=True) if m.level == 0)
    assert float(us) == pytest.approx(0.0649, abs=5e-5)


def test_shares_must_be_exact_and_add_up():
    s = pl94_schema()
    with pytest.raises(ValidationError, match="add up to 1/2, not 1"):
        Workload.from_shares({0: ("1/2", {"total": 1})}, total=1, schema=s)
    with pytest.raises(ValidationError, match="level 0 add up to 3/4, not 1"):
        Workload.from_shares({0: (1, {"total": "1/4", "hhgq": "1/2"})}, total=1, schema=s)
    with pytest.raises(ValidationError, match="shares must be exact"):
        Workload.from_shares({0: (1, {"total": 0.5, "hhgq": 0.5})}, total=1, schema=s)
    with pytest.raises(ValidationError, match="given by name needs `schema`"):
        Workload.from_shares({0: (1, {"total": 1})}, total=1)
    with pytest.raises(ValidationError, match="`total` must be positive"):
        Workload.from_shares({0: (1, {"total": 1})}, total=0, schema=s)
