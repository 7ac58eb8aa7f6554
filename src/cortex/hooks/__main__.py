"""``python -I -m cortex.hooks HOST``: the hook entry without the console script's imports."""

from __future__ import annotations

import sys

from cortex.hooks import main

sys.exit(main(sys.argv[1:]))
