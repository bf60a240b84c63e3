"""On/off environment switches shared by the plug-ins and the imaging settings."""

from __future__ import annotations

import os


def enabled(env: str) -> bool:
    """False when the variable is 0 / false / off / no (case and spaces ignored); True otherwise."""
    return os.environ.get(env, "1").strip().lower() not in ("0", "false", "off", "no")
