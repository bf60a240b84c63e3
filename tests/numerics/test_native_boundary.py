"""The typed native boundary.

Enums instead of integer codes, one validated Pipeline per processor and dtype, errors before
anything is written, documented bindings, and a .pyi stub that matches the built module name for
name and parameter for parameter."""

from __future__ import annotations

import ast
import gc
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from support.cpu_flags import cpu_flags

import smg_fast
from smg_fast import _native, load_processor

STUB = Path(_native.__file__).with_name("_native.pyi")
CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]
HF = _native.LutRecipe.HF_RESCALE_NORMALIZE
KIMI = _native.LutRecipe.KIMI_DIVIDE_MULTIPLY
ENUMS = ("Filter", "PassOrder", "Resampler", "DType", "LutRecipe", "PixelFormat", "PatchOrder")


def pipeline(**kw) -> _native.Pipeline:
    args = dict(recipe=HF, rescale=1 / 255, mean=CLIP_MEAN, std=CLIP_STD,
                dtype=_native.DType.FLOAT32, filter=_native.Filter.BICUBIC,
                pass_order=_native.PassOrder.PILLOW13, patch=14, merge=2, temporal=2)
    args.update(kw)
    return _native.Pipeline(**args)


# ---- the stub against the module ----

def _split_params(sig: str) -> list[str]:
    """Parameter texts of a pybind11 signature line, split on top-level commas."""
    inner = sig[sig.index("(") + 1:sig.rindex(") ->")]
    parts, depth, quote, cur = [], 0, "", ""
    for ch in inner:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
            continue
        cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def runtime_params(fn) -> list[tuple[str, bool]]:
    """(name, has default) per parameter from pybind11's signature line; '*' for kw_only."""
    out = []
    for p in _split_params(fn.__doc__.splitlines()[0]):
        name = p.split(":")[0].split("=")[0].strip()
        out.append((name, "=" in p.split(":", 1)[-1] or "=" in p.split(":")[0]))
    return out


def stub_params(node: ast.FunctionDef) -> list[tuple[str, bool]]:
    a = node.args
    pos = a.posonlyargs + a.args
    out = [(x.arg, i >= len(pos) - len(a.defaults)) for i, x in enumerate(pos)]
    if a.kwonlyargs:
        out.append(("*", False))
        out += [(x.arg, d is not None) for x, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)]
    return out


def _public(name: str) -> bool:
    return not name.startswith("_") or name == "__version__"


@pytest.fixture(scope="module")
def stub() -> ast.Module:
    return ast.parse(STUB.read_text())


def stub_names(body: list[ast.stmt]) -> dict[str, ast.stmt]:
    out: dict[str, ast.stmt] = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = node
    return out


def test_stub_names_match_module(stub):
    declared = {n for n in stub_names(stub.body) if _public(n)}
    built = {n for n in dir(_native) if _public(n)}
    assert declared == built


def test_stub_functions_match_module(stub):
    for name, node in stub_names(stub.body).items():
        if isinstance(node, ast.FunctionDef):
            assert stub_params(node) == runtime_params(getattr(_native, name)), name


def test_stub_classes_match_module(stub):
    classes = {n: c for n, c in stub_names(stub.body).items()
               if isinstance(c, ast.ClassDef) and _public(n)}
    assert set(classes) == {n for n in dir(_native) if isinstance(getattr(_native, n), type)}
    for name, cls_node in classes.items():
        cls = getattr(_native, name)
        members = stub_names(cls_node.body)
        if name in ENUMS:
            assert set(members) == set(cls.__members__), name
            continue
        built = {k for k in vars(cls) if not k.startswith("_")}
        assert {k for k in members if not k.startswith("_")} == built, name
        for k, node in members.items():
            assert isinstance(node, ast.FunctionDef)
            is_prop = any(isinstance(d, ast.Name) and d.id == "property"
                          for d in node.decorator_list)
            assert is_prop == isinstance(vars(cls)[k], property), f"{name}.{k}"
            if not is_prop:
                assert stub_params(node) == runtime_params(getattr(cls, k)), f"{name}.{k}"


