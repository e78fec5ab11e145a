"""``python -m status_store``: the ``status-store`` command."""

import sys

from .cli import main

sys.exit(main())
