"""Fixtures for the processor benchmarks.

One real photo at four sizes, the reference implementations each family is compared against, and the
rounds to run.

Run:  python -m pytest bench/ --benchmark-only --benchmark-json=/tmp/bench.json -q
      python bench/summarize.py /tmp/bench.json

References
- Qwen2-VL / Qwen2.5-VL / Qwen3-VL: transformers' PIL/NumPy processor
  (``Qwen2VLImageProcessorPil``) with the family's published hub config; the torchvision
  processor (``Qwen2VLImageProcessor``) as a second reference when torchvision is installed.
- GLM-4.1V: transformers' ``Glm4vImageProcessorPil`` with its published hub config, and its
  torchvision ``Glm4vImageProcessor`` when torchvision is installed.
- Kimi-K2.5: transformers has no PIL processor for it, so the reference is ``kimi_upstream_numpy``
  (bench/references.py: ``smg_fast.testing.oracles.kimi_upstream``, the NumPy/PIL implementation
  of the upstream MoonViT preprocessing the parity tests use; labelled "upstream NumPy
  reference" in the results). transformers'
  torchvision ``Kimi_K25ImageProcessor`` is the torchvision reference when torchvision is
  installed.

Each reference's output is compared with smg-fast's after it has been timed (np.array_equal for
the exact references, shape only for torchvision), so a misconfigured reference cannot produce a
misleading number silently.
"""

from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass

import numpy as np
import pytest
from PIL import Image
from references import kimi_upstream_numpy, load_photos, make_hf_pil

FAMILIES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "kimi_k25", "glm4v")
QWEN_FAMILIES = FAMILIES[:3]
FAMILIES += ("paddleocr_vl", "ernie4_5_vl_moe", "hunyuan_vl")  # Qwen-sized, their own classes
FAMILIES += ("gemma3",)
FAMILIES += ("kimi_vl",)  # reference: its remote code in NumPy (references.KimiVLUpstream)
FAMILIES += ("internvl",)
FAMILIES += ("pixtral",)
FAMILIES += ("llava_next", "llava_onevision")
FAMILIES += ("idefics3",)
SIZES = ((640, 480), (1280, 720), (1920, 1080), (3840, 2160))

# Timed rounds per benchmark (plus one warm-up round), by input size. The suite must stay within
# a few minutes on a 2-core machine: transformers' PIL processor needs ~0.5 s per 3840x2160 call.
# Measured: the whole suite takes ~1.5-2 minutes on an idle 2-core machine without torchvision.
ROUNDS_FAST = {(640, 480): 200, (1280, 720): 100, (1920, 1080): 60, (3840, 2160): 25}
ROUNDS_REFERENCE = {(640, 480): 40, (1280, 720): 20, (1920, 1080): 12, (3840, 2160): 6}


def size_id(size: tuple[int, int]) -> str:
    return f"{size[0]}x{size[1]}"


# --------------------------------------------------------------------------------------------
# References from transformers
# --------------------------------------------------------------------------------------------


def make_hf_torchvision(family: str):
    """transformers' torchvision processor for `family`; skips when torchvision is missing."""
    pytest.importorskip("torchvision", reason="torchvision is not installed")
    from smg_fast.testing.oracles import QWEN_LIKE_CLASSES, qwen_like_reference

    if family in QWEN_LIKE_CLASSES:
        return qwen_like_reference(family, "torchvision")
    if family == "kimi_vl":
        pytest.skip("transformers has no Kimi-VL class (its remote code is the reference)")
    if family == "kimi_k25":
        from transformers.models.kimi_k25.image_processing_kimi_k25 import (
            Kimi_K25ImageProcessor,
        )

        from smg_fast.testing.oracles import kimi_kwargs

        return Kimi_K25ImageProcessor(**kimi_kwargs())
    if family == "glm4v":
        from transformers.models.glm4v.image_processing_glm4v import Glm4vImageProcessor

        from smg_fast.testing.oracles import hf_glm

        return hf_glm(Glm4vImageProcessor, family)
    if family == "internvl":
        from transformers.models.got_ocr2.image_processing_got_ocr2 import GotOcr2ImageProcessor

        from smg_fast.testing.oracles import hf_internvl

        return hf_internvl(GotOcr2ImageProcessor)
    if family == "pixtral":
        from transformers.models.pixtral.image_processing_pixtral import PixtralImageProcessor

        from smg_fast.testing.oracles import hf_pixtral

        return hf_pixtral(PixtralImageProcessor)
    if family == "llava_next":
        from transformers.models.llava_next.image_processing_llava_next import (
            LlavaNextImageProcessor,
        )

        from smg_fast.testing.oracles import hf_llava

        return hf_llava(family, LlavaNextImageProcessor)
    if family == "llava_onevision":
        from transformers.models.llava_onevision.image_processing_llava_onevision import (
            LlavaOnevisionImageProcessor,
        )

        from smg_fast.testing.oracles import hf_llava

        return hf_llava(family, LlavaOnevisionImageProcessor)
    if family == "idefics3":
        from transformers.models.idefics3.image_processing_idefics3 import Idefics3ImageProcessor

        from smg_fast.testing.model_folders_idefics3 import IDEFICS3, hub_kwargs

        return Idefics3ImageProcessor(**hub_kwargs(IDEFICS3))
    if family == "gemma3":
        from transformers.models.gemma3.image_processing_gemma3 import Gemma3ImageProcessor

        from smg_fast.testing.oracles import hf_gemma3

        return hf_gemma3(Gemma3ImageProcessor)
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor

    from smg_fast.testing.oracles import hf_qwen

    return hf_qwen(Qwen2VLImageProcessor, family)