def test_every_binding_is_documented():
    def documented(fn) -> bool:  # pybind11 puts the signature first, then the docstring
        return len((fn.__doc__ or "").strip().splitlines()) > 1

    assert _native.__doc__
    for name in dir(_native):
        obj = getattr(_native, name)
        if name.startswith("_") or not callable(obj):
            continue
        if not isinstance(obj, type):
            assert documented(obj), name
            continue
        assert (obj.__doc__ or "").strip(), name
        if name in ENUMS:
            for member in obj.__members__:  # pybind11 lists "  NAME : doc" per value
                line = next(ln for ln in obj.__doc__.splitlines() if ln.strip().startswith(member))
                assert line.split(":", 1)[1].strip(), f"{name}.{member}"
            continue
        assert documented(obj.__init__), name
        for k, v in vars(obj).items():
            if k.startswith("_"):
                continue
            if isinstance(v, property):
                assert (v.__doc__ or "").strip(), f"{name}.{k}"
            else:
                assert documented(getattr(obj, k)), f"{name}.{k}"


def test_stub_is_package_data():
    text = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    assert '"smg_fast" = ["_native.pyi", "py.typed"]' in text
    assert STUB.with_name("py.typed").exists()


def test_only_the_bind_files_see_pybind11():
    """One native boundary.

    The C++ below it is plain, and only csrc/bind_* include pybind11 (directly, or through
    bind_common.hpp)."""
    csrc = Path(__file__).parents[2] / "csrc"
    files = sorted(p for p in csrc.rglob("*") if p.suffix in (".cpp", ".hpp"))
    seeing = [p.relative_to(csrc).as_posix() for p in files
              if re.search(r'#include\s*(<pybind11/|"bind_)', p.read_text())]
    assert files and seeing
    assert all(re.fullmatch(r"bind_\w+\.(cpp|hpp)", f) for f in seeing), seeing


# ---- enums, not integer codes ----

def test_integer_codes_are_refused():
    img = np.zeros((8, 8, 3), np.uint8)
    with pytest.raises(TypeError):
        _native.resize(img, 4, 4, 3, 1)
    with pytest.raises(TypeError):
        pipeline(dtype=0)
    with pytest.raises(TypeError):
        pipeline(recipe=1)


@pytest.mark.parametrize("field,bad", [("filter", _native.Filter(9)),
                                       ("pass_order", _native.PassOrder(2)),
                                       ("resampler", _native.Resampler(2)),
                                       ("dtype", _native.DType(4)),
                                       ("recipe", _native.LutRecipe(-1)),
                                       ("patch_order", _native.PatchOrder(2))])
def test_out_of_range_enum_values_are_refused(field, bad):
    # py::enum_ builds a member from any int, so C++ checks before switching on it.
    with pytest.raises(ValueError, match="unknown"):
        pipeline(**{field: bad})


def test_resize_refuses_out_of_range_enums():
    img = np.zeros((8, 8, 3), np.uint8)
    with pytest.raises(ValueError, match="filter"):
        _native.resize(img, 4, 4, _native.Filter(6), _native.PassOrder.PILLOW13)
    with pytest.raises(ValueError, match="pass order"):
        _native.resize(img, 4, 4, _native.Filter.BOX, _native.PassOrder(5))
    with pytest.raises(ValueError, match="resampler"):
        _native.resize(img, 4, 4, _native.Filter.BOX, _native.PassOrder(0), _native.Resampler(7))


@pytest.mark.parametrize("flt", ["NEAREST", "BOX", "HAMMING"])
def test_torch_resampler_refuses_filters_it_does_not_implement(flt):
    img = np.zeros((8, 8, 3), np.uint8)
    f = _native.Filter.__members__[flt]
    with pytest.raises(ValueError, match="BICUBIC, BILINEAR and LANCZOS only"):
        _native.resize(img, 4, 4, f, _native.PassOrder(0), _native.Resampler.TORCH)
    with pytest.raises(ValueError, match="BICUBIC, BILINEAR and LANCZOS only"):
        pipeline(filter=f, resampler=_native.Resampler.TORCH)


def test_channel_last_patches_take_merge_and_temporal_1():
    with pytest.raises(ValueError, match="channel-last"):
        pipeline(patch_order=_native.PatchOrder.CHANNELS_LAST, merge=2)


def test_torch_fused_recipe_refuses_non_finite_scaled_constants():
    with pytest.raises(ValueError, match="rescale_factor"):
        pipeline(recipe=_native.LutRecipe.TORCH_FUSED_NORMALIZE, rescale=0.0)


