#!/usr/bin/env bash
# System tools the tests use that pip cannot install: libjpeg-turbo's jpegtran (Debian's
# libjpeg-turbo-progs), which makes the arithmetic-coded JPEGs of tests/test_fast_decode_jpeg.py
# (no Python encoder writes them). Kept when already there; uses apt (root or sudo).
set -euo pipefail
if ! command -v jpegtran >/dev/null; then
    SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq libjpeg-turbo-progs >/dev/null
fi
echo "test tools ready: $(command -v jpegtran)"
