#!/usr/bin/env bash
# System packages the build and tests use that pip cannot install (Debian, via apt; root or sudo;
# kept when already there):
# - libjpeg-turbo's jpegtran (libjpeg-turbo-progs), which makes the arithmetic-coded JPEGs of
#   tests/decode/test_fast_decode_jpeg.py (no Python encoder writes them);
# - libjpeg's headers (libjpeg62-turbo-dev), with which the native core is built to drive
#   Pillow's own libjpeg (csrc/decode/jpeg.cpp; without them the JPEG path uses simplejpeg and
#   the tests of the native path fail). Run it before `pip install .`;
# - clang-format, with which .ci/run checks csrc against .clang-format;
# - FFmpeg 5's shared libraries, which torchcodec (in the vLLM venv: the oracle of the video
#   decoder tests, tests/video/test_video_decoders.py) loads at import; pip cannot install them.
set -euo pipefail
missing=()
command -v jpegtran >/dev/null || missing+=(libjpeg-turbo-progs)
grep -qs "define JPEG_LIB_VERSION *62" /usr/include/jconfig.h /usr/include/*/jconfig.h ||
    missing+=(libjpeg62-turbo-dev)  # the 6.2 API (libjpeg 8/9 headers describe another ABI)
command -v clang-format >/dev/null || missing+=(clang-format)
for lib in libavcodec59 libavformat59 libavutil57 libswscale6 libavfilter8 libswresample4 libavdevice59; do
    dpkg -s "$lib" >/dev/null 2>&1 || missing+=("$lib")
done
if [ ${#missing[@]} -gt 0 ]; then
    SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
echo "test tools ready: $(command -v jpegtran), jpeglib.h (libjpeg 6.2 API), $(clang-format --version)"
