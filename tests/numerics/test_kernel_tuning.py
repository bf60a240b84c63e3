"""Self-tuning patchify dispatch (SMG_FAST_TUNE): what it may choose, and that the choice is unseen.

Each input class (dtype, patch shape, order and the candidates' forms) is timed once per process
at first use and the fastest allowed kernel runs it from then on. The choice must be one of the
kernels the cap and this CPU allow (read from /proc/cpuinfo), the outputs must be identical with
tuning on and off, many threads first-using a class at once must time it once and agree, and
SMG_FAST_TUNE=0 must keep the tables' fixed order. The reference comparisons run with tuning on in
the default suites and with it off under every cap (test_isa_paths)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from support.fork_watch import env_with_support
from test_isa_paths import allowed, host_flags

import smg_fast

# Patch 14 merge 2 temporal 2, patch 16, patch 14 merge 1, channel-last patches, a whole image.
FAMILIES = ["qwen2_vl", "qwen3_vl", "kimi_k25", "gemma4", "gemma3"]
DTYPES = ["float32", "bfloat16", "float16"]

# Prints, as JSON, kernel_info() and each pipeline's kernels after writing every family's output
# for a random 640x480 image in every dtype to argv[1] (an .npz).
OUTPUTS = textwrap.dedent("""
    import json, sys
    import numpy as np
    import smg_fast
    img = np.random.default_rng(7).integers(0, 256, (480, 640, 3), dtype=np.uint8)
    outs, kernels = {}, {}
    for family in sys.argv[2].split(","):
        proc = smg_fast.load_processor(family)
        for dtype in sys.argv[3].split(","):
            pv = np.asarray(proc([img], dtype=dtype)["pixel_values"])
            outs[f"{family} {dtype}"] = pv.view(np.uint8)
            pipe = proc.pipeline(dtype)
            kernels[f"{family} {dtype}"] = [pipe.kernel, pipe.fixed_kernel]
    np.savez(sys.argv[1], **outs)
    print(json.dumps({"info": smg_fast.kernel_info(), "kernels": kernels}))
""")


def child_env() -> dict[str, str]:
    """This environment less SMG_FAST_TUNE, importing the smg_fast this process imported."""
    env = {k: v for k, v in os.environ.items() if k != "SMG_FAST_TUNE"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(smg_fast.__file__).parents[1]),
                                         env.get("PYTHONPATH", "")])
    return env


def outputs(tmp_path: Path, tune: str | None) -> tuple[dict[str, np.ndarray], dict]:
    """Every family's outputs in every dtype, from a fresh process with SMG_FAST_TUNE=tune."""
    env = child_env()
    if tune is not None:
        env["SMG_FAST_TUNE"] = tune
    path = tmp_path / f"out-{tune}.npz"
    run = subprocess.run([sys.executable, "-c", OUTPUTS, str(path), ",".join(FAMILIES),
                          ",".join(DTYPES)], env=env, capture_output=True, text=True, check=True)
    with np.load(path) as z:
        return {k: z[k] for k in z.files}, json.loads(run.stdout)


def test_outputs_identical_with_tuning_on_and_off(tmp_path):
    on, on_report = outputs(tmp_path, None)
    off, off_report = outputs(tmp_path, "0")
    assert on.keys() == off.keys() and len(on) == len(FAMILIES) * len(DTYPES)
    for case in on:
        assert np.array_equal(on[case], off[case]), case
    assert on_report["info"]["tuning"]["enabled"] and on_report["info"]["tuning"]["choices"]
    assert not off_report["info"]["tuning"]["enabled"]
    for kernel, fixed in off_report["kernels"].values():
        assert kernel == fixed  # tuning off: the fixed order
    for case, (kernel, fixed) in on_report["kernels"].items():
        assert fixed == off_report["kernels"][case][1]
        if case.startswith("gemma3 "):  # 896-pixel patches: whole images are not timed
            assert kernel == fixed


