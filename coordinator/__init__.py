"""The group coordinator: sans-IO group state machines and the thin asyncio shell around them."""

__version__ = "0.1.0"
