"""Allows `python -m hangwatch ...`, the same as the `hangwatch` console script."""

import sys

from hangwatch.cli import main

sys.exit(main())
