"""``python -m fluid``: the ``fluid`` command line."""

from fluid.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
