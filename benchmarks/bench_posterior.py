"""Speed of the seed-003 posterior: Table 3 exactly, and an S = 50 MCMC to ESS >= 1,000.

Run by hand (never collected by pytest)::

    python benchmarks/bench_posterior.py

The seed reports about 3.5 minutes in R for Table 3 (target here: under 1 second). The S = 50
run draws 50 counts of seed 003's Scenario-1 shape, releases them with the Bayesian
post-processing at eps = 1, and samples the posterior, doubling the draws until every
component's effective sample size is at least 1,000.
"""

from __future__ import annotations

import time

import numpy as np

from postdp import Geometric
from postdp.bayes import bayes_release, exact_posterior, sample_posterior


def main() -> None:
    g = Geometric(1.0)
    times = []
    for _ in range(5):
        start = time.perf_counter()
        post = exact_posterior(
            [250, 357], 607, total_mechanism=g, component_mechanisms=g, window=30
        )
        times.append(time.perf_counter() - start)
    print(
        f"Table 3 exact posterior (61 x 61 grid): best {min(times) * 1e3:.1f} ms "
        f"(seed's R code: ~210 s); top probability {post.top(1)['probability'][0]:.4f}"
    )

    rng = np.random.default_rng(0)
    counts = np.r_[[0, 0, 0, 1, 2, 3], rng.integers(15, 1000, 44)]
    r = bayes_release(
        g.sample([counts.sum()], rng=1),
        [g.sample(counts, rng=2)],
        total_mechanism=g,
        component_mechanisms=g,
    )
    draws = 1000
    start = time.perf_counter()
    while True:
        res = sample_posterior(
            r.components[0],
            int(r.total[0]),
            total_mechanism=g,
            component_mechanisms=g,
            n_draws=draws,
            chains=4,
            rng=3,
        )
        elapsed = time.perf_counter() - start
        print(
            f"S = 50 MCMC: 4 chains x {draws} draws (+{draws // 2} burn-in): min ESS "
            f"{res.ess.min():.0f}, median ESS {np.median(res.ess):.0f}, max R-hat "
            f"{res.rhat.max():.3f}, acceptance {res.acceptance:.2f}; cumulative {elapsed:.1f} s"
        )
        if res.ess.min() >= 1000:
            break
        draws *= 2


if __name__ == "__main__":
    main()
