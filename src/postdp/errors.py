"""Exceptions and warnings raised by postdp.

Every error postdp raises on purpose derives from :class:`PostdpError`, so a caller (and the
command line) can tell a rejected input from a bug.  Each concrete error also derives from the
builtin it specialises (``ValueError`` or ``TypeError``), so ``except ValueError`` still works.
"""

from __future__ import annotations

__all__ = [
    "AmbiguousIdWarning",
    "BudgetCapError",
    "BudgetError",
    "ConvergenceError",
    "ConvergenceWarning",
    "DegenerateInputWarning",
    "HierarchyError",
    "InfeasibleConstraintsError",
    "PostdpError",
    "PrivacyLeakWarning",
    "UnboundedMomentError",
    "ValidationError",
]


class PostdpError(Exception):
    """Base class of every error postdp raises on purpose."""


class ValidationError(PostdpError, ValueError):
    """A parameter or an input array has a value outside what the function accepts."""


class HierarchyError(PostdpError, ValueError):
    """A table does not describe a valid hierarchy (roots, cycles, orphans, duplicates, sums)."""


class InfeasibleConstraintsError(PostdpError, ValueError):
    """The constraints of a projection have no solution (e.g. public children above a parent)."""


class BudgetError(PostdpError, ValueError):
    """A privacy budget is invalid or cannot be combined or converted as asked."""


class BudgetCapError(BudgetError):
    """A release refused before anything was drawn: with what its ledger records for the
    same input, it would spend more than the ledger's cap (:class:`postdp.Ledger`)."""


class UnboundedMomentError(PostdpError, ValueError):
    """A mechanism setting whose mean or variance is infinite (log-Laplace,
    [mcglinchey2020] Prop. 3)."""


class ConvergenceError(PostdpError, RuntimeError):
    """An exact method exceeded its iteration bound (a bug to report; never expected)."""


class PrivacyLeakWarning(RuntimeWarning):
    """An operation that is fine for a study but must not be used to publish counts."""


class ConvergenceWarning(RuntimeWarning):
    """An iterative method needed its fallback or stopped before its tolerance."""


class DegenerateInputWarning(RuntimeWarning):
    """The input is valid but degenerate (e.g. an empty level), and the result may surprise."""


class AmbiguousIdWarning(UserWarning):
    """Ids were given as numbers, so codes such as FIPS '01' may have lost leading zeros."""
