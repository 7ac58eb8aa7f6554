"""Adapters: thin translators from each harness's shapes to service calls.

One package per way in (``cli``, ``hooks``, ``mcp``, ``openclaw``); they never import each
other, except that the CLI launches another adapter through its entry point. What several of
them must agree on lives here.
"""

HOSTS = ("claude-code", "codex", "gemini", "cursor")
"""Agent harnesses that run ``cortex hook HOST`` (installed by ``cortex install HOST``)."""
