#!/usr/bin/env bash
# Makes (or finds) a reference virtualenv from a pin file in .ci/venvs/ and prints its python.
#
#   .ci/oracle_venv.sh torchvision      -> /root/.cache/smg-fast/venvs/torchvision-<hash>/bin/python
#
# The venv lives outside the clone, under SMG_FAST_VENV_CACHE (default ~/.cache/smg-fast/venvs),
# named after the pin file and the first 12 hex digits of the sha256 of its bytes: a warm CI run
# reuses it, and changing a pin makes a new one (the old one is left for `rm -r`). A venv counts
# as ready only once its install finished (a marker file written last); a half-made one is
# removed and made again. Progress goes to stderr; stdout is the python path alone.
set -euo pipefail
name="${1:?usage: .ci/oracle_venv.sh NAME (a pin file .ci/venvs/NAME.txt)}"
pins="$(dirname "$0")/venvs/$name.txt"
[ -f "$pins" ] || { echo "error: no pin file $pins" >&2; exit 2; }

cache="${SMG_FAST_VENV_CACHE:-$HOME/.cache/smg-fast/venvs}"
hash="$(sha256sum "$pins" | cut -c1-12)"
venv="$cache/$name-$hash"
if [ -f "$venv/.smg-ready" ] && [ -x "$venv/bin/python" ]; then
    echo "$name venv ready: $venv" >&2
    echo "$venv/bin/python"
    exit 0
fi
mkdir -p "$cache"
exec 9>"$cache/.$name-$hash.lock"
flock 9  # two runs at once: the second waits, then finds it ready
if [ ! -f "$venv/.smg-ready" ]; then
    rm -rf "$venv"
    start=$(date +%s)
    echo "making the $name venv ($pins) at $venv ..." >&2
    python -m venv "$venv"
    "$venv/bin/python" -m pip install --upgrade pip >&2
    "$venv/bin/python" -m pip install --no-cache-dir -r "$pins" >&2
    touch "$venv/.smg-ready"
    echo "$name venv made in $(( $(date +%s) - start )) s" >&2
fi
echo "$venv/bin/python"
