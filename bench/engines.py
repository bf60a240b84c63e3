"""vLLM's per-request rendering with smg-fast's plugin on vs off, in vLLM's own venv.

The whole rendering (chat template, tokenization, media decode, multimodal processor), one thread,
both arms in one run.

    python bench/engines.py [--rounds N] [--modes uint8,float32]

Requests: 1 and 4 JPEG images per prompt, 1920x1080 and 2048x2048 (scikit-image's photo
resized), sent as data: URLs as an OpenAI client sends them. For each, the time of
``render_chat`` (what vLLM's API server does for a chat request before the engine sees it),
median over rounds of distinct images, wall and CPU (all threads: vLLM runs the processor
under its own torch thread setting), in vLLM's default mode (uint8 patches, normalized on the
device) and with ``mm_device_do_normalize=False`` (float32 on the CPU). Each request's first
render with the plugin on is compared with vLLM's own (off): the ``exact`` column, and the exit
status is 1 when any differs. The vLLM venv is
``.ci/oracle_venv.sh vllm``.
"""

from __future__ import annotations

import argparse
import io
import pickle
import platform
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

SIZES = ((1920, 1080), (2048, 2048))
COUNTS = (1, 4)
MODES = {"uint8": {}, "float32": {"mm_device_do_normalize": False}}


def cpu_model() -> str:
    """The host CPU's model name (every figure is printed with it)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def fresh_page_ms_per_mb(megabytes: int = 64, reps: int = 5) -> float:
    """This host's cost of first writing fresh anonymous 4 KiB pages, ms per MB (median).

    Every processor output vLLM keeps is fresh memory, so this cost (high in VMs, where the host
    backs guest pages lazily) sits in both arms' figures and bounds the ratio on large outputs."""
    import mmap
    import time

    costs = []
    for _ in range(reps):
        region = mmap.mmap(-1, megabytes << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        pages = np.frombuffer(region, np.uint8)
        start = time.perf_counter()
        pages[::4096] = 1
        costs.append((time.perf_counter() - start) * 1e3 / megabytes)
        del pages
        region.close()
    return statistics.median(costs)


def _requests(rounds: int) -> list[tuple[str, dict]]:
    """The benchmark's requests: per size and count, a checked one and ``rounds`` timed ones.

    Every image is distinct (vLLM caches processor outputs by content even when its multimodal cache
    is skipped)."""
    from PIL import Image
    from references import photo_file

    with Image.open(photo_file()) as im:
        base = im.convert("RGB")
    out = []
    for size in SIZES:
        photos = []
        for i in range(max(COUNTS) * (rounds + 1)):
            buf = io.BytesIO()
            base.rotate(0.25 * i).resize(size, Image.Resampling.LANCZOS).save(buf, "JPEG",
                                                                             quality=90)
            photos.append(("jpeg", buf.getvalue()))
        for n in COUNTS:
            groups = [photos[k * n:(k + 1) * n] for k in range(rounds + 1)]
            out.append((f"{n} x {size[0]}x{size[1]}", {"images": groups[0],
                                                       "timed": groups[1:]}))
    return out


def _run(python, overlay, workdir: Path, folder: Path, requests, modes, plugin):
    from smg_fast.testing import vllm_runner
    from smg_fast.testing.engine_env import run_in_venv

    workdir.mkdir()
    job = {"folder": str(folder),
           "runs": [{"engine": MODES[m], "requests": [r for _, r in requests]} for m in modes]}
    (workdir / "job.pkl").write_bytes(pickle.dumps(job))
    proc = run_in_venv(python, [vllm_runner.__file__, str(workdir)], overlay,
                       {"SMG_FAST_VLLM": plugin, "SMG_FAST_NUM_THREADS": "1"},
                       timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"vLLM runner failed:\n{proc.stderr[-4000:]}")
    return pickle.loads((workdir / "result.pkl").read_bytes())["runs"]


def _same(a: dict, b: dict) -> bool:
    if a["prompt_token_ids"] != b["prompt_token_ids"] or set(a["fields"]) != set(b["fields"]):
        return False
    return all(x.dtype == y.dtype and np.array_equal(x, y)
               for k in a["fields"] for x, y in zip(a["fields"][k], b["fields"][k], strict=True))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="timed renders per request")
    parser.add_argument("--modes", default="uint8,float32",
                        help="comma-separated: uint8 (vLLM's default), float32")
    args = parser.parse_args()
    modes = args.modes.split(",")
    from smg_fast.testing.engine_env import engine_python, make_overlay
    from smg_fast.testing.model_folders import make_qwen_folder

    python = engine_python("vllm", REPO)
    requests = _requests(args.rounds)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        folder = make_qwen_folder(tmp / "Qwen2-VL-7B-Instruct")
        overlay = make_overlay(tmp / "overlay")
        off = _run(python, overlay, tmp / "off", folder, requests, modes, "0")
        on = _run(python, overlay, tmp / "on", folder, requests, modes, "1")
    import os

    print(f"CPU: {cpu_model()}; SMG_FAST_ISA={os.environ.get('SMG_FAST_ISA', '(best available)')}; "
          f"vLLM render_chat per request, median of {args.rounds}; Qwen2-VL hub config; "
          f"fresh 4 KiB pages {fresh_page_ms_per_mb():.2f} ms/MB (uint8 output of one 1920x1080 "
          "image: 12.7 MB, float32: 50.6 MB)")
    print(f"{'mode':8} {'request':18} {'vLLM ms':>9} {'+smg ms':>9} {'x wall':>7} "
          f"{'vLLM cpu':>9} {'+smg cpu':>9} {'x cpu':>6}  exact")
    differ = 0
    for m, run_off, run_on in zip(modes, off, on, strict=True):
        for (name, _), r_off, r_on in zip(requests, run_off["requests"], run_on["requests"],
                                          strict=True):
            w_off, w_on = (statistics.median(r["wall"]) * 1e3 for r in (r_off, r_on))
            c_off, c_on = (statistics.median(r["cpu"]) * 1e3 for r in (r_off, r_on))
            same = _same(r_on, r_off)
            differ += not same
            print(f"{m:8} {name:18} {w_off:9.1f} {w_on:9.1f} {w_off / w_on:7.2f} "
                  f"{c_off:9.1f} {c_on:9.1f} {c_off / c_on:6.2f}  "
                  f"{'yes' if same else 'NO'}")
        print(f"{m:8} image processor: off {run_off['image_processor']}, "
              f"on {run_on['image_processor']}")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