def test_enum_values_are_pillows():
    from PIL import Image

    for member in _native.Filter.__members__.values():
        assert int(member) == int(Image.Resampling[member.name])


# ---- Pipeline: validated once, small call per image ----

@pytest.mark.parametrize("kw", [dict(std=[0.5, 0.0, 0.5]), dict(mean=[0.5, float("nan"), 0.5]),
                                dict(std=[float("inf")] * 3), dict(patch=0), dict(patch=65),
                                dict(merge=0), dict(temporal=17)])
def test_bad_pipeline_parameters_fail_at_construction(kw):
    with pytest.raises(ValueError):
        pipeline(**kw)


@pytest.mark.parametrize("recipe", [HF, KIMI])
@pytest.mark.parametrize("dtype,np_dtype", [(_native.DType.FLOAT32, np.float32),
                                            (_native.DType.FLOAT16, np.float16)])
def test_lut_is_the_recipe_and_read_only(recipe, dtype, np_dtype):
    lut = pipeline(recipe=recipe, dtype=dtype).lut
    gc.collect()  # the table keeps its pipeline alive
    u = np.arange(256, dtype=np.float64)
    mean, std = np.float32(CLIP_MEAN)[:, None], np.float32(CLIP_STD)[:, None]
    if recipe == HF:
        want = (np.float32(u * (1 / 255)) - mean) / std
    else:  # Kimi upstream: float32 pixels, float64 mean and 1 / std, float32 after each step
        mean64, std64 = np.array(CLIP_MEAN)[:, None], np.array(CLIP_STD)[:, None]
        want = np.float32(np.float32(np.float32(u / 255.0) - mean64) * (1.0 / std64))
    assert lut.shape == (3, 256) and not lut.flags.writeable
    assert np.array_equal(lut.view(np.uint8), want.astype(np_dtype).view(np.uint8))


def test_pipeline_reports_its_parameters():
    p = pipeline(dtype=_native.DType.BFLOAT16, patch=16, merge=2, temporal=1)
    assert (p.recipe, p.dtype, p.filter, p.pass_order) == (
        HF, _native.DType.BFLOAT16, _native.Filter.BICUBIC, _native.PassOrder.PILLOW13)
    assert (p.patch, p.merge, p.temporal, p.row_elems) == (16, 2, 1, 3 * 16 * 16)
    assert p.mean == tuple(CLIP_MEAN) and p.std == tuple(CLIP_STD) and p.rescale == 1 / 255
    assert p.output_elems(20, 40, 4, 2) == 8 * 3 * 16 * 16


def test_output_size_bounds_pixels_per_side_not_grid_cells():
    """A whole-image patch (up to 4096) times a huge grid cannot wrap the output size."""
    p = pipeline(patch=4096, merge=1, temporal=1)
    assert p.output_elems(4096, 4096, 1, 1) == 3 * 4096 * 4096
    assert p.output_elems(1, 1, 256, 256) == 256 * 256 * 3 * 4096 * 4096  # 2^20 pixels a side
    for grid in ((257, 1), (1, 257), (1 << 20, 1 << 20)):  # past 2^20 pixels a side
        with pytest.raises(ValueError, match="2\\^20 pixels per side"):
            p.output_elems(1, 1, *grid)
    q = pipeline()  # 14-pixel patches: the same bound in pixels
    assert q.output_elems(28, 28, 74898, 2) == 74898 * 2 * 3 * 2 * 14 * 14
    with pytest.raises(ValueError, match="2\\^20 pixels per side"):
        q.output_elems(28, 28, 74900, 2)


def _avx2_patchify() -> bool:
    """What the AVX2 patchify kernel needs: AVX2 (after the cap), FMA and F16C."""
    return smg_fast.cpu_features()["avx2"] and {"fma", "f16c"} <= cpu_flags()