@pytest.fixture(scope="session")
def kimi_reference():
    """The Kimi-K2.5 upstream NumPy reference function."""
    return kimi_upstream_numpy


@pytest.fixture(scope="session")
def hf_pil():
    """Factory: hf_pil(family) -> transformers' PIL Qwen processor (cached per family)."""
    return functools.cache(make_hf_pil)


@pytest.fixture(scope="session")
def hf_torchvision():
    """Factory.

    Hf_torchvision(family) -> transformers' torchvision processor; skips the test when torchvision
    is not installed."""
    return functools.cache(make_hf_torchvision)


# --------------------------------------------------------------------------------------------
# The photo
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def photos() -> dict[tuple[int, int], Image.Image]:
    """The photo resized once with LANCZOS to every benchmark size (RGB, fully loaded)."""
    try:
        return load_photos(SIZES)
    except FileNotFoundError as exc:
        pytest.skip(str(exc))


# --------------------------------------------------------------------------------------------
# One benchmark case: family x size, set up once for all implementations
# --------------------------------------------------------------------------------------------


@dataclass
class Case:
    family: str
    size: tuple[int, int]
    image: Image.Image
    processor: object  # the smg_fast processor
    expected: np.ndarray  # smg_fast's float32 pixel_values for this image

    @property
    def group(self) -> str:
        return f"{self.family}-{size_id(self.size)}"

    @property
    def fast_rounds(self) -> int:
        return ROUNDS_FAST[self.size]

    @property
    def reference_rounds(self) -> int:
        return ROUNDS_REFERENCE[self.size]

    def describe(self, benchmark, impl: str, *, threads: int | str, dtype: str, nbytes: int,
                 **extra) -> None:
        benchmark.group = self.group
        benchmark.extra_info.update(
            impl=impl,
            family=self.family,
            size=size_id(self.size),
            threads=threads,
            dtype=dtype,
            output_mb=round(nbytes / 1e6, 3),
            output_shape=list(self.expected.shape),
            **extra,
        )


CASE_PARAMS = [(f, s) for f in FAMILIES for s in SIZES]


@pytest.fixture(scope="module", params=CASE_PARAMS,
                ids=[f"{f}-{size_id(s)}" for f, s in CASE_PARAMS])
def case(request, photos) -> Case:
    """Module-scoped so pytest runs every implementation of one case back to back."""
    import smg_fast

    family, size = request.param
    processor = smg_fast.load_processor(family)
    expected = np.asarray(processor(photos[size], dtype="float32")["pixel_values"])
    assert expected.dtype == np.float32
    return Case(family, size, photos[size], processor, expected)


@pytest.fixture
def smg_threads():
    """set(n) for the duration of one test; the previous setting is restored afterwards."""
    import smg_fast

    before = smg_fast.get_num_threads()

    def set_threads(n: int | None) -> int:
        smg_fast.set_num_threads(n)
        return smg_fast.get_num_threads()

    yield set_threads
    smg_fast.set_num_threads(before)


# --------------------------------------------------------------------------------------------
# Run metadata: CPU time that other processes used while we measured, so a run disturbed by
# other work on the same cores can be recognised in the results (not only guessed at).
# --------------------------------------------------------------------------------------------


def _busy_cpu_seconds() -> float | None:
    """CPU seconds all processes on this machine have spent non-idle (from /proc/stat)."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = fh.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    user, nice, system, idle, iowait, irq, softirq, steal = (int(v) for v in fields[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _own_cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class CpuWatch:
    """Wall time, our CPU time and everybody else's CPU time between start() and stop()."""

    def start(self) -> CpuWatch:
        self.wall0 = time.perf_counter()
        self.busy0 = _busy_cpu_seconds()
        self.own0 = _own_cpu_seconds()
        return self

    def stop(self) -> dict:
        wall = time.perf_counter() - self.wall0
        own = _own_cpu_seconds() - self.own0
        busy1 = _busy_cpu_seconds()
        info = {"wall_s": round(wall, 3), "own_cpu_s": round(own, 3)}
        if self.busy0 is not None and busy1 is not None:
            others = max(0.0, (busy1 - self.busy0) - own)
            info["others_cpu_s"] = round(others, 3)
            # Cores' worth of CPU that other processes took on average (1.0 = one full core).
            info["others_cores"] = round(others / wall, 2) if wall > 0 else 0.0
        return info


_SESSION_WATCH = CpuWatch().start()


def pytest_sessionstart(session):
    global _SESSION_WATCH
    _SESSION_WATCH = CpuWatch().start()


@pytest.fixture(autouse=True)
def _record_other_load(request):
    """Adds others_cores (other processes' CPU use during this benchmark) to extra_info."""
    if "benchmark" not in request.fixturenames:
        yield
        return
    benchmark = request.getfixturevalue("benchmark")
    watch = CpuWatch().start()
    yield
    info = watch.stop()
    if "others_cores" in info:
        benchmark.extra_info["others_cores"] = info["others_cores"]


def pytest_benchmark_update_machine_info(config, machine_info):
    machine_info["cpu_count"] = os.cpu_count()
    try:
        machine_info["affinity_cpus"] = len(os.sched_getaffinity(0))
    except AttributeError:
        pass
    machine_info["loadavg_end"] = list(os.getloadavg())


def pytest_benchmark_update_json(config, benchmarks, output_json):
    output_json["suite"] = _SESSION_WATCH.stop()
