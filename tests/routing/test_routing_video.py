"""Video items through the routing library: one placement key each, exact through the fleet.

A video's key is its content and what changes its output (its options); a routed request of
images and videos comes back in order, each exact to the library. The fleet is two real servers
on 127.0.0.1 (in this process)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("grpc")
pytest.importorskip("av")

import smg_fast  # noqa: E402
from smg_fast._proto import preprocessor_pb2 as pb  # noqa: E402
from smg_fast.processors.loader import load_video_processor  # noqa: E402
from smg_fast.routing import RoutedClient  # noqa: E402
from smg_fast.routing.placement import item_key  # noqa: E402
from smg_fast.testing.video_clips import make_clip  # noqa: E402

CLIPS = [make_clip("h264", 160, 96, 24, fps=12), make_clip("h264", 128, 72, 10, fps=5),
         make_clip("h264", 96, 64, 16, fps=8)]

pytestmark = pytest.mark.usefixtures("no_shm_leak")


def test_a_video_key_is_its_content_and_options():
    data = CLIPS[0]
    image = item_key(pb.MediaItem(data=data), "q2", "float32", None, None)
    video = item_key(pb.MediaItem(data=data, video=pb.VideoOptions()), "q2", "float32", None,
                     None)
    fps2 = item_key(pb.MediaItem(data=data, video=pb.VideoOptions(fps=2)), "q2", "float32",
                    None, None)
    again = item_key(pb.MediaItem(data=data, video=pb.VideoOptions(fps=2)), "q2", "float32",
                     None, None)
    assert len({image, video, fps2}) == 3 and fps2 == again
    assert fps2.startswith(video)  # the same content identity, then the options


def test_a_routed_request_of_images_and_videos_is_exact(start_server, small_jpegs):
    servers = [start_server(models=[("qwen2_vl", "qwen2_vl")], pixel_cache_mb=64)
               for _ in range(2)]
    # affinity_wait: a video whose member is at the bound waits for it (the default 10 ms wait,
    # then a spill and a miss, is shorter than a video's decode on a loaded host)
    with RoutedClient([s.target for s in servers], timeout=60, floor=1,
                      affinity_wait=30) as rc:
        out = rc.preprocess([small_jpegs["rocket"]], videos=CLIPS, videos_kwargs={"fps": 2},
                            transport="inline")
        again = rc.preprocess(videos=CLIPS, videos_kwargs={"fps": 2}, transport="shm")
    assert [it.video is not None for it in out.items] == [False, True, True, True]
    assert np.array_equal(out.pixel_values, smg_fast.load_processor("qwen2_vl")(
        small_jpegs["rocket"])["pixel_values"])
    ref = load_video_processor("qwen2_vl")(CLIPS, do_sample_frames=True, fps=2,
                                           return_metadata=True)
    for result in (out, again):
        assert np.array_equal(result.pixel_values_videos, ref["pixel_values_videos"])
        assert np.array_equal(result.video_grid_thw, ref["video_grid_thw"])
        assert [m["frames_indices"] for m in result.video_metadata] == [
            list(m["frames_indices"]) for m in ref["video_metadata"]]
    # each video went back to the member that has its pixels
    assert all(it.cache_hit for it in again.items)
    assert [it.worker for it in again.items] == [it.worker for it in out.items[1:]]


def test_the_router_process_serves_videos(start_server):
    """``python -m smg_fast.router`` in front of two servers: video items pass through it."""
    from smg_fast.client import Client
    from smg_fast.testing.servers import RouterProcess

    servers = [start_server(models=[("qwen2_vl", "qwen2_vl")]) for _ in range(2)]
    with RouterProcess([s.target for s in servers]) as router:
        with Client(router.target, timeout=60) as c:
            out = c.preprocess(videos=CLIPS[:2], videos_kwargs={"num_frames": 4},
                               transport="inline")
    ref = load_video_processor("qwen2_vl")(CLIPS[:2], do_sample_frames=True, num_frames=4,
                                           fps=None, return_metadata=True)
    assert np.array_equal(out.pixel_values_videos, ref["pixel_values_videos"])
    assert np.array_equal(out.video_grid_thw, ref["video_grid_thw"])
    assert [m["frames_indices"] for m in out.video_metadata] == [
        list(m["frames_indices"]) for m in ref["video_metadata"]]
