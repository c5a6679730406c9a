"""Privacy budgets and their sequential composition."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from postdp._typing import PrivacyMeasure
from postdp.errors import BudgetError

__all__ = ["Budget"]


@dataclass(frozen=True, slots=True)
class Budget:
    """Privacy spent by one or several mechanisms.

    A budget keeps its pure-DP part and its zero-concentrated (zCDP) part apart, because they
    compose differently: ``epsilon`` is the sum of the epsilons of the pure ε-DP mechanisms
    it covers and ``rho`` the sum of the rhos of the ρ-zCDP ones.

    Parameters
    ----------
    epsilon : float, default 0
        Pure-DP part, ε ≥ 0.
    rho : float, default 0
        zCDP part, ρ ≥ 0.

    Notes
    -----
    Sequential composition adds epsilons (pure DP) and adds rhos (zCDP). A pure ε-DP
    mechanism is also (ε²/2)-zCDP, so a mixed budget is (ρ + ε²/2)-zCDP overall
    (Bun and Steinke 2016, Prop. 1.4). A ρ-zCDP guarantee implies
    (ρ + 2·sqrt(ρ·log(1/δ)), δ)-DP for every δ in (0, 1) (Bun and Steinke 2016, Prop. 1.3).

    Examples
    --------
    >>> from postdp import Budget
    >>> total = Budget.compose([Budget.pure(0.5), Budget.pure(0.5), Budget.pure(1.0)])
    >>> total.epsilon, total.measure
    (2.0, 'pure')
    >>> round(Budget.zcdp(0.5).to_approx_dp(1e-6), 3)
    5.757
    """

    epsilon: float = 0.0
    rho: float = 0.0

    def __post_init__(self) -> None:
        for name in ("epsilon", "rho"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"`{name}` must be a real number; got {type(value).__name__}")
            if not math.isfinite(value) or value < 0:
                raise BudgetError(f"`{name}` must be nonnegative and finite; got {value!r}")
            object.__setattr__(self, name, float(value))

    @classmethod
    def pure(cls, epsilon: float) -> Budget:
        """Budget of a pure ε-DP mechanism.

        Parameters
        ----------
        epsilon : float
            ε ≥ 0.

        Returns
        -------
        Budget

        Examples
        --------
        >>> Budget.pure(1.0)
        Budget(epsilon=1.0, rho=0.0)
        """
        return cls(epsilon=epsilon)

    @classmethod
    def zcdp(cls, rho: float) -> Budget:
        """Budget of a ρ-zCDP mechanism.

        Parameters
        ----------
        rho : float
            ρ ≥ 0.

        Returns
        -------
        Budget

        Examples
        --------
        >>> Budget.zcdp(0.25)
        Budget(epsilon=0.0, rho=0.25)
        """
        return cls(rho=rho)

    @classmethod
    def compose(cls, budgets: Iterable[Budget]) -> Budget:
        """Sequential composition: the budget of running every mechanism on the same data.

        Parameters
        ----------
        budgets : iterable of Budget

        Returns
        -------
        Budget
            Epsilons added, rhos added.

        Examples
        --------
        >>> Budget.compose([Budget.pure(1.0), Budget.zcdp(0.125)])
        Budget(epsilon=1.0, rho=0.125)
        """
        epsilon = 0.0
        rho = 0.0
        for b in budgets:
            if not isinstance(b, Budget):
                raise TypeError(f"`budgets` must hold Budget objects; got {type(b).__name__}")
            epsilon += b.epsilon
            rho += b.rho
        return cls(epsilon=epsilon, rho=rho)

    def __add__(self, other: Budget) -> Budget:
        if not isinstance(other, Budget):
            return NotImplemented
        return Budget.compose([self, other])

    @property
    def measure(self) -> PrivacyMeasure:
        """``"pure"`` when the budget is pure ε-DP, ``"zcdp"`` when it has a zCDP part."""
        return "zcdp" if self.rho > 0 else "pure"

    @property
    def total_rho(self) -> float:
        """The whole budget as one zCDP parameter, ρ + ε²/2."""
        return self.rho + self.epsilon**2 / 2

    def to_approx_dp(self, delta: float) -> float:
        """The ε of an (ε, δ)-DP guarantee implied by this budget.

        Parameters
        ----------
        delta : float
            δ in (0, 1).

        Returns
        -------
        float
            ε; for a pure budget this is ``epsilon`` itself. For a budget with a zCDP part it
            is the smaller of (ε_pure + ρ + 2·sqrt(ρ·log(1/δ))) and
            (ρ' + 2·sqrt(ρ'·log(1/δ))) with ρ' = ρ + ε_pure²/2.

        Examples
        --------
        >>> Budget.pure(2.0).to_approx_dp(1e-9)
        2.0
        """
        if isinstance(delta, bool) or not isinstance(delta, int | float):
            raise TypeError(f"`delta` must be a real number; got {type(delta).__name__}")
        if not 0.0 < delta < 1.0:
            raise BudgetError(f"`delta` must lie in (0, 1); got {delta!r}")
        if self.rho == 0:
            return self.epsilon
        log_term = math.log(1.0 / delta)
        split = self.epsilon + self.rho + 2.0 * math.sqrt(self.rho * log_term)
        merged = self.total_rho + 2.0 * math.sqrt(self.total_rho * log_term)
        return min(split, merged)

    def __str__(self) -> str:
        if self.rho == 0:
            return f"epsilon = {self.epsilon:g} (pure DP)"
        if self.epsilon == 0:
            return f"rho = {self.rho:g} (zCDP)"
        return f"epsilon = {self.epsilon:g} (pure DP) + rho = {self.rho:g} (zCDP)"
