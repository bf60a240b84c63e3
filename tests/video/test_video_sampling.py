"""Frame sampling: smg_fast's rules against the video processors' own ``sample_frames``."""

from __future__ import annotations

import numpy as np
import pytest
import video_oracle

from smg_fast.processors.video_config import CLASS_DEFAULTS, QWEN2, QWEN3
from smg_fast.processors.video_plan import sample_indices

# (total frames, frame rate, options): rates that are not whole, lengths around the clamps.
GRID = [(total, rate, opts)
        for total in (1, 2, 3, 4, 5, 7, 12, 29, 30, 31, 100, 181, 1799, 1800, 4001)
        for rate in (23.976, 25.0, 29.97, 30.0, 59.94)
        for opts in ({"fps": 2}, {"fps": 0.5}, {"fps": 7.3}, {"num_frames": 4},
                     {"num_frames": 9}, {"num_frames": 64})]


@pytest.fixture(scope="module")
def tv_refs(tmp_path_factory):
    jobs = [{"cls": rule, "kwargs": {}, "samples": GRID} for rule in (QWEN2, QWEN3)]
    out = video_oracle.run_oracle(tmp_path_factory.mktemp("sampling"), jobs)
    return dict(zip((QWEN2, QWEN3), out, strict=True))


def _split(ref):
    sizes = [s for s in ref["sizes"] if s >= 0]
    it = iter(np.split(ref["indices"], np.cumsum(sizes)[:-1]))
    return [None if s < 0 else next(it) for s in ref["sizes"]]


@pytest.mark.parametrize("rule", [QWEN2, QWEN3])
def test_sampling_equals_sample_frames(tv_refs, rule):
    import dataclasses

    expected = _split(tv_refs[rule])
    for (total, rate, opts), ref in zip(GRID, expected, strict=True):
        fields = {"fps": None, "num_frames": None, **opts}
        cfg = dataclasses.replace(CLASS_DEFAULTS[rule], **fields)
        meta = {"total_num_frames": total, "fps": rate}
        if ref is None:
            with pytest.raises(ValueError):
                sample_indices(cfg, meta)
            continue
        got = sample_indices(cfg, meta)
        assert got.tolist() == ref.tolist(), (total, rate, opts)
