"""Encode routing across a fleet of smg-fast servers.

Cache-affine (rendezvous hashing of each image's content key), load-bounded, and retrying only
failed items on their next member."""

from .client import AsyncRoutedClient, RoutedClient, RoutedError
from .member import FingerprintMismatch

__all__ = ["AsyncRoutedClient", "FingerprintMismatch", "RoutedClient", "RoutedError"]
