"""The command line's user errors: one line on stderr, exit status 2."""

__all__ = ["CLIError", "one_line"]


class CLIError(Exception):
    """A user error: reported as one line, exit status 2."""


def one_line(exc):
    """The message of ``exc`` on one line (its type name if it has none)."""
    text = " ".join(str(exc).split())
    return text or type(exc).__name__
