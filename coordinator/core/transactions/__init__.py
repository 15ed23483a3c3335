"""The transaction coordinator's domain, sans-IO (machine.py)."""
