"""Benchmark design options: channel templates, a restricted unlabeled collection, benchmark instances (data seeds)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from hapref.data.benchmark import BenchmarkConfig, generate_copy_benchmark, train_scenes
from hapref.data.transforms import CHANNEL_NAMES, channel_template

SMALL = dict(frame_size=32, num_frames=8, num_query_scenes=2, copies_per_query=4, same_scene_per_query=1,
             num_distractors=6, num_train_clips=6, train_frames=8)


def test_channels_frame_every_video_and_copies_change_channel() -> None:
    bench = generate_copy_benchmark(BenchmarkConfig(**SMALL, channels=3))
    band = round(0.25 * 32)
    videos = dict(zip(bench.queries.ids + bench.database.ids, bench.queries.videos + bench.database.videos))
    for vid, frames in videos.items():
        channel = bench.info[vid]["channel"]
        assert 0 <= channel < 3
        blank = channel_template(torch.zeros_like(frames), channel)
        assert torch.equal(frames[:, :band], blank[:, :band]) and torch.equal(frames[:, -band:], blank[:, -band:])
        if bench.info[vid]["role"] == "copy":                 # a re-upload: another channel than its query's
            assert channel != bench.info[bench.info[vid]["source"]]["channel"]
    # the channels come from their own random stream: the content rows equal those of the design without channels
    plain = generate_copy_benchmark(BenchmarkConfig(**SMALL))
    assert plain.database.ids == bench.database.ids
    for a, b in zip(plain.queries.videos, bench.queries.videos):
        assert torch.equal(a[:, band:-band], b[:, band:-band])
    clip = bench.train[0]
    assert torch.equal(clip[:, :band], channel_template(torch.zeros_like(clip), bench.train.channel(0))[:, :band])


def test_channel_template_checks_its_arguments() -> None:
    frames = torch.zeros(1, 16, 16, 3, dtype=torch.uint8)
    with pytest.raises(ValueError, match="channel must be in"):
        channel_template(frames, len(CHANNEL_NAMES))
    with pytest.raises(ValueError, match="banner must be"):
        channel_template(frames, 0, banner=0.5)
    with pytest.raises(ValueError, match="channels must be 0"):
        BenchmarkConfig(channels=1)


def test_train_scenes_restricts_the_unlabeled_collection() -> None:
    config = BenchmarkConfig(**SMALL, train_scenes=2)
    bench = generate_copy_benchmark(config)
    assert len(bench.train.scenes) == 2
    assert not set(bench.train.scenes) & {bench.info[q]["scene"] for q in bench.queries.ids}
    assert train_scenes(replace(config, train_scenes=0), set()) == train_scenes(BenchmarkConfig(), set())
    with pytest.raises(ValueError, match="train_scenes must be in"):
        BenchmarkConfig(train_scenes=100)


def test_hapvr_benchmark_seed_builds_another_instance() -> None:
    from hapref.train.hapvr import PROFILES, prepare_data

    first = prepare_data(PROFILES["smoke"])
    other = prepare_data(replace(PROFILES["smoke"], benchmark_seed=1))
    assert first.queries.shape[1:] == other.queries.shape[1:]
    assert not torch.equal(first.queries, other.queries)
