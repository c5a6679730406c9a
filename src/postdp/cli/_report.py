"""``--report FILE.html``: the option and its checks, and the one epilogue of the commands
that write a study's folder and page (private)."""

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


def write_study(
    args: argparse.Namespace,
    state: RunState,
    out_dir: Path,
    report_path: Path | None,
    study: Any,
    *,
    manifest: dict[str, Any],
    report_options: dict[str, Any] | None = None,
    tables: dict[str, Any] | None = None,
) -> list[Path]:
    """The one epilogue of the commands that write a study's folder (audit, table audit,
    fairness): its tables (``--format``), its figures (unless ``--no-figures``), the manifest
    and, with ``--report``, the page, every file moved into place at once. ``study`` has
    ``tables()``, ``figures()`` and ``report(figures=..., command=..., **report_options)``.
    Returns the paths written (the report last)."""
    from postdp.cli._io import OutputDir

    suffix = ".parquet" if getattr(args, "format", "csv") == "parquet" else ".csv"
    named = tables if tables is not None else {n + suffix: t for n, t in study.tables().items()}
    state.phase = f"writing {out_dir}"
    folder = OutputDir(out_dir, state, overwrite=args.overwrite)
    try:
        for name, table in named.items():
            path = folder.file(name)
            if name.endswith(".parquet"):
                table.to_parquet(path, index=False)
            else:
                table.to_csv(path, index=False)
        drawn = []
        if not args.no_figures:
            from postdp.plots import save_figure

            for name, ax in study.figures().items():
                drawn.append(f"{name}.png")
                save_figure(ax, folder.file(drawn[-1]))
        report = None
        if report_path is not None:
            report = study.report(
                figures=figures_from(folder.tmp, drawn, study.captions),
                command=command_line(args),
                **(report_options or {}),
            )
        written = folder.commit(manifest)
    except BaseException:
        folder.discard()
        raise
    state.written = [str(out_dir)]
    write_report(report_path, report, state, overwrite=args.overwrite)
    return [*written, *([report_path] if report_path is not None else [])]


def print_written(paths: Sequence[Path]) -> None:
    """The last line of every command that writes: what it wrote."""
    print("wrote: " + ", ".join(str(p) for p in paths))
