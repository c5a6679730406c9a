"""``--report FILE.html``: the option, its checks, and the reports of fairness, plan and
table audits (private; the audit of a hierarchy uses :func:`postdp.report.audit_report`)."""

from __future__ import annotations

import argparse
import importlib.util
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from postdp.cli._io import RunState, check_output_file, write_atomic
from postdp.cli._options import CliError

HELP = (
    "also write one self-contained HTML report (design, headline numbers, a sortable and "
    "filterable table, the figures) to FILE.html"
)


def add_report_option(parser: argparse.ArgumentParser) -> None:
    """The ``--report FILE.html`` option."""
    parser.add_argument("--report", metavar="FILE.html", help=HELP)


def check_report(
    args: argparse.Namespace,
    *,
    inputs: Sequence[Path],
    others: Sequence[Path] = (),
    folder: Path | None = None,
) -> Path | None:
    """Validate ``--report`` before anything is drawn: an .html file that can be written, not
    an input, not another output, not inside the output folder; Jinja2 installed."""
    if args.report is None:
        return None
    if Path(args.report).suffix.lower() not in (".html", ".htm"):
        raise CliError(f"--report {args.report!r}: must end in .html")
    for module in ("jinja2", "matplotlib"):
        if importlib.util.find_spec(module) is None:
            raise CliError(f"--report: needs {module}; pip install 'postdp[report]'")
    path = check_output_file(
        args.report, "--report", inputs=inputs, overwrite=args.overwrite, others=others
    )
    if folder is not None and (path == folder or folder in path.parents):
        raise CliError(f"--report {args.report!r}: is inside --output-dir; write it beside it")
    return path


def command_line(args: argparse.Namespace) -> str:
    """The command as typed (for the report's header)."""
    return "postdp " + shlex.join(getattr(args, "_words", [args.command]))


def write_report(path: Path | None, report: Any, state: RunState, *, overwrite: bool) -> None:
    """Render ``report`` and write it atomically to ``path`` (nothing when ``path`` is None)."""
    if path is None:
        return
    html = report.to_html()

    def write(tmp: Path) -> None:
        tmp.write_text(html, encoding="utf-8")

    write_atomic(path, write, done=lambda: state.written.append(str(path)), overwrite=overwrite)


def figures_from(folder: Path, names: Sequence[str], captions: dict[str, Any]) -> list[Any]:
    """ReportFigures of the PNGs ``names`` in ``folder`` (title, alt, caption per stem)."""
    from postdp.report import ReportFigure

    out = []
    for name in names:
        stem = Path(name).stem
        title, alt, caption = captions.get(stem, captions.get(stem.split("_")[0], ("", "", "")))
        out.append(
            ReportFigure.from_file(
                folder / name, title=title or stem, alt=alt or stem, caption=caption
            )
        )
    return out
