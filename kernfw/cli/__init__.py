"""The ``kernfw`` command line: fit, sweep and compare kernfw models on a dataset.

::

    kernfw fit     --data digits --baseline               # fit, print accuracy and gap; SVC()
    kernfw sweep   --model multiclass --values 0.1,1,10 --jobs 2 --out sweep.csv
    kernfw compare --model multiclass --max-samples 60    # verified against cvxpy
    kernfw info                                           # version, backends, models

Every command takes ``--data`` (a bundled dataset name, an svmlight file or an
``.npz`` with arrays ``X`` and ``y``), ``--test-size``, the model's main
hyperparameters, ``--plot FILE.png`` and ``--out FILE.csv``.  Bad files and
bad options print one line on stderr and exit with status 2; ``kernfw compare``
exits with status 1 when it cannot verify the fit (it prints why).

The package: :mod:`~kernfw.cli.parser` (options), :mod:`~kernfw.cli.data`
(datasets and the split), :mod:`~kernfw.cli.models` (the ``--model``
registry), :mod:`~kernfw.cli.report` (what is printed and written) and
:mod:`~kernfw.cli.commands` (one ``Command`` per subcommand: add a new one
there).
"""

import sys
import traceback
import warnings

from .. import __version__
from .commands import COMMANDS, make_estimator, run_info
from .data import DATASETS, load_data
from .errors import CLIError, one_line
from .models import MODELS
from .parser import Parser
from .report import LineProgress, attach_progress

__all__ = [
    "main",
    "build_parser",
    "load_data",
    "make_estimator",
    "MODELS",
    "DATASETS",
    "COMMANDS",
    "CLIError",
    "LineProgress",
    "attach_progress",
]


def build_parser():
    """The ``kernfw`` argument parser, one subcommand per entry of :data:`COMMANDS`."""
    parser = Parser(
        prog="kernfw", description="Kernel and multiple-kernel classifiers by dual Frank-Wolfe."
    )
    parser.add_argument("--version", action="version", version=f"kernfw {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=Parser)
    for command in COMMANDS:
        subparser = sub.add_parser(command.name, help=command.help)
        command.configure(subparser)
        subparser.set_defaults(func=command.run)
    return parser


def _warning_line(message, category, filename, lineno, line=None):
    return f"kernfw: warning: {' '.join(str(message).split())}\n"


def main(argv=None):
    """Run the ``kernfw`` command; return the exit status (0 ok, 1 ``compare`` not verified,
    2 bad input, 130 Ctrl-C)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        return run_info(args)
    debug = getattr(args, "debug", False)
    previous = warnings.formatwarning
    warnings.formatwarning = _warning_line
    try:
        return args.func(args)
    except KeyboardInterrupt as exc:
        print("kernfw: interrupted", file=sys.stderr)
        for note in getattr(exc, "__notes__", ()):  # e.g. how to resume from --checkpoint
            print(f"kernfw: {note}", file=sys.stderr)
        return 130
    except Exception as exc:
        if debug:  # the traceback, then the same one-line error and exit status
            traceback.print_exc(file=sys.stderr)
        kind = "" if isinstance(exc, CLIError) else f"{type(exc).__name__}: "
        print(f"kernfw {args.command}: error: {kind}{one_line(exc)}", file=sys.stderr)
        return 2
    finally:
        warnings.formatwarning = previous


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
