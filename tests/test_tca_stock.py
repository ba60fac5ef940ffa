"""Chapter 6's stock benchmark and TCA's paper-faithful defaults (issue 29): the released L3-iRMAC windows against
torch's own max pooling, the random bank start, bank-only negatives, and the two evaluation controls."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from hapref.data.benchmark import BenchmarkConfig, TrainClips, generate_copy_benchmark, stock_pool
from hapref.features.pooling import pool_layers, released_l3irmac, released_tca_windows
from hapref.losses.memory_bank import MemoryBank
from hapref.train.tca import PROFILES, TCATask, Variant


@pytest.mark.parametrize("size", [56, 28, 14, 7])
def test_released_windows_are_the_released_max_pool(size):
    p = int(size * 2 / 7)
    k = int(1.5 * p)
    x = torch.arange(size, dtype=torch.float64).view(1, 1, size)
    starts = F.max_pool1d(x, k, stride=p).flatten().tolist()          # the max of a window is its last index
    assert [(b - k + 1, b + 1) for b in map(int, starts)] == released_tca_windows(size)
    if size == 56:
        assert released_tca_windows(56) == [(0, 24), (16, 40), (32, 56)]


def test_released_l3irmac_is_torch_max_pool2d_regions():
    torch.manual_seed(0)
    maps = [torch.rand(3, 5, n, n, dtype=torch.float64) for n in (56, 28, 14, 7)]
    parts = []
    for fmap in maps:                                                  # a literal transcription with torch's pooling
        p = int(fmap.shape[-1] * 2 / 7)
        regions = F.max_pool2d(F.normalize(fmap, dim=1), int(1.5 * p), stride=p)     # [T, C, 3, 3]
        regions = F.normalize(regions.flatten(2), dim=1)                              # each region over channels
        parts.append(F.normalize(regions.sum(-1), dim=-1))
    expected = F.normalize(torch.cat(parts, dim=-1), dim=-1)
    torch.testing.assert_close(released_l3irmac(maps), expected)
    torch.testing.assert_close(pool_layers(maps, "l3irmac_released"), expected)
    assert not torch.allclose(pool_layers(maps, "l3irmac"), expected)  # hapref's even windows differ


def test_random_bank_start_is_full_of_unit_keys():
    bank = MemoryBank(6, 4, dtype=torch.float64)
    bank.fill_random(torch.Generator().manual_seed(1))
    keys, ids = bank.filled()
    assert keys.shape == (6, 4) and keys.dtype == torch.float64
    torch.testing.assert_close(keys.norm(dim=1), torch.ones(6, dtype=torch.float64))
    assert ids.tolist() == [-1] * 6
    bank.enqueue(torch.zeros(2, 4, dtype=torch.float64), torch.tensor([5, 6]))   # a queue: the oldest go first
    assert bank.filled()[1].tolist() == [-1, -1, -1, -1, 5, 6]


def test_negatives_are_the_bank_unless_in_batch_is_asked_for():
    task = TCATask("smoke")
    assert task.in_batch is False and PROFILES["smoke"].bank_init == "random"
    torch.manual_seed(0)
    model = task.build_model()
    assert int(model.bank.count) == model.bank.size                   # full of random keys from the start
    batch = task.batch(0, torch.device("cpu"))
    captured = {}
    original = task.criterion.forward

    def spy(sims, valid=None, **kw):
        captured["sims"] = sims
        return original(sims, valid, **kw)
    task.criterion.forward = spy
    task.loss(model, batch)
    b = batch["anchor"].shape[0]
    assert captured["sims"].shape == (b, 1 + model.bank.size)          # positive + bank, no in-batch columns
    extended = TCATask(replace(PROFILES["smoke"], in_batch_negatives=True))
    extended.criterion.forward = spy
    extended.loss(extended.build_model(), extended.batch(0, torch.device("cpu")))
    assert captured["sims"].shape == (b, 1 + (b - 1) + model.bank.size)
    with pytest.raises(ValueError, match="in_batch_negatives"):
        TCATask("smoke", Variant(bank_size=0))
    assert TCATask("smoke", Variant(bank_size=0, in_batch_negatives=True)).in_batch


def test_controls_shuffle_leaves_the_transformer_and_moves_an_lstm():
    task = TCATask("smoke")
    torch.manual_seed(0)
    tca = task.build_model().eval()
    base, shuffled = task.scores(tca), task.control_scores(tca, "shuffled")
    for name in ("c", "f", "sym"):
        torch.testing.assert_close(base[name], shuffled[name], atol=1e-5, rtol=0)
    lstm_task = TCATask("smoke", Variant(aggregator="lstm"))
    torch.manual_seed(0)
    lstm = lstm_task.build_model().eval()
    assert not torch.allclose(lstm_task.scores(lstm)["c"], lstm_task.control_scores(lstm, "shuffled")["c"])
    alone = task.control_scores(tca, "context_free")        # a one-frame video: the frame by itself
    d = task.data
    frame = tca.frame_embeddings(d.queries[0, :1][None])[0, 0]
    expected = F.normalize(torch.stack([tca.frame_embeddings(d.queries[0, t:t + 1][None])[0, 0]
                                        for t in range(int(d.query_valid[0].sum()))]).mean(0), dim=0)
    assert torch.allclose(frame, tca.frame_embeddings(d.queries[0, :1][None])[0, 0])
    b = F.normalize(torch.stack([tca.frame_embeddings(d.database[0, t:t + 1][None])[0, 0]
                                 for t in range(int(d.database_valid[0].sum()))]).mean(0), dim=0)
    torch.testing.assert_close(alone["c"][0, 0], expected @ b, atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="control"):
        task.control_scores(tca, "reversed")


def _small_stock(**kw) -> BenchmarkConfig:
    return BenchmarkConfig(frame_size=32, num_frames=8, num_query_scenes=2, copies_per_query=1,
                           same_scene_per_query=1, num_distractors=6, num_train_clips=4, train_frames=8,
                           stock_shots=2, stock_frames=4, **kw)


def test_every_video_opens_with_a_shared_stock_shot():
    config = _small_stock()
    bench = generate_copy_benchmark(config)
    pool = stock_pool(config)
    for vid, frames in [*zip(bench.queries.ids, bench.queries.videos)]:
        assert torch.equal(frames[:4], pool[bench.info[vid]["stock"]][:4])
    openers = [bench.info[v]["stock"] for v in bench.database.ids if bench.info[v]["role"] == "distractor"]
    assert set(openers) <= {0, 1} and len(openers) == 6
    for v, frames in zip(bench.database.ids, bench.database.videos):
        if bench.info[v]["role"] == "distractor" and bench.info[v]["family"] is None:   # unedited: exact footage
            assert torch.equal(frames[:4], pool[bench.info[v]["stock"]][:4])
    clips = TrainClips(config, ["photo:brick", "clip:bikes"])
    for i in range(4):
        assert torch.equal(clips[i][:4], pool[clips.stock_index(i)][:4])
    plain = replace(config, stock_shots=0)                            # without stock shots nothing changes
    assert "stock" not in generate_copy_benchmark(plain).info["q000"]


def test_stock_config_errors_name_the_field():
    with pytest.raises(ValueError, match="stock_frames"):
        BenchmarkConfig(stock_shots=2, stock_frames=16)
    with pytest.raises(ValueError, match="stock_shots"):
        BenchmarkConfig(stock_shots=-1)
    with pytest.raises(ValueError, match="reshoot"):
        BenchmarkConfig(stock_shots=2, reshoots_per_query=2)
