"""Variants of one bench script side by side: each round runs every variant in a fresh process.

Round by round, in turn, so that load on a shared host hits every variant alike. A variant is a set
of environment changes (a value of None removes the variable)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping


def run_rounds(script: str, args: list[str], variants: Mapping[str, Mapping[str, str | None]],
               rounds: int) -> dict[str, list[dict]]:
    """Per variant, the JSON each of its rounds' `python script *args` printed."""
    out: dict[str, list[dict]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, changes in variants.items():
            env = dict(os.environ)
            for key, value in changes.items():
                if value is None:
                    env.pop(key, None)
                else:
                    env[key] = value
            run = subprocess.run([sys.executable, script, *args], env=env, check=True,
                                 capture_output=True, text=True)
            out[name].append(json.loads(run.stdout))
    return out
