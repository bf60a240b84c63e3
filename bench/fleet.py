"""Routing policies over a fleet on loopback (not part of the test command).

Three servers, each with a pixel cache of about a third of the working set; Zipf(s) traffic over
``--distinct`` images, 1-8 images per request, ``--concurrency`` requests at once; the policies
random, round-robin, unbounded consistent hashing (rendezvous, no load bound), bounded
(rendezvous order under the load bound), affinity (bounded, but an image goes back to a member
it was placed on recently while one is under the bound) and ours (affinity, and an image whose
members are all at the bound waits, up to ``affinity_wait``, for one that will free a slot soon
before it spills: the library's default). Per policy and s: cache hit rate, misses per distinct
image requested, max/mean items per worker, the mean over samples of max/mean items in flight
per worker, p50/p99 item latency. Every item is checked against the in-process processor's
output (exact, in the request's order, none missing or extra); a failed request is counted
(requests and items, by status) and the run goes on. ``--hot-share`` adds a workload where one
image is that share of all items (the rest Zipf(s) over the others). ``--kill`` adds a run of
ours with one worker SIGKILLed a third of the way through (failed and wrong must stay 0).

    python bench/fleet.py --requests 300          # a few minutes on a 2-core machine
"""

from __future__ import annotations

import argparse
import asyncio
import io
import itertools
import random
import statistics
import time
from collections import Counter
from typing import Any

import numpy as np
from PIL import Image

from smg_fast import load_processor
from smg_fast.routing import AsyncRoutedClient, RoutedError
from smg_fast.routing.placement import Choice
from smg_fast.testing.servers import ServerProcess


class _Policy(AsyncRoutedClient):
    """A routed client that places images by one of the compared policies.

    Its per-image choice ignores the key (random, round_robin) or honours it without a bound (hash),
    or leaves out the fleet's memory (bounded) or the wait (affinity); "ours" is the library
    unchanged."""

    def __init__(self, policy: str, targets: list[str], **kw: Any) -> None:
        super().__init__(targets, **kw)
        self.policy = policy
        self._rr = itertools.count()
        self._rnd = random.Random(0)

    def _choose(self, key: bytes, candidates: list[str], load: dict[str, int],
                holders: list[str], wait: bool, waiting: dict[str, int]) -> Choice:
        if self.policy == "random":
            t = self._rnd.choice(candidates)
            return Choice(t, False, False, t)
        if self.policy == "round_robin":  # one cursor for the client, never reset per request
            t = candidates[next(self._rr) % len(candidates)]
            return Choice(t, False, False, t)
        if self.policy == "hash":
            return super()._choose(key, candidates, {t: 0 for t in candidates}, [], False, {})
        if self.policy == "bounded":  # the rendezvous order under the bound, no memory
            return super()._choose(key, candidates, load, [], False, waiting)
        if self.policy == "affinity":  # remembered members under the bound, never waits
            return super()._choose(key, candidates, load, holders, False, waiting)
        return super()._choose(key, candidates, load, holders, wait, waiting)


def _images(n: int, seed: int = 0) -> list[bytes]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        buf = io.BytesIO()
        Image.fromarray(rng.integers(0, 256, (120, 160, 3), dtype=np.uint8)).save(buf, "JPEG")
        out.append(buf.getvalue())
    return out


def _zipf_plans(n_images: int, s: float, requests: int, seed: int,
                hot_share: float = 0.0) -> list[list[int]]:
    """Requests of 1-8 image indices, Zipf(s).

    With hot_share, each item is image 0 with that probability, else Zipf(s) over the others."""
    rnd = random.Random(seed)
    first = 1 if hot_share else 0
    weights = [1.0 / (k + 1) ** s for k in range(n_images - first)]
    plans = []
    for _ in range(requests):
        n = rnd.randint(1, 8)
        plans.append([0 if rnd.random() < hot_share else first + rnd.choices(
            range(n_images - first), weights)[0] for _ in range(n)])
    return plans


