"""The ``postdp`` command line: one module per command, thin handlers over the library.

Every command follows one order: validate every option and the input, check every output
path, then draw, then write atomically. A rejected input is one line on stderr naming the
flag as typed, with exit status 2 (``--debug`` shows the traceback); Ctrl-C exits 130 with
one line saying what was and was not written. Heavy modules (numpy, pandas, scipy, OpenDP)
are imported only inside the handlers, after the interrupt handling is in place.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

__all__ = ["build_parser", "main"]

_COMMANDS = (
    "release",
    "measure",
    "postprocess",
    "tabulate",
    "audit",
    "posterior",
    "fairness",
    "study",
    "plan",
    "verify",
    "reproduce",
)
#: The module of a command whose name is not its module's.
_MODULES = {"measure": "nmf_measure", "postprocess": "nmf_postprocess"}


def build_parser() -> Any:
    """The argument parser of the ``postdp`` command (exposed for tests and docs).

    Returns
    -------
    argparse.ArgumentParser

    Examples
    --------
    >>> build_parser().prog
    'postdp'
    """
    import importlib

    from postdp import __version__
    from postdp.cli._options import Parser

    parser = Parser(
        prog="postdp",
        description="Publish differentially private counts over a hierarchy and audit them.",
    )
    parser.add_argument("--version", action="version", version=f"postdp {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands._parser_class = Parser
    for name in _COMMANDS:
        importlib.import_module(f"postdp.cli.{_MODULES.get(name, name)}").add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``postdp`` command line; return the exit status.

    Parameters
    ----------
    argv : sequence of str, optional
        Arguments without the program name (default: ``sys.argv[1:]``).

    Returns
    -------
    int
        0 on success (and for ``--help``), 2 on a rejected input, 130 when interrupted
        (Ctrl-C).

    Examples
    --------
    >>> main(["release", "--seed", "1"])  # one line on stderr: --seed needs --study
    2
    """
    words = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in words
    from postdp.cli._io import RunState

    state = RunState()
    previous = _catch_interrupts(state)
    try:
        try:
            parser = build_parser()
            try:
                args = parser.parse_args(words)
            except SystemExit as stop:  # --help, --version, or a one-line usage error
                return stop.code if isinstance(stop.code, int) else 2
            args._typed = [w.split("=", 1)[0] for w in words if w.startswith("-")]
            args._words = words
            return _dispatch(args, state, debug)
        except KeyboardInterrupt:
            print(f"postdp: {state.describe()}", file=sys.stderr, flush=True)
            return 130
        except Exception:
            if not state.interrupted:
                raise
            print(f"postdp: {state.describe()}", file=sys.stderr, flush=True)
            return 130
        finally:
            state.close()
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
    except KeyboardInterrupt:  # on the way out: the cleanups may not have run yet
        state.close()  # idempotent: each cleanup leaves the list once it has run
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        print(f"postdp: {state.describe()}", file=sys.stderr, flush=True)
        return 130


def _catch_interrupts(state: Any) -> Any:
    """Record Ctrl-C in ``state`` before raising it; return the handler it replaces.

    Some libraries turn a ``KeyboardInterrupt`` raised inside their callbacks into their
    own error (pandas' C parser reports it as a parse error); the record lets the
    command still report an interruption (exit 130), not a bad input (exit 2).
    """
    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum: int, frame: object) -> None:
        state.interrupted = True
        raise KeyboardInterrupt

    return signal.signal(signal.SIGINT, handler)


def _dispatch(args: Any, state: Any, debug: bool) -> int:
    """Run the handler; turn a rejected input into one line on stderr and exit status 2."""
    import warnings

    from postdp.cli._options import CliError
    from postdp.errors import PostdpError

    prog = f"postdp {args.command}"

    def one_line(message: Warning | str, category: type[Warning], *_: object, **__: object) -> None:
        print(f"{prog}: warning: {' '.join(str(message).split())}", file=sys.stderr, flush=True)

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("default")
            # a developer's diagnostic (e.g. a file an import left open when Ctrl-C cut it
            # short), not a message for the user of the command
            warnings.simplefilter("ignore", ResourceWarning)
            warnings.showwarning = one_line
            status: int = args.func(args, state)
    except (CliError, PostdpError, ImportError, OSError) as exc:
        if state.interrupted:
            raise KeyboardInterrupt from None
        if debug:
            raise
        message = " ".join(str(exc).split()) or type(exc).__name__
        if isinstance(exc, OSError) and not isinstance(exc, CliError):
            message = f"{exc.strerror or exc} ({exc.filename})" if exc.filename else message
        print(f"{prog}: error: {message}", file=sys.stderr, flush=True)
        return 2
    return status
