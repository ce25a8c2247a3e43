"""``python -m fedrepro``: the same as the ``fedrepro`` command."""
from fedrepro.app.cli import main

# Guarded so that importing this module (the site's API reference, autodoc) never runs the CLI.
if __name__ == "__main__":
    raise SystemExit(main())
