"""The package version.

The one place it is written. setup.py compiles it into the native extension, and the package refuses
to import an extension built from another version."""

__version__ = "0.1.0"
