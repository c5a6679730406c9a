"""``postdp reproduce``: regenerate the seeds' tables and figures on the bundled data."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from typing import Any

from postdp.cli._io import OutputDir, RunState, check_output_dir
from postdp.cli._options import CliError, add_output_options

__all__ = ["add_parser", "run"]

DESCRIPTION = """\
Regenerate the tables and figures of the seed papers that the bundled public data allow:
'postdp reproduce list' prints one name per line with what it reproduces; 'postdp reproduce
NAME' (or 'all') runs it, prints every reproduced number next to the seed's printed value
(or claim) and the difference, and writes the figures, comparison.csv and an HTML page of
the comparison (reproduce.html) to --output-dir. Study path: numpy draws from fixed seeds.
Where a printed value cannot be reproduced the page says why, with the evidence.
"""


def add_parser(commands: Any) -> None:
    """Register the ``reproduce`` subcommand."""
    parser = commands.add_parser(
        "reproduce",
        help="regenerate the seed papers' tables and figures and compare with them",
        description=DESCRIPTION,
    )
    parser.add_argument("name", metavar="{list|NAME|all}", help="what to reproduce")
    parser.add_argument(
        "--output-dir",
        default="reproduce",
        metavar="DIR",
        help="folder for the figures, comparison.csv and reproduce.html (default reproduce)",
    )
    parser.add_argument(
        "--fast",
        action="store_true",
        help="fewer draws (the tolerances widen with the Monte Carlo error)",
    )
    add_output_options(parser)
    parser.set_defaults(func=run)


_EXTRAS = {"sklearn": "learn"}  # the pip extra that installs a module


def run(args: argparse.Namespace, state: RunState) -> int:
    """List, or check the name and the folder, reproduce, then write the folder at once."""
    from postdp.reproduce import reproductions, requirements

    names = reproductions()
    if args.name == "list":
        width = max(map(len, names))
        for name, what in names.items():
            print(f"{name:<{width}}  {what}")
        return 0
    if args.name != "all" and args.name not in names:
        raise CliError(
            f"{args.name!r}: not a reproduction; 'postdp reproduce list' shows them "
            f"({', '.join(names)})"
        )
    for module in ("matplotlib", "jinja2"):
        if importlib.util.find_spec(module) is None:
            raise CliError(f"reproduce needs {module}: pip install 'postdp[report]'")
    selected = list(names) if args.name == "all" else [args.name]
    for name in selected:  # optional modules only where a reproduction uses them
        for module in requirements(name):
            if importlib.util.find_spec(module) is None:
                extra = _EXTRAS.get(module, module)
                raise CliError(
                    f"{args.name!r}: {name} needs {module}: pip install 'postdp[{extra}]'"
                    + (" (or name the others one by one)" if args.name == "all" else "")
                )
    out_dir = check_output_dir(args.output_dir, "--output-dir", inputs=[], overwrite=args.overwrite)

    import time

    from postdp.cli._options import progress
    from postdp.reproduce import comparison_frame, reproduce, reproduction_report

    results = []
    with progress("reproduce", len(selected), quiet=args.quiet) as bar:
        for name in selected:
            state.phase = f"reproducing {name}"
            start = time.perf_counter()
            result = reproduce(name, fast=args.fast)
            results.append(result)
            _print(result, time.perf_counter() - start)
            bar.update(1)
    frame = comparison_frame(results)
    from postdp.cli._report import command_line

    html = reproduction_report(results, command=command_line(args)).to_html()
    state.phase = f"writing {out_dir}"
    folder = OutputDir(out_dir, state, overwrite=args.overwrite)
    try:
        for result in results:
            for file, figure in result.figures:
                folder.file(file).write_bytes(figure.png)
        frame.to_csv(folder.file("comparison.csv"), index=False)
        folder.file("reproduce.html").write_text(html, encoding="utf-8")
        written = folder.commit(
            {"command": "postdp reproduce", "name": args.name, "fast": args.fast}
        )
    except BaseException:
        folder.discard()
        raise
    state.written = [str(out_dir)]
    counts = {str(k): int(v) for k, v in frame["status"].value_counts().items()}
    print(
        "summary: "
        + ", ".join(f"{counts[k]} {k}" for k in sorted(counts))
        + f"; wrote {len(written)} files to {out_dir}"
    )
    return 0


def _print(result: Any, seconds: float) -> None:
    """Every number of one reproduction: ours, the seed's, the difference, the status."""
    out = sys.stdout
    print(f"== {result.name} ({seconds:.1f} s)", file=out)
    for c in result.rows:
        if isinstance(c.published, int | float):
            print(
                f"  {c.quantity}: reproduced {c.reproduced:.6g}, seed {c.published:g}, "
                f"difference {c.difference:+.3g} (tolerance {c.tolerance:.3g}): {c.status}",
                file=out,
            )
        elif c.published:
            print(
                f"  {c.quantity}: {c.reproduced:.6g}; seed: {c.published!r}: {c.status}", file=out
            )
        else:
            print(f"  {c.quantity}: {c.reproduced:.6g}", file=out)
    for note in result.notes:
        print(f"  note: {note}", file=out)