def check_choices(info: dict, stages: tuple[str, ...] = ("patchify",)) -> None:
    """Each tuning record chose an allowed kernel: the fastest it timed, or the first near a tie.

    Records of every stage in stages are checked; at least one of them must exist."""
    may_run = allowed(info["isa_cap"], host_flags())
    choices = [c for c in info["tuning"]["choices"] if c["stage"] in stages]
    assert choices
    for c in choices:
        timed = c["median_us"]
        if c["stage"] == "patchify":
            labels = c["key"].split(": ", 1)[1].split()
            assert len(timed) == len(labels), c  # one timing per candidate the key names
        assert len(timed) >= 2, c
        assert set(timed) <= set(may_run[c["stage"]]), (c, may_run)
        assert c["kernel"] in timed
        assert all(t > 0 for t in timed.values()), c
        # The fastest, unless the first candidate (the fixed order's) is within 10% of it.
        first = timed[next(iter(timed))]
        fastest = min(timed.values())
        assert timed[c["kernel"]] == (first if fastest * 1.1 >= first else fastest), c


def test_choice_is_an_allowed_kernel_and_the_fastest_timed(tmp_path):
    check_choices(outputs(tmp_path, None)[1]["info"])


def test_resample_choice_is_an_allowed_kernel_and_the_fastest_timed(tmp_path):
    """The resample passes' records: the fastest allowed row that takes the resize.

    Timed on the first use of each class (weight form, taps to a power of two, and the channels
    horizontally);
    the portable row is no candidate where a SIMD one is allowed."""
    info = outputs(tmp_path, None)[1]["info"]
    simd = [k for k in allowed(info["isa_cap"], host_flags())["resample.vertical"] if k != "scalar"]
    if len(simd) < 2:
        assert not [c for c in info["tuning"]["choices"] if c["stage"] != "patchify"]
        return
    check_choices(info, ("resample.vertical", "resample.horizontal"))
    for c in info["tuning"]["choices"]:
        if c["stage"].startswith("resample."):
            assert "scalar" not in c["median_us"], c
            assert c["key"].split()[-1] in {f"taps<={2 ** i}" for i in range(16)}, c


def test_pipeline_reports_the_tuned_choice(tmp_path):
    """Pipeline.kernel is the chosen candidate's form; fixed_kernel the first candidate's."""
    report = outputs(tmp_path, None)[1]
    names = {"avx512-fast": "avx512vbmi", "avx512": "avx512vbmi", "avx2-fast": "avx2",
             "avx2-gather": "avx2", "neon-fast": "neon", "neon": "neon", "table": "table"}
    for dtype in DTYPES:
        kernel, fixed = report["kernels"][f"qwen2_vl {dtype}"]
        # The only patch-14, merge-2, temporal-2 class of that process.
        key_start = f"{dtype} P14 m2 T2 channel-first:"
        recs = [c for c in report["info"]["tuning"]["choices"] if c["key"].startswith(key_start)]
        if not recs:  # one allowed kernel: nothing to time
            assert kernel == fixed
            continue
        (rec,) = recs
        labels = rec["key"].split(": ", 1)[1].split()
        assert labels[0] == fixed
        assert kernel in labels and names[kernel] == rec["kernel"]


CONCURRENT = textwrap.dedent("""
    import json, threading
    import numpy as np
    import smg_fast
    img = np.random.default_rng(3).integers(0, 256, (476, 644, 3), dtype=np.uint8)
    procs = {d: smg_fast.load_processor("qwen2_vl") for d in ("float32", "bfloat16")}
    barrier = threading.Barrier(16)
    results = [None] * 16
    def work(i):
        dtype = "float32" if i % 2 else "bfloat16"
        proc = procs[dtype]
        barrier.wait()
        results[i] = (dtype, np.asarray(proc([img], dtype=dtype)["pixel_values"]).view(np.uint8))
    threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
    for t in threads: t.start()
    for t in threads: t.join()
    same = all(np.array_equal(r[1], next(s[1] for s in results if s[0] == r[0])) for r in results)
    print(json.dumps({"same": same, "info": smg_fast.kernel_info()}))
""")


