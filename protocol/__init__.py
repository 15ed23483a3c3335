"""Bytes ↔ messages: framing, headers, the api-version table, kio codecs, error codes."""

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode"]
