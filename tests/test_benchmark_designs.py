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


# ------------------------------------------------------------------ the reshoot design (chapter 4)
SMALL_RESHOOT = BenchmarkConfig(frame_size=32, num_frames=8, num_query_scenes=2, copies_per_query=1,
                                same_scene_per_query=0, num_distractors=2, num_train_clips=4, train_frames=8,
                                reshoots_per_query=2, train_reshoots=True)


def test_reshoot_order_keeps_runs_moves_every_run_and_is_not_a_reversal() -> None:
    from hapref.data.benchmark import reshoot_order

    for seed in range(50):
        for length, segment in ((16, 2), (16, 4), (8, 2), (32, 2)):
            order = reshoot_order(length, segment, torch.Generator().manual_seed(seed))
            assert sorted(order) == list(range(length))
            runs = [order[i:i + segment] for i in range(0, length, segment)]
            starts = list(range(0, length, segment))
            assert all(run == list(range(run[0], run[0] + len(run))) for run in runs)   # each run kept in order
            assert all(run[0] != s for run, s in zip(runs, starts))                      # no run in its place
            assert [r[0] for r in runs] != starts[::-1]                                   # not a reversal


def test_reshoots_match_every_query_frame_but_not_its_order() -> None:
    """A reshoot retakes the query's frames (each closer to its original than a distractor's frames are), in
    another order of 2-frame runs."""
    bench = generate_copy_benchmark(SMALL_RESHOOT)
    for qi, qid in enumerate(bench.queries.ids):
        query = bench.video(qid).double().flatten(1)
        others = [v for v in bench.database.ids if bench.info[v]["source"] is None]
        for k in range(2):
            vid = f"{qid}_reshoot{k:02d}"
            assert bench.info[vid]["role"] == "reshoot" and bench.levels[qi, bench.database.ids.index(vid)] == 1
            again = bench.video(vid).double().flatten(1)
            order = bench.info[vid]["order"]
            dist = torch.cdist(query, again)                       # [T query frames, T reshoot frames]
            matched = dist[torch.arange(len(order)), torch.tensor(order).argsort()]   # frame t vs its retake
            far = torch.cdist(query, bench.video(others[0]).double().flatten(1)).min(dim=1).values
            assert matched.mean() < far.mean()                                      # closer than a distractor
            assert order != list(range(len(order))) and sorted(order) == list(range(len(order)))
    assert generate_copy_benchmark(SMALL_RESHOOT).fingerprint() == bench.fingerprint()


def test_reshoot_queries_film_photos_and_the_option_leaves_other_benchmarks_alone() -> None:
    bench = generate_copy_benchmark(SMALL_RESHOOT)
    assert all(bench.info[q]["scene"].startswith("photo:") for q in bench.queries.ids)
    plain = replace(SMALL_RESHOOT, reshoots_per_query=0, train_reshoots=False)
    other = generate_copy_benchmark(plain)
    assert not any(v.endswith(("_reshoot00", "_reshoot01")) for v in other.database.ids)
    with pytest.raises(ValueError, match="reshoot_segment"):
        replace(SMALL_RESHOOT, reshoot_segment=5)                 # two runs must fit in 8 frames
    with pytest.raises(ValueError, match="photo scene"):
        from hapref.data.benchmark import reshoot
        reshoot("clip:bikes", [], 32, 2, torch.Generator())


def test_training_pairs_are_a_clip_and_its_reshoot() -> None:
    clips = generate_copy_benchmark(SMALL_RESHOOT).train
    a, b, c = clips[0].double().flatten(1), clips[1].double().flatten(1), clips[2].double().flatten(1)
    assert not torch.equal(a, b)
    pair = torch.cdist(a, b).min(dim=1).values.mean()             # each frame's nearest retake
    assert pair < torch.cdist(a, c).min(dim=1).values.mean() or clips.scenes  # a pair films one photo
    assert torch.cdist(a, b).min(dim=1).values.mean() < 0.5 * torch.cdist(a, b).diagonal().mean()


def test_views_without_shuffle_keep_the_frame_order() -> None:
    from hapref.data.augment import temporal_indices

    for seed in range(200):
        index, code = temporal_indices(32, 16, True, torch.Generator().manual_seed(seed), shuffle=False)
        steps = index.diff()
        monotone = bool((steps >= 0).all() or (steps <= 0).all())       # forward, reversed, paused or sped
        wrapped = int(((steps < 0) if (steps >= 0).sum() > (steps < 0).sum() else (steps > 0)).sum()) <= 1
        assert (monotone or wrapped) and bool((code == 0).all())      # no shuffled, dropped or blanked runs
    shuffled = [temporal_indices(32, 16, True, torch.Generator().manual_seed(s))[0] for s in range(200)]
    assert any(int((i.diff() < 0).sum()) > 1 and int((i.diff() > 0).sum()) > 1 for i in shuffled)


def test_pooling_init_makes_psi_a_max_pool_and_still_learns() -> None:
    import torch.nn.functional as F

    from hapref.similarity import VideoComparator

    psi = VideoComparator(init="pooling").double()
    sim = torch.rand(3, 12, 16, dtype=torch.float64) * 2 - 1
    raw, _ = psi(sim)
    assert torch.equal(raw, F.max_pool2d(sim.clamp_min(0)[:, None], 4)[:, 0])
    raw.sum().backward()
    assert psi.fconv.weight.grad[0, 1:].abs().sum() > 0            # the other channels start to matter
    with pytest.raises(ValueError, match="init must be one of"):
        VideoComparator(init="zeros")