def test_many_threads_first_using_a_class_time_it_once():
    env = child_env()
    run = subprocess.run([sys.executable, "-c", CONCURRENT], env=env, capture_output=True,
                         text=True, check=True)
    report = json.loads(run.stdout)
    assert report["same"]
    classes = [(c["stage"], c["key"]) for c in report["info"]["tuning"]["choices"]]
    assert len(classes) == len(set(classes))  # each class timed once
    keys = [key for stage, key in classes if stage == "patchify"]
    if len(allowed(report["info"]["isa_cap"], host_flags())["patchify"]) >= 2:
        assert sorted(k.split()[0] for k in keys) == ["bfloat16", "float32"]
        check_choices(report["info"])


def tuning_in(tune: str | None) -> dict:
    env = child_env()
    if tune is not None:
        env["SMG_FAST_TUNE"] = tune
    code = ("import json, smg_fast; p = smg_fast.load_processor('qwen2_vl').pipeline('float32'); "
            "k = [p.kernel, p.fixed_kernel]; "
            "print(json.dumps([smg_fast.kernel_info()['tuning'], *k]))")
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    tuning, kernel, fixed = json.loads(run.stdout)
    tuning["kernels"] = (kernel, fixed)
    return tuning


def test_env_var_keeps_the_fixed_order():
    off = tuning_in("0")
    assert (off["enabled"], off["env"], off["choices"]) == (False, "0", [])
    assert off["kernels"][0] == off["kernels"][1]
    for tune, env in ((None, None), ("1", "1"), ("yes", "yes")):
        on = tuning_in(tune)
        assert (on["enabled"], on["env"]) == (True, env)
        # Pipeline.kernel tuned its class (where two kernels may run it); nothing was resized.
        assert [c["stage"] for c in on["choices"]] == ["patchify"] * (
            len(allowed(smg_fast.kernel_info()["isa_cap"], host_flags())["patchify"]) >= 2)


# A thread keeps first-using new classes (pipelines of every patch side, merge and dtype, run with
# the GIL released, so each holds the tuning table's lock while it times) while the main thread
# forks, from its first fork on (while the thread may still be making the thread pool and the
# tuning table); each child reads the tuning table and tunes a class of its own, then exits. A
# child that inherited a lock held, or one-time state half made, would wait forever. The child
# script imports support.fork_watch (tests/ on its PYTHONPATH) for the fork-and-wait loop.
FORK = textwrap.dedent("""
    import threading
    import numpy as np
    from smg_fast import _native
    from support.fork_watch import fork_and_watch
    def pipe(patch, merge, dtype):
        return _native.Pipeline(recipe=_native.LutRecipe.HF_RESCALE_NORMALIZE, rescale=1 / 255,
                                mean=[0.5] * 3, std=[0.5] * 3, dtype=dtype,
                                filter=_native.Filter.BICUBIC,
                                pass_order=_native.PassOrder.PILLOW13, patch=patch, merge=merge,
                                temporal=1)
    def first_use(patch, merge, dtype):
        p = pipe(patch, merge, dtype)
        side = patch * merge
        img = np.zeros((side, side, 3), np.uint8)
        kind = {_native.DType.FLOAT32: np.float32, _native.DType.FLOAT16: np.float16}
        dst = np.empty(p.output_elems(side, side, merge, merge), kind.get(dtype, np.uint16))
        p.run(img, side, side, merge, merge, dst)
    done, stop = threading.Event(), threading.Event()
    def tuner():
        for dtype in (_native.DType.FLOAT32, _native.DType.BFLOAT16, _native.DType.FLOAT16):
            for merge in (1, 2):
                for patch in range(2, 65):
                    if stop.is_set():
                        return
                    first_use(patch, merge, dtype)
        done.set()
    thread = threading.Thread(target=tuner)
    thread.start()
    def in_child():
        _native.kernel_info()
        first_use(13, 3, _native.DType.FLOAT32)
    # Each child gets 400 polls 25 ms apart (~10 s) to exit, else it counts as stuck.
    forks, stuck = fork_and_watch(in_child, lambda: not done.is_set(), max_forks=40, polls=400,
                                  poll_s=0.025)
    stop.set()
    thread.join()  # not torn down by the interpreter's exit in the middle of native code
    print(forks, stuck)
""")


