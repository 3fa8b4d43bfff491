"""``python -m ares_viewer.cli``: the ``ares-viewer`` command."""

import sys

from ares_viewer.cli import main

sys.exit(main())
