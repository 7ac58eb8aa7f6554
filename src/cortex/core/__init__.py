"""The engine's pure logic. Importing it first routes dataclass creation through the compiled-
method cache (``cortex.codecache``): the models defined here are most of the engine's
dataclasses."""

import cortex.codecache  # noqa: F401 - installs itself