def test_kernel_choice_follows_the_cpu():
    # The double-precision AVX-512 form is the reference's operation order, so on a CPU with
    # AVX-512 VBMI some AVX-512 kernel must match the table (patches up to 16; larger ones take
    # the AVX2 kernel); the AVX2 kernel's gather form matches any table; without either only
    # the table runs.
    vbmi = smg_fast.cpu_features()["avx512vbmi"]
    avx2 = ("avx2-fast", "avx2-gather") if _avx2_patchify() else ("table",)
    for recipe in (HF, KIMI):
        for patch in (2, 14, 17):  # uint8 has nothing to normalize: a copy at every size
            u8 = pipeline(recipe=recipe, dtype=_native.DType.UINT8, patch=patch)
            assert u8.fixed_kernel == u8.kernel == "copy"
        for dtype in set(_native.DType.__members__.values()) - {_native.DType.UINT8}:
            kernel = pipeline(recipe=recipe, dtype=dtype).fixed_kernel
            assert kernel in (("avx512-fast", "avx512") if vbmi else avx2), kernel
            assert pipeline(recipe=recipe, dtype=dtype, patch=17).fixed_kernel in avx2


@pytest.mark.parametrize("cap", ["baseline", "avx2"])
def test_isa_cap_limits_the_kernel(cap):
    code = ("from smg_fast import _native as n; print(n.Pipeline(recipe=n.LutRecipe(0), "
            "rescale=1/255, mean=[.5]*3, std=[.5]*3, dtype=n.DType(0), filter=n.Filter(3), "
            "pass_order=n.PassOrder(1), patch=14, merge=2, temporal=2).fixed_kernel)")
    env = dict(os.environ, SMG_FAST_ISA=cap)
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    host_avx2 = "avx2" in cpu_flags() and {"fma", "f16c"} <= cpu_flags()
    # mean = std = 0.5 with rescale 1/255: the single-precision form matches the table.
    assert run.stdout.strip() == ("avx2-fast" if cap == "avx2" and host_avx2 else "table")


@pytest.mark.parametrize("case,message", [
    ("grid", "multiple of merge"), ("fit", "fit inside"), ("small", "too small"),
    ("offset", "too small"), ("itemsize", "dtype"), ("readonly", "writable"),
    ("gray", "RGB"), ("strided", "packed")])
def test_run_refuses_bad_calls_before_writing(case, message):
    p = pipeline(patch=14, merge=2, temporal=1)
    src = np.full((40, 50, 3), 200, np.uint8)
    rw, rh, gh, gw = 50, 40, 4, 4
    dst = np.full(gh * gw * p.row_elems, 7, np.float32)
    if case == "grid":
        gh = 3
    elif case == "fit":
        rw = 57
    elif case == "small":
        dst = dst[:-1].copy()
    elif case == "itemsize":
        dst = np.full(dst.size, 7, np.float16)
    elif case == "readonly":
        dst.setflags(write=False)
    elif case == "gray":
        src = src[..., 0].copy()
    elif case == "strided":
        src = src[:, ::2]
        rw = 25
    offset = 1 if case == "offset" else 0
    with pytest.raises(ValueError, match=message):
        p.run(src, rw, rh, gh, gw, dst, offset)
    assert np.all(dst == 7)


def test_run_writes_at_the_offset_only():
    p = pipeline(patch=14, merge=2, temporal=1)
    src = np.random.default_rng(1).integers(0, 256, (40, 50, 3), np.uint8)
    n = p.output_elems(50, 40, 4, 4)
    alone = np.empty(n, np.float32)
    p.run(src, 50, 40, 4, 4, alone)
    dst = np.full(n + 10, 7, np.float32)
    p.run(src, 50, 40, 4, 4, dst, 10)
    assert np.all(dst[:10] == 7)
    assert np.array_equal(dst[10:].view(np.uint32), alone.view(np.uint32))


# ---- the processor's use of it ----

def test_processor_builds_one_pipeline_per_dtype():
    proc = load_processor("qwen2_vl")
    cfg = proc.config
    got: list[_native.Pipeline] = []
    threads = [threading.Thread(target=lambda: got.append(proc.pipeline("bfloat16")))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 8 and all(p is got[0] for p in got)
    f32 = proc.pipeline("float32")
    assert f32 is proc.pipeline("float32") and f32 is not got[0]
    assert (f32.dtype, got[0].dtype) == (_native.DType.FLOAT32, _native.DType.BFLOAT16)
    assert (f32.patch, f32.merge, f32.temporal) == (cfg.patch_size, cfg.merge_size,
                                                    cfg.temporal_patch_size)
    assert int(f32.filter) == cfg.resample and f32.recipe == HF
    assert load_processor("kimi_k25").pipeline("float32").recipe == KIMI
