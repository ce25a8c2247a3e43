"""``python -m fedrepro``: the same as the ``fedrepro`` command."""
from fedrepro.app.cli import main

raise SystemExit(main())
