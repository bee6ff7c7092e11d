"""The ``kernfw`` command line."""

import argparse
import sys

from . import __version__
from .operators import BACKENDS

__all__ = ["main"]


def _info(args):
    print(f"kernfw {__version__}")
    print("kernel operator backends:")
    for name, what in BACKENDS.items():
        print(f"  {name:15s} {what}")
    return 0


def build_parser():
    parser = argparse.ArgumentParser(
        prog="kernfw",
        description="Kernel and multiple-kernel classifiers by dual Frank-Wolfe.")
    parser.add_argument("--version", action="version", version=f"kernfw {__version__}")
    sub = parser.add_subparsers(dest="command")
    info = sub.add_parser("info", help="print the version and the kernel backends")
    info.set_defaults(func=_info)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        return _info(args)
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
