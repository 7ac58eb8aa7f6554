"""``python -I -m cortex.adapters.hooks HOST``: the hook entry without the console script."""

from __future__ import annotations

import sys

from cortex.adapters.hooks import main

sys.exit(main(sys.argv[1:]))
