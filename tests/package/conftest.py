"""Fixtures only the package tests use (the shared ones are in tests/conftest.py)."""
