"""Privacy budgets and their sequential composition."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from postdp._typing import PrivacyMeasure
from postdp.errors import BudgetError

__all__ = ["Budget", "zcdp_to_epsilon"]


@dataclass(frozen=True, slots=True)
class Budget:
    """Privacy spent by one or several mechanisms.

    A budget keeps its pure-DP part and its zero-concentrated (zCDP) part apart, because they
    compose differently: ``epsilon`` is the sum of the epsilons of the pure ε-DP mechanisms
    it covers and ``rho`` the sum of the rhos of the ρ-zCDP ones. It also keeps, per term,
    the zCDP equivalent of the pure part, ``pure_rho`` = Σ ε_i²/2, which is smaller than
    (Σ ε_i)²/2 when several pure mechanisms are composed.

    Parameters
    ----------
    epsilon : float, default 0
        Pure-DP part, ε ≥ 0.
    rho : float, default 0
        zCDP part, ρ ≥ 0.
    pure_rho : float, optional
        Σ ε_i²/2 over the pure terms; when not given the pure part is taken as one term,
        ε²/2 (the most it can be). :meth:`compose` keeps it exact.

    Notes
    -----
    Sequential composition adds epsilons (pure DP) and adds rhos (zCDP). A pure ε_i-DP
    mechanism is also (ε_i²/2)-zCDP (Bun and Steinke 2016, Prop. 1.4), so a mixed budget is
    (ρ + Σ ε_i²/2)-zCDP overall. A ρ-zCDP guarantee implies (ε, δ)-DP with
    ε = inf over α > 1 of αρ + (log(1/δ) + (α - 1)·log(1 - 1/α) - log α)/(α - 1)
    (Canonne, Kamath and Steinke 2020, Prop. 12; the conversion OpenDP uses), which is
    never worse than the classic ρ + 2·sqrt(ρ·log(1/δ)) (Bun and Steinke 2016, Prop. 1.3).

    Examples
    --------
    >>> from postdp import Budget
    >>> total = Budget.compose([Budget.pure(0.5), Budget.pure(0.5), Budget.pure(1.0)])
    >>> total.epsilon, total.measure
    (2.0, 'pure')
    >>> round(Budget.zcdp(0.5).to_approx_dp(1e-6), 3)
    5.222
    """

    epsilon: float = 0.0
    rho: float = 0.0
    pure_rho: float | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("epsilon", "rho"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"`{name}` must be a real number; got {type(value).__name__}")
            if not math.isfinite(value) or value < 0:
                raise BudgetError(f"`{name}` must be nonnegative and finite; got {value!r}")
            object.__setattr__(self, name, float(value))
        most = self.epsilon**2 / 2
        if self.pure_rho is None:
            object.__setattr__(self, "pure_rho", most)
        elif not (0 <= float(self.pure_rho) <= most * (1 + 1e-12)):
            raise BudgetError(f"`pure_rho` must lie in [0, epsilon**2/2]; got {self.pure_rho!r}")

    def __call__(self) -> Budget:
        """This budget: ``x.budget`` is a property everywhere in postdp (designs, workloads,
        strategies, measurements); ``x.budget`` reads the same value.

        Examples
        --------
        >>> b = Budget.pure(1.0)
        >>> b() is b
        True
        """
        return self

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
        pure_rho = 0.0
        for b in budgets:
            if not isinstance(b, Budget):
                raise TypeError(f"`budgets` must hold Budget objects; got {type(b).__name__}")
            epsilon += b.epsilon
            rho += b.rho
            pure_rho += b._pure_rho
        return cls(epsilon=epsilon, rho=rho, pure_rho=min(pure_rho, epsilon**2 / 2))

    def __add__(self, other: Budget) -> Budget:
        if not isinstance(other, Budget):
            return NotImplemented
        return Budget.compose([self, other])

    @property
    def measure(self) -> PrivacyMeasure:
        """``"pure"`` when the budget is pure ε-DP, ``"zcdp"`` when it has a zCDP part."""
        return "zcdp" if self.rho > 0 else "pure"

    @property
    def _pure_rho(self) -> float:
        return self.epsilon**2 / 2 if self.pure_rho is None else float(self.pure_rho)

    @property
    def total_rho(self) -> float:
        """The whole budget as one zCDP parameter, ρ + Σ ε_i²/2.

        Examples
        --------
        >>> b = Budget.compose([Budget.pure(0.5), Budget.zcdp(0.1), Budget.pure(1.0)])
        >>> round(b.total_rho, 12)
        0.725
        """
        return self.rho + self._pure_rho

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
            is the smaller of ε_pure + ε_zCDP(ρ, δ) and ε_zCDP(ρ + Σ ε_i²/2, δ), with the
            optimal conversion ε_zCDP of the class Notes, rounded up by a relative 1e-12 so
            that floating-point error never understates the loss.

        Examples
        --------
        >>> Budget.pure(2.0).to_approx_dp(1e-9)
        2.0
        >>> round(Budget.zcdp(0.125).to_approx_dp(1e-6), 3)  # 2.753 by rho + 2 sqrt(...)
        2.419
        """
        if isinstance(delta, bool) or not isinstance(delta, int | float):
            raise TypeError(f"`delta` must be a real number; got {type(delta).__name__}")
        if not 0.0 < delta < 1.0:
            raise BudgetError(f"`delta` must lie in (0, 1); got {delta!r}")
        if self.rho == 0:
            return self.epsilon
        split = self.epsilon + zcdp_to_epsilon(self.rho, delta)
        merged = zcdp_to_epsilon(self.total_rho, delta)
        return min(split, merged)

    def __str__(self) -> str:
        if self.rho == 0:
            return f"epsilon = {self.epsilon:g} (pure DP)"
        if self.epsilon == 0:
            return f"rho = {self.rho:g} (zCDP)"
        return f"epsilon = {self.epsilon:g} (pure DP) + rho = {self.rho:g} (zCDP)"


def zcdp_to_epsilon(rho: float, delta: float) -> float:
    """The ε of the (ε, δ)-DP guarantee implied by ρ-zCDP (the optimal conversion).

    Parameters
    ----------
    rho : float
        ρ ≥ 0.
    delta : float
        δ in (0, 1).

    Returns
    -------
    float
        inf over α > 1 of αρ + (log(1/δ) + (α - 1)·log(1 - 1/α) - log α)/(α - 1)
        (Canonne, Kamath and Steinke 2020, Prop. 12), and never more than
        ρ + 2·sqrt(ρ·log(1/δ)); rounded up by a relative 1e-12.

    Examples
    --------
    >>> round(zcdp_to_epsilon(0.5, 1e-6), 4)
    5.2215
    """
    if rho == 0:
        return 0.0
    from scipy.optimize import minimize_scalar

    log_term = math.log(1.0 / delta)

    def bound(t: float) -> float:
        alpha = 1.0 + math.exp(t)
        return alpha * rho + (
            log_term + (alpha - 1.0) * math.log1p(-1.0 / alpha) - math.log(alpha)
        ) / (alpha - 1.0)

    # the optimal alpha is near 1 + sqrt(log(1/delta)/rho); search log(alpha - 1) around it
    centre = 0.5 * math.log(log_term / rho)
    best = minimize_scalar(
        bound, bounds=(centre - 25.0, centre + 25.0), method="bounded", options={"xatol": 1e-10}
    )
    classic = rho + 2.0 * math.sqrt(rho * log_term)
    return min(float(best.fun), classic) * (1.0 + 1e-12)