def test_fork_while_another_thread_tunes():
    if len(allowed(smg_fast.kernel_info()["isa_cap"], host_flags())["patchify"]) < 2:
        pytest.skip("one patchify kernel allowed here: no class is timed, no lock taken")
    env = env_with_support(child_env())
    run = subprocess.run([sys.executable, "-W", "ignore::DeprecationWarning", "-c", FORK],
                         env=env, capture_output=True, text=True, check=True, timeout=600)
    forks, stuck = map(int, run.stdout.split())
    assert forks > 0
    assert stuck == 0, (f"{stuck} of {forks} forked children waited forever (on a lock or "
                        f"one-time state a thread of the parent was changing)")


# A fresh thread per resize first-uses a horizontal class (its first scratch buffer taken while
# the class is timed) while the main thread forks over and over; prints the forks and choices.
FORK_PARENT = textwrap.dedent("""
    import os, threading
    import numpy as np
    from smg_fast import _native
    F = _native.Filter
    rng = np.random.default_rng(0)
    filters = (F.BICUBIC, F.LANCZOS, F.BILINEAR, F.BOX, F.HAMMING)
    cases = [(c, 400_000 // c, f, d) for c in (1, 3, 4) for f in filters for d in (3, 17, 70, 300)]
    done = threading.Event()
    def first_uses():
        for c, w, f, d in cases:
            img = rng.integers(0, 256, (1, w, c) if c > 1 else (1, w), np.uint8)
            t = threading.Thread(target=_native.resize,
                                 args=(img, w // d, 1, f, _native.PassOrder.PILLOW13,
                                       _native.Resampler.PILLOW))
            t.start()
            t.join()
        done.set()
    threading.Thread(target=first_uses).start()
    forks = 0
    while not done.is_set():
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        forks += 1
    print(forks, len(_native.kernel_info()["tuning"]["choices"]))
""")


def test_fork_while_a_new_thread_times_a_class():
    """fork() in one thread while another times a class whose job takes its first scratch buffer.

    fork() must take the tuning lock before the scratch registry's, as the timing thread does;
    the other order left both threads waiting on each other (3 runs in 3 hung)."""
    env = child_env()
    env["SMG_FAST_TUNE"] = "1"
    run = subprocess.run([sys.executable, "-c", FORK_PARENT], env=env, capture_output=True,
                         text=True, check=True, timeout=300)
    forks, choices = map(int, run.stdout.split())
    assert forks > 0
    may = allowed(smg_fast.kernel_info()["isa_cap"], host_flags())
    if len([k for k in may["resample.horizontal"] if k != "scalar"]) >= 2:
        assert choices > 0  # classes were timed while the forks went on


# Resizes whose first window (vertically) or rows (horizontally) are too long to time in a few
# milliseconds; prints kernel_info()'s tuning as JSON and whether each equals Pillow's.
TOO_BIG = textwrap.dedent("""
    import json
    import numpy as np
    from PIL import Image
    import smg_fast
    rng = np.random.default_rng(3)
    tall = rng.integers(0, 256, (100_000, 1), np.uint8)  # one 200,000-tap window
    wide = rng.integers(0, 256, (1, 200_000, 3), np.uint8)  # 600,000-byte rows
    same = []
    for img, size in ((tall, (1, 1)), (wide, (1000, 1)), (wide, (400_000, 1))):
        got = smg_fast.resize(img, size, Image.Resampling.BICUBIC)
        want = np.asarray(Image.fromarray(img).resize(size, Image.Resampling.BICUBIC))
        same.append(np.array_equal(got, want))
    print(json.dumps({"tuning": smg_fast.kernel_info()["tuning"], "same": same}))
""")


