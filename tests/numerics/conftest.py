"""Fixtures only the numerics tests use (the shared ones are in tests/conftest.py)."""
