"""A forked child never waits on the scratch pools' registry lock held by a parent's thread.

Threads that start, run a pipeline and exit register and unregister their scratch pools (under
the registry lock) while the main thread forks; each child runs a pipeline on a thread of its
own first use (it registers its pool). Without fork handlers a child inherited the lock held by
a thread it lacks and waited forever (about 1 fork in 50 here)."""

from __future__ import annotations

import textwrap

from support.fork_watch import run_fork_script

# The child script imports support.fork_watch (tests/ on its PYTHONPATH) for the fork-and-wait
# loop; smg_fast it imports as this process's environment does.
FORK = textwrap.dedent("""
    import os, threading, time
    import numpy as np
    from smg_fast import _native
    from support.fork_watch import fork_and_watch
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
    start = time.monotonic()
    # Forks for up to 40 s; each child gets 400 polls 10 ms apart (~4 s) to exit, else it is stuck.
    forks, stuck = fork_and_watch(run, lambda: time.monotonic() - start < 40, max_forks=300,
                                  polls=400, poll_s=0.01)
    stop.set()
    print(forks, stuck)
    os._exit(0)
""")


def test_fork_while_threads_register_scratch_pools():
    forks, stuck = run_fork_script(FORK)
    assert stuck == 0, f"{stuck} of {forks} forked children waited forever on a scratch lock"
