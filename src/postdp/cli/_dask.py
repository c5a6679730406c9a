"""Dask for the commands that run tasks on it (``--scheduler local|ADDRESS``,
``--workers``): connect, and close without the workers' noise."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from postdp.cli._options import CliError

__all__ = ["close_quietly", "connect"]


def connect(args: argparse.Namespace) -> tuple[Any, Any]:
    """The Dask client and the cluster it started of ``--scheduler`` (``(None, None)``
    without it): ``local`` starts a LocalCluster of ``--workers`` processes, anything else is
    a scheduler's address, refused in one line when it cannot be reached."""
    if args.scheduler is None:
        return None, None
    import importlib

    try:  # an optional extra: typed as Any here
        distributed: Any = importlib.import_module("dask.distributed")
    except ImportError:
        raise CliError("--scheduler: needs Dask (pip install 'postdp[dask]')") from None
    if args.scheduler == "local":
        from postdp._files import sigint_held

        made: list[Any] = []
        try:
            # Ctrl-C waits for the cluster (so that it is closed, not left half started);
            # the workers get it too (the terminal sends it to every process of the job) and
            # would print their tracebacks: their standard error is the null device
            with sigint_held(), _stderr_to_null():
                made.append(
                    distributed.LocalCluster(
                        n_workers=args.workers,
                        threads_per_worker=1,
                        processes=True,
                        # its HTTP server on a free port: two jobs at once must not both
                        # want 8787 (the default, even with no dashboard)
                        dashboard_address=":0",
                    )
                )
                made.insert(0, distributed.Client(made[0]))
        except BaseException:
            close_quietly(*made)
            raise
        return made[0], made[1]
    try:
        return distributed.Client(args.scheduler, timeout="10s"), None
    except OSError as exc:
        raise CliError(f"--scheduler {args.scheduler!r}: cannot connect ({exc})") from None


@contextmanager
def _stderr_to_null() -> Iterator[None]:
    """File descriptor 2 on the null device over a block: the processes started in it (a
    LocalCluster's workers) keep it, so that their logs and their tracebacks when Ctrl-C
    reaches them are not shown (postdp reports a task's error, a dead worker and an
    interrupt itself, in one line)."""
    sys.stderr.flush()
    saved = os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def close_quietly(client: Any, cluster: Any) -> None:
    """Close a Dask client and its cluster after an interrupt or an error, without the
    logs and tracebacks of the workers being stopped (postdp says what happened)."""
    import logging

    loggers = [logging.getLogger(n) for n in ("distributed", "tornado", "asyncio")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL + 1)
    try:
        for part in (client, cluster):
            if part is not None:
                with suppress(Exception):
                    part.close()
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)
