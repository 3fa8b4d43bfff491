"""``python -m ares_viewer.cli``: the ``ares-viewer`` command."""

import sys

from ares_viewer.cli import main

if __name__ == "__main__":
    sys.exit(main())
