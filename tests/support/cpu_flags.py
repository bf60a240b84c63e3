"""The CPU's feature flags as the Linux kernel reports them (/proc/cpuinfo).

For tests that check smg_fast's own detection and kernel choice against an independent source."""

from __future__ import annotations

from pathlib import Path


def cpu_flags() -> set[str]:
    """The first CPU's flags; empty where /proc/cpuinfo has none (not x86 Linux)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    return set(text.split("flags")[1].split("\n")[0].split()) if "flags" in text else set()
