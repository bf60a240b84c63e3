"""A forked child never waits on the scratch pools' registry lock held by a parent's thread.

Threads that start, run a pipeline and exit register and unregister their scratch pools (under
the registry lock) while the main thread forks; each child runs a pipeline on a thread of its
own first use (it registers its pool). Without fork handlers a child inherited the lock held by
a thread it lacks and waited forever (about 1 fork in 50 here)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

FORK = textwrap.dedent("""
    import os, threading, time
    import numpy as np
    from smg_fast import _native
    P = _native.Pipeline(recipe=_native.LutRecipe.HF_RESCALE_NORMALIZE, rescale=1 / 255,
                         mean=[0.5] * 3, std=[0.5] * 3, dtype=_native.DType.FLOAT32,
                         filter=_native.Filter.BICUBIC, pass_order=_native.PassOrder.PILLOW13,
                         patch=14, merge=2, temporal=2)
    IMG = np.random.default_rng(0).integers(0, 255, (700, 900, 3), np.uint8)
    def run():
        dst = np.empty(P.output_elems(448, 448, 32, 32), np.float32)
        P.run(IMG, 448, 448, 32, 32, dst)
    stop = threading.Event()
    def spawner():
        while not stop.is_set():
            ts = [threading.Thread(target=run) for _ in range(2)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
    threading.Thread(target=spawner, daemon=True).start()
    stuck = forks = 0
    start = time.monotonic()
    while time.monotonic() - start < 40 and forks < 300:
        pid = os.fork()
        if pid == 0:
            run()
            os._exit(0)
        forks += 1
        for _ in range(400):
            if os.waitpid(pid, os.WNOHANG)[0]:
                break
            time.sleep(0.01)
        else:
            stuck += 1
            os.kill(pid, 9)
            os.waitpid(pid, 0)
    stop.set()
    print(forks, stuck)
    os._exit(0)
""")


def test_fork_while_threads_register_scratch_pools():
    run = subprocess.run([sys.executable, "-W", "ignore::DeprecationWarning", "-c", FORK],
                         capture_output=True, text=True, check=True, timeout=300)
    forks, stuck = map(int, run.stdout.split())
    assert forks > 0
    assert stuck == 0, f"{stuck} of {forks} forked children waited forever on a scratch lock"
