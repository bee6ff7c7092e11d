"""Argument parsing: option types, the model hyperparameters and the options every
command shares.  The subcommands themselves are listed in
:data:`kernfw.cli.commands.COMMANDS`."""

import argparse
import functools

from .data import DATASETS
from .models import MODELS
from .options import model_options, parse_value

__all__ = [
    "Parser",
    "hyperparameters",
    "add_common",
    "add_checkpoint_options",
    "float_list",
    "fraction",
    "positive_int",
    "positive_float",
    "jobs",
]


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (no usage block), status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def _checked(convert, expected, accept=lambda value: True):
    """An argparse type: ``convert(text)``, rejected unless ``accept(value)``."""

    def parse(text):
        try:
            value = convert(text)
        except ValueError:
            value = None
        if value is None or not accept(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value

    return parse


def float_list(text):
    """Comma-separated numbers (at least one)."""
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated numbers, got {text!r}"
        ) from None
    if not values:
        raise argparse.ArgumentTypeError("expected at least one number")
    return values


def _gamma(text):
    return text if text in ("scale", "auto") else float(text)


def _check_every(text):
    return text if text == "auto" else int(text)


def _kernel(text):
    names = [k.strip() for k in text.split(",") if k.strip()]
    if not names:
        raise argparse.ArgumentTypeError("expected a kernel name")
    if "precomputed" in names:
        raise argparse.ArgumentTypeError(
            "the command reads features, not Gram matrices: 'precomputed' is for Python; "
            "give kernel names (a comma list of base kernels for the MKL models, e.g. "
            "rbf,poly,linear)"
        )
    return names[0] if len(names) == 1 else names


gamma = _checked(_gamma, "'scale', 'auto' or a number")
fraction = _checked(float, "a number in (0, 1)", lambda v: 0 < v < 1)
positive_int = _checked(int, "a positive integer", lambda v: v >= 1)
positive_float = _checked(float, "a positive number", lambda v: v > 0)
check_every = _checked(
    _check_every, "'auto' or a positive integer", lambda v: v == "auto" or v >= 1
)
jobs = _checked(int, "a positive integer or -1 (all cores)", lambda v: v >= 1 or v == -1)

#: options whose text is read in their own way: a comma list of base kernels, the
#: kernel γ, the certificate schedule (the other options: :func:`kernfw.cli.options.parse_value`)
SPECIAL_TYPES = {"kernel": _kernel, "gamma": gamma, "check_every": check_every}


@functools.cache
def hyperparameters():
    """``{parameter: ModelOption}``: one option per parameter of the ``--model`` estimators
    (:func:`kernfw.cli.options.model_options`)."""
    return model_options(MODELS)


def _option_type(option):
    special = SPECIAL_TYPES.get(option.name)
    if special is not None:
        return special

    def parse(text):
        return parse_value(option, text)

    parse.__name__ = option.name
    return parse


def add_common(parser):
    """The options of every command that fits a model: data, split, model and its
    hyperparameters, outputs, progress."""
    parser.add_argument(
        "--model",
        choices=sorted(MODELS),
        default="multiclass",
        help="the model to train (default: multiclass)",
    )
    parser.add_argument(
        "--data",
        default="digits",
        help=f"bundled dataset ({', '.join(DATASETS)}), an svmlight file or "
        "an .npz with arrays X and y (default: digits)",
    )
    parser.add_argument(
        "--test-size",
        type=fraction,
        default=0.25,
        help="held-out fraction for the test accuracy (default 0.25)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the train/test split")
    parser.add_argument(
        "--standardize",
        action="store_true",
        help="standardize features (fitted on the training split)",
    )
    group = parser.add_argument_group(
        "model hyperparameters (default: the model's own; one per estimator parameter, "
        "'none' for None; [model: choices, default])"
    )
    for name, option in hyperparameters().items():
        group.add_argument(
            option.flag,
            dest=name,
            type=_option_type(option),
            default=argparse.SUPPRESS,
            metavar=name.upper(),
            help=option.help(),
        )
    parser.add_argument("--plot", metavar="FILE.png", help="save a figure to this file")
    parser.add_argument("--out", metavar="FILE.csv", help="write the results table as CSV")
    parser.add_argument(
        "--progress",
        choices=("auto", "bar", "lines", "none"),
        default="auto",
        help="progress display: a rich bar (needs rich), lines, or none "
        "(default: a bar on a terminal with rich, else lines)",
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        help="show the traceback of an error (the exit status stays 2)",
    )


def add_checkpoint_options(parser, command):
    """``--checkpoint DIR`` and ``--save-models`` of the long-running commands."""
    parser.add_argument(
        "--checkpoint",
        metavar="DIR",
        help=f"write each finished fit to DIR as it completes; rerunning the same "
        f"kernfw {command} command with the same DIR resumes (finished fits are not refitted; "
        "other arguments are refused)",
    )
    parser.add_argument(
        "--save-models",
        action="store_true",
        help="with --checkpoint: also save each fitted model in DIR/models",
    )
