"""Helpers the test areas share, imported as ``support.<name>`` (tests/ is on sys.path)."""
