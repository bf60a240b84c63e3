"""SGLang's per-request multimodal processing with smg-fast's plug-in on vs off.

SGLang's native Rust path runs as a peer; one thread each, in SGLang's own venv, in one run.

    python bench/engines_sglang.py [--rounds N]

Requests: 1 and 4 JPEG images per prompt, 1920x1080 and 2048x2048 (scikit-image's photo
resized), sent as data: URLs as an OpenAI client sends them. For each, the time of SGLang's
``process_mm_data_async`` (what its TokenizerManager awaits per request: media decode, the
processor, prompt expansion, mrope positions) and of the Rust path's ``qwen_vl.preprocess`` on
the same JPEG bytes (decode to patches; no prompt work), median over rounds, wall and CPU (the
Rust path runs threads of its own: compare CPU). Exactness of each arm: its pixel_values against
transformers' own image processor (the torchvision class SGLang builds) on Pillow's decode of the
same bytes, as the fraction of values that differ. The SGLang venv is
``.ci/oracle_venv.sh sglang``.
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from engines import _requests, cpu_model  # noqa: E402  (bench/ on the path above)

RUNNER = "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__main__')"


def _run(python, overlay: Path, workdir: Path, folder: Path, runs: list[dict], rounds: int,
         plugin: str) -> list[dict]:
    from smg_fast.testing.engine_env import run_in_venv

    workdir.mkdir()
    (workdir / "job.pkl").write_bytes(pickle.dumps({"folder": str(folder), "repeat": rounds,
                                                    "runs": runs}))
    script = overlay / "smg_fast" / "testing" / "sglang_runner.py"
    proc = run_in_venv(python, ["-c", RUNNER, str(script), str(workdir)], overlay,
                       {"SMG_FAST_SGLANG": plugin}, timeout=3600)
    if proc.returncode != 0:
        raise SystemExit(f"SGLang runner failed:\n{proc.stderr[-4000:]}")
    return pickle.loads((workdir / "result.pkl").read_bytes())["runs"]


def _differing(arm: dict, ref: dict) -> str:
    """The fraction of pixel_values that differ from the reference ("0" when identical)."""
    if not all(np.array_equal(a, b) for a, b in zip(arm["fields"]["image_grid_thw"],
                                                   ref["fields"]["image_grid_thw"], strict=True)):
        return "grid!"
    pairs = list(zip(arm["fields"]["pixel_values"], ref["fields"]["pixel_values"], strict=True))
    if any(a.dtype != b.dtype or a.shape != b.shape for a, b in pairs):
        return "shape!"
    n = sum(int(np.count_nonzero(a != b)) for a, b in pairs)
    return "0" if n == 0 else f"{n / sum(a.size for a, _ in pairs):.1%}"


def _ms(values: list[float]) -> float:
    return statistics.median(values) * 1e3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="timed calls per request")
    args = parser.parse_args()
    from smg_fast.testing.engine_env import engine_python, make_overlay
    from smg_fast.testing.model_folders import make_qwen_folder

    python = engine_python("sglang", REPO)
    requests = _requests()
    reqs = [r for _, r in requests]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        folder = make_qwen_folder(tmp / "Qwen2-VL-7B-Instruct")
        overlay = make_overlay(tmp / "overlay")
        off, ref, rust = _run(python, overlay, tmp / "off", folder,
                              [{"requests": reqs}, {"mode": "transformers", "requests": reqs},
                               {"mode": "rust", "requests": reqs}], args.rounds, "0")
        (on,) = _run(python, overlay, tmp / "on", folder, [{"requests": reqs}], args.rounds, "1")
    print(f"CPU: {cpu_model()}; per request, 1 thread, median of {args.rounds}; Qwen2-VL hub "
          "config; differing = fraction of pixel_values not equal to transformers on Pillow's "
          "decode")
    print(f"{'request':16} {'SGLang ms':>9} {'cpu':>7} {'+smg ms':>8} {'cpu':>7} "
          f"{'Rust ms':>8} {'cpu':>7} {'x cpu vs SGLang':>15} {'x cpu vs Rust':>13}  "
          "differing: SGLang / +smg / Rust")
    for (name, _), r_off, r_on, r_rust, r_ref in zip(requests, off["requests"], on["requests"],
                                                      rust["requests"], ref["requests"],
                                                      strict=True):
        c_off, c_on, c_rust = _ms(r_off["cpu"]), _ms(r_on["cpu"]), _ms(r_rust["cpu"])
        print(f"{name:16} {_ms(r_off['wall']):9.1f} {c_off:7.1f} {_ms(r_on['wall']):8.1f} "
              f"{c_on:7.1f} {_ms(r_rust['wall']):8.1f} {c_rust:7.1f} {c_off / c_on:15.2f} "
              f"{c_rust / c_on:13.2f}  {_differing(r_off, r_ref)} / {_differing(r_on, r_ref)} "
              f"/ {_differing(r_rust, r_ref)}")
    print(f"image processor: off {off['image_processor']}, on {on['image_processor']}; "
          f"Rust spec {rust['spec']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