def test_resizes_too_big_to_time_take_the_fixed_order():
    """No class is timed on a job that would take seconds or a huge buffer; the resize is exact."""
    env = child_env()
    env["SMG_FAST_TUNE"] = "1"
    run = subprocess.run([sys.executable, "-c", TOO_BIG], env=env, capture_output=True,
                         text=True, check=True, timeout=300)
    out = json.loads(run.stdout)
    assert out["same"] == [True, True, True]
    assert out["tuning"]["enabled"]
    assert not [c for c in out["tuning"]["choices"] if c["stage"].startswith("resample.")]


# Resizes of random images through the native resampler: 1-4 channels, Pillow's and torch's
# weights, up and down in each axis (both pass orders), written to argv[1] (an .npz); prints
# kernel_info()'s tuning as JSON.
RESIZES = textwrap.dedent("""
    import json, sys
    import numpy as np
    from smg_fast import _native
    rng = np.random.default_rng(11)
    F = _native.Filter
    outs = {}
    sizes = [((640, 480), (1288, 952)), ((1920, 1080), (644, 364)), ((517, 301), (300, 520)),
             ((333, 1000), (331, 97)), ((64, 48), (28, 28))]
    for c in (1, 2, 3, 4):
        for (w, h), (ow, oh) in sizes:
            img = rng.integers(0, 256, (h, w, c), dtype=np.uint8)
            for rs in (_native.Resampler.PILLOW, _native.Resampler.TORCH):
                for f in (F.BICUBIC, F.BILINEAR, F.LANCZOS):
                    for order in (_native.PassOrder.PILLOW13, _native.PassOrder.HORIZONTAL_FIRST):
                        out = _native.resize(img, ow, oh, f, order, rs)
                        outs[f"{c} {w}x{h} {ow}x{oh} {rs} {f} {order}"] = out
    np.savez(sys.argv[1], **outs)
    print(json.dumps(_native.kernel_info()["tuning"]))
""")


@pytest.mark.parametrize("cap", [None, "avx2"])
def test_resizes_identical_with_tuning_on_and_off(tmp_path, cap):
    """Every tuned resample choice computes the fixed order's bytes (and the cap bounds it)."""
    got = {}
    for tune in ("1", "0"):
        env = child_env()
        env["SMG_FAST_TUNE"] = tune
        if cap:
            env["SMG_FAST_ISA"] = cap
        path = tmp_path / f"resize-{tune}.npz"
        run = subprocess.run([sys.executable, "-c", RESIZES, str(path)], env=env,
                             capture_output=True, text=True, check=True)
        with np.load(path) as z:
            got[tune] = ({k: z[k] for k in z.files}, json.loads(run.stdout))
    (on, on_tuning), (off, off_tuning) = got["1"], got["0"]
    assert on.keys() == off.keys() and len(on) == 4 * 5 * 2 * 3 * 2
    for case in on:
        assert np.array_equal(on[case], off[case]), case
    assert off_tuning["choices"] == []
    isa = cap or smg_fast.kernel_info()["isa_cap"]
    stages = {c["stage"] for c in on_tuning["choices"]}
    may = allowed(isa, host_flags())
    if len([k for k in may["resample.vertical"] if k != "scalar"]) >= 2:
        assert stages == {"resample.vertical", "resample.horizontal"}
        check_choices({"isa_cap": isa, "tuning": on_tuning},
                      ("resample.vertical", "resample.horizontal"))
        for c in on_tuning["choices"]:  # avx2-madd differs from avx2 only on Pillow's short windows
            if c["stage"] == "resample.vertical":
                form, taps = c["key"].split()
                splits = form == "int32" and int(taps.split("<=")[1]) <= 128
                assert ("avx2-madd" in c["median_us"]) == (splits and "avx2" in c["median_us"]), c
    else:
        assert not stages