async def _run(policy: str, targets: list[str], images: list[bytes], refs: list[np.ndarray],
               plans: list[list[int]], concurrency: int, kill: Any = None) -> dict[str, Any]:
    latencies: list[float] = []
    per_worker: Counter[str] = Counter()
    failed: Counter[str] = Counter()  # status -> requests
    hits = misses = lost = extra = wrong = failed_items = 0
    missed: Counter[int] = Counter()
    ratios: list[float] = []
    queue = list(range(len(plans)))
    done = 0
    async with _Policy(policy, targets, timeout=60) as fleet:
        async def sample() -> None:
            while True:
                await asyncio.sleep(0.01)
                flight = [m["in_flight"] for m in fleet.stats()["members"].values()
                          if m["state"] == "serving"]
                if flight and sum(flight):
                    ratios.append(max(flight) / (sum(flight) / len(flight)))

        async def worker() -> None:
            nonlocal hits, misses, lost, extra, wrong, failed_items, done
            while queue:
                picks = plans[queue.pop()]
                t0 = time.perf_counter()
                try:
                    out = await fleet.preprocess([images[k] for k in picks], transport="shm")
                except RoutedError as exc:  # counted; the run goes on
                    failed[exc.code().name] += 1
                    failed_items += len(picks)
                    out = None
                dt = time.perf_counter() - t0
                done += 1
                if kill is not None and done == len(plans) // 3:
                    kill()
                if out is None:
                    continue
                lost += max(0, len(picks) - len(out.items))
                extra += max(0, len(out.items) - len(picks))
                for k, it in zip(picks, out.items, strict=False):  # counted above if unequal
                    wrong += not np.array_equal(it.pixel_values, refs[k])
                    latencies.append(dt)
                    per_worker[it.worker] += 1
                    hits += it.cache_hit
                    if not it.cache_hit:
                        misses += 1
                        missed[k] += 1

        sampler = asyncio.ensure_future(sample())
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        sampler.cancel()
    counts = list(per_worker.values()) or [0]
    latencies.sort()
    latencies = latencies or [float("nan")]
    distinct = len({k for p in plans for k in p})
    return {"policy": policy, "hit_rate": hits / max(1, hits + misses),
            "misses_per_distinct": misses / max(1, distinct),
            "items_max_over_mean": max(counts) / max(1e-9, statistics.mean(counts)),
            "in_flight_max_over_mean": statistics.mean(ratios) if ratios else 0.0,
            "p50_ms": 1e3 * latencies[len(latencies) // 2],
            "p99_ms": 1e3 * latencies[int(len(latencies) * 0.99)], "lost": lost,
            "extra": extra, "wrong": wrong, "failed_requests": sum(failed.values()),
            "failed_items": failed_items, "failed_by_status": dict(failed)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--distinct", type=int, default=500)
    ap.add_argument("--requests", type=int, default=300, help="per policy and s")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--s", type=float, nargs="+", default=[1.1, 1.3])
    ap.add_argument("--hot-share", type=float, default=0.5,
                    help="also a workload where one image is this share of the items (0: off)")
    ap.add_argument("--policies", nargs="+", default=["random", "round_robin", "hash",
                                                      "bounded", "affinity", "ours"])
    ap.add_argument("--kill", action="store_true", help="also: ours with a SIGKILL mid-run")
    args = ap.parse_args()
    images = _images(args.distinct)
    proc = load_processor("qwen2_vl")  # the servers' default model, float32
    refs = [proc(im)["pixel_values"] for im in images]
    # one 160x120 image is ~0.45 MiB of float32 patches: a third of the working set each
    cache_mb = max(1, int(args.distinct * 0.45 / 3))
    server_args = ["--workers", "2", "--pixel-cache-mb", str(cache_mb), "--transport", "auto"]
    print("| workload | policy | hit rate | misses / distinct | max/mean items | max/mean in "
          "flight | p50 ms | p99 ms | failed requests (items) | wrong / lost / extra items |\n"
          "|---|---|---|---|---|---|---|---|---|---|")
    loads = [(f"zipf {s}", s, 0.0) for s in args.s]
    loads += [(f"hot {args.hot_share:g} + zipf {args.s[0]}", args.s[0], args.hot_share)
              ] if args.hot_share else []
    runs = [(w, p, False) for w in loads for p in args.policies]
    runs += [(w, "ours", True) for w in loads] if args.kill else []
    for (label, s, hot), policy, kill in runs:
        servers = [ServerProcess(server_args) for _ in range(3)]  # fresh (cold) caches
        try:
            for srv in servers:
                srv.wait()
            plans = _zipf_plans(args.distinct, s, args.requests, seed=int(s * 100), hot_share=hot)
            r = asyncio.run(_run(policy, [x.target for x in servers], images, refs, plans,
                                 args.concurrency, servers[0].kill if kill else None))
        finally:
            for srv in servers:
                srv.kill()
        name = policy + (" + SIGKILL" if kill else "")
        fails = f"{r['failed_requests']} ({r['failed_items']})"
        if r["failed_by_status"]:
            fails += " " + ", ".join(f"{k} {v}" for k, v in sorted(r["failed_by_status"].items()))
        print(f"| {label} | {name} | {r['hit_rate']:.3f} | {r['misses_per_distinct']:.2f} | "
              f"{r['items_max_over_mean']:.2f} | {r['in_flight_max_over_mean']:.2f} | "
              f"{r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {fails} | "
              f"{r['wrong']} / {r['lost']} / {r['extra']} |", flush=True)


if __name__ == "__main__":
    main()
