"""``python -m kernfw`` runs the ``kernfw`` command."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
