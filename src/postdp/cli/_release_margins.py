"""The intervals of ``postdp release --uncertainty gls`` (and the checks of the other
methods that must fail before anything is drawn), for hierarchies and tables (private;
called by :mod:`postdp.cli.release`)."""

from __future__ import annotations

import argparse
from typing import Any

from postdp.cli._options import CliError
from postdp.postprocess.estimators import PROJECT, estimator, estimators

__all__ = ["hierarchy_margins", "table_margins"]


def hierarchy_margins(args: argparse.Namespace, h: Any, mechanisms: list[Any], public: Any) -> Any:
    """Half-widths of the exact GLS intervals of a hierarchy release, or None (checked
    before anything is drawn)."""
    if args.uncertainty is None:
        return None
    option = f"--uncertainty {args.uncertainty}"
    if args.postprocess.replace(" ", "") != PROJECT.name:
        raise CliError(f"{option}: exact GLS margins are for --postprocess {PROJECT.name} alone")
    variances = {m.variance() for m in mechanisms}
    if args.weights != "inverse-variance" and len(variances) > 1:
        raise CliError(
            f"{option}: the levels' noise differs, so (P) is least squares only with "
            "--weights inverse-variance"
        )
    root = str(h.ids[h.root])
    if public not in (None, [root]):
        raise CliError(f"{option}: margins allow --public root only")
    import numpy as np
    from scipy import stats

    from postdp.postprocess.variances import hierarchy_variances

    z = float(stats.norm.isf((1 - args.ci_level) / 2))
    return z * np.sqrt(hierarchy_variances(h, mechanisms, public_root=public is not None))


def table_margins(
    args: argparse.Namespace,
    step: str | None,
    projector: Any,
    work: Any,
    shape: tuple[int, int],
) -> Any:
    """Half-widths of the --uncertainty gls intervals (from the design alone), or None; the
    other methods are checked here, before anything is drawn."""
    if args.uncertainty is None:
        return None
    if args.uncertainty == "posterior":
        raise CliError("--uncertainty posterior: for hierarchies released with bayes only")
    if args.format != "long":
        raise CliError(f"--uncertainty {args.uncertainty}: the intervals need --format long")
    if args.uncertainty == "replicates":
        if step is None:
            raise CliError("--uncertainty replicates: needs a --postprocess for a table")
        need = args.replicates * shape[0] * shape[1] * 4
        if need > 2 << 30:
            raise CliError(
                f"--replicates {args.replicates}: would hold {need / 2**30:.1f} GiB of replicate "
                "errors (replicates x geounits x categories x 4 bytes); use fewer"
            )
        return None
    if step is None or not estimator(step).variances:
        raise CliError(
            f"--uncertainty {args.uncertainty}: exact GLS margins are for --postprocess "
            f"{' or '.join(e.name for e in estimators('table') if e.variances)} (the "
            "least-squares estimate)"
        )
    if any(m.weight is not None for m in work.measurements):
        raise CliError(
            f"--uncertainty {args.uncertainty}: GLS margins need the inverse-variance weights "
            "(remove 'weight' from --design)"
        )
    from scipy import stats

    z = float(stats.norm.isf((1 - args.ci_level) / 2))
    import numpy as np

    return z * np.sqrt(projector.variances())
