"""Figures: drawn on the Agg backend, checked by their content, never shown."""

import matplotlib
import numpy as np
import pytest

from postdp import Geometric, Laplace
from postdp.plots import plot_nonneg_bias
from postdp.postprocess import clamp_bias

matplotlib.use("Agg")


@pytest.mark.parametrize("m", [Laplace.from_scale(2.0), Geometric(epsilon=0.5)], ids=repr)
def test_nonneg_bias_plot(m):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    out = plot_nonneg_bias(m, temperatures=[0.5, 1.0, 2.0], ax=ax)
    assert out is ax
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels[:3] == ["ramp max(0, x)", labels[1], "restriction (costs 2ε)"]
    assert labels[1].startswith("translated ramp")
    assert sum(label.startswith("modified, T =") for label in labels) == 3
    ramp = ax.get_lines()[0]
    np.testing.assert_allclose(ramp.get_ydata(), clamp_bias(ramp.get_xdata(), m))
    plt.close(fig)


def test_plot_on_a_new_figure_with_given_values():
    import matplotlib.pyplot as plt

    ax = plot_nonneg_bias(Laplace.from_scale(1.0), q=[0, 1, 2, 3], temperatures=[])
    assert len(ax.get_lines()) == 4  # three curves and the zero line
    assert ax.get_lines()[0].get_xdata().tolist() == [0, 1, 2, 3]
    plt.close(ax.figure)


def test_posterior_plot_exact_and_mcmc():
    import matplotlib.pyplot as plt

    from postdp.bayes import exact_posterior, sample_posterior
    from postdp.plots import plot_posterior

    g = Geometric(1.0)
    post = exact_posterior([3, 4], 7, total_mechanism=g, component_mechanisms=g, window=10)
    axes = plot_posterior(post, released=[3, 4])
    assert len(axes) == 3
    heights = [p.get_height() for p in axes[0].patches]
    np.testing.assert_allclose(heights, post.marginal(0)[1])
    plt.close(axes[0].figure)
    res = sample_posterior(
        [3, 4], 7, total_mechanism=g, component_mechanisms=g, n_draws=50, chains=2, rng=0
    )
    axes = plot_posterior(res)
    assert len(axes) == 3
    plt.close(axes[0].figure)


def test_errors_by_size_draws_one_measure():
    """Issue 27: the table audit's figure plots MAE points against MAE lines (it plotted
    RMSE points under an MAE caption)."""
    from postdp import Geometric, Hierarchy, simulate
    from postdp.analysis import ReleaseDesign
    from postdp.plots import plot_errors_by_size
    from postdp.tables import Measurement, Query, Table, Workload

    geo = Hierarchy.from_parents(["S", "a", "b"], [None, "S", "S"])
    cat = Hierarchy.from_parents(["T", "x", "y"], [None, "T", "T"])
    t = Table(geo, cat, [[30, 40], [5, 6]])
    work = Workload([Measurement(k, Query.detailed(cat), Geometric(epsilon=1.0)) for k in (0, 1)])
    d = ReleaseDesign(t, work)
    res = simulate(d, n_draws=200, rng=0)
    ax = plot_errors_by_size(res, d.metrics(res)[0], t)
    drawn = np.concatenate([c.get_offsets()[:, 1] for c in ax.collections])
    mae_totals = res.mae.reshape(geo.n, cat.n)[:, 0]
    np.testing.assert_allclose(np.sort(drawn), np.sort(mae_totals[mae_totals > 0]))
    assert "MAE" in ax.get_ylabel() and "RMSE" not in ax.get_ylabel()
