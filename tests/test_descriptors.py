"""hapref.data.descriptors: the drawn frame-descriptor benchmark of chapter 6 has the structure its docstring states
(deterministic instances, relevance, windows, an edit subspace that whitening cannot see but copy pairs reveal), and
the TCA pipeline trains on it."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from hapref.data.descriptors import PROFILES, DescriptorBenchmarkConfig, generate_descriptor_benchmark
from hapref.features import PCAWhitening
from hapref.train.tca import PROFILES as TCA_PROFILES, TCATask, prepare_data


@pytest.fixture(scope="module")
def bench():
    return generate_descriptor_benchmark("edits", dtype=torch.float64)


def test_instances_are_deterministic_and_differ_by_seed() -> None:
    a, b = generate_descriptor_benchmark("smoke"), generate_descriptor_benchmark("smoke")
    c = generate_descriptor_benchmark("smoke", seed=1)
    assert torch.equal(a.train, b.train) and torch.equal(a.database, b.database)
    assert not torch.allclose(a.train, c.train) and not torch.allclose(a.edit_basis, c.edit_basis)
    assert c.config.seed == 1 and a.train.dtype == torch.float32


def test_shapes_relevance_and_unit_frames(bench) -> None:
    c = bench.config
    assert bench.train.shape == (c.train_clips, c.views, c.view_frames, c.dim)
    assert bench.queries.shape == (c.queries, c.view_frames, c.dim)
    assert bench.database.shape == (c.queries * c.copies_per_query + c.distractors, c.view_frames, c.dim)
    for x in (bench.train, bench.distractor_views, bench.queries, bench.database):
        assert torch.allclose(x.norm(dim=-1), torch.ones((), dtype=x.dtype), atol=1e-12)
    rel = bench.relevance
    assert rel.sum(1).tolist() == [c.copies_per_query] * c.queries
    assert rel.sum(0)[:c.queries * c.copies_per_query].tolist() == [1] * (c.queries * c.copies_per_query)
    assert not rel[:, c.queries * c.copies_per_query:].any()               # distractors are never relevant
    q, k = rel.nonzero(as_tuple=True)
    assert torch.equal(k // c.copies_per_query, q)                         # copies stored query by query
    assert torch.allclose(bench.edit_basis.T @ bench.edit_basis, torch.eye(c.edit_rank, dtype=torch.float64))


def test_whitening_cannot_see_the_edit_subspace_but_copy_pairs_do(bench) -> None:
    inside = bench.edit_basis @ bench.edit_basis.T
    frames = bench.train.flatten(0, 2)
    cov = torch.cov((frames - frames.mean(0)).T)
    share_inside = torch.trace(inside @ cov) / torch.trace(cov)
    # the edit subspace holds its share of the variance (r / D) within a few per cent: PCA cannot single it out
    assert abs(share_inside - bench.config.edit_rank / bench.config.dim) < 0.03
    # ... while the difference of two views of one clip lies mostly inside it
    diff = (bench.train[:, 0] - bench.train[:, 1]).flatten(0, 1)
    assert ((diff @ inside).pow(2).sum() / diff.pow(2).sum()) > 0.7
    # and so the projection off the subspace, a map copy pairs can teach, makes copies retrievable
    outside = torch.eye(bench.config.dim, dtype=torch.float64) - inside
    def chamfer_map(proj):
        from hapref.metrics import map_and_micro_ap
        from hapref.train.tca import frame_scores
        q, db = F.normalize(bench.queries @ proj, dim=-1), F.normalize(bench.database @ proj, dim=-1)
        valid_q = torch.ones(q.shape[:2], dtype=torch.bool)
        valid_db = torch.ones(db.shape[:2], dtype=torch.bool)
        return map_and_micro_ap(frame_scores(q, db, valid_q, valid_db, "chamfer"), bench.relevance)["mAP"]
    whitening = PCAWhitening.fit(frames, dim=bench.config.dim)
    assert chamfer_map(outside) > chamfer_map(whitening.projection) + 0.2


def test_stock_shots_are_shared_and_views_are_windows() -> None:
    config = replace(PROFILES["smoke"], noise=0.0, drift=0.0, content_in_edits=1.0, stock_shots=1, stock_pool=1)
    b = generate_descriptor_benchmark(config, dtype=torch.float64)      # no edits, noise or drift: bare shots
    frames = b.train.flatten(0, 2)
    sims = frames @ frames.T
    # every clip has one stock shot from a pool of one: the same frame appears across unrelated clips
    assert (sims > 1 - 1e-9).sum(1).max() > b.config.views * b.config.view_frames


@pytest.mark.parametrize("bad, match", [
    ({"edit_rank": 0}, "edit_rank"), ({"content_in_edits": 1.5}, "content_in_edits"), ({"noise": -1.0}, "noise"),
    ({"stock_shots": 5}, "stock_shots"), ({"view_frames": 17}, "view_frames"), ({"views": 1}, "views"),
    ({"queries": 0}, "counts"),
])
def test_bad_configs_name_the_field(bad, match) -> None:
    with pytest.raises(ValueError, match=match):
        DescriptorBenchmarkConfig(**bad)
    with pytest.raises(ValueError, match="config must be one of"):
        generate_descriptor_benchmark("nope")


def test_tca_profile_reads_the_descriptor_benchmark() -> None:
    data = prepare_data("edits-smoke")
    p = TCA_PROFILES["edits-smoke"]
    assert data.train.shape == (p.train_clips, p.strong_views + 1, p.frames, p.whiten_dim)
    assert data.distractors.shape == (p.distractor_clips, p.frames, p.whiten_dim)
    assert data.relevance.shape == (data.queries.shape[0], data.database.shape[0])
    other = prepare_data(replace(p, benchmark_seed=1))
    assert not torch.allclose(data.queries, other.queries)
    with pytest.raises(ValueError, match="frames and whiten_dim must match"):
        prepare_data(replace(p, frames=5))
    with pytest.raises(ValueError, match="descriptors must be one of"):
        prepare_data(replace(p, descriptors="nope"))
    task = TCATask("edits-smoke")
    model = task.build_model()
    assert set(task.loss(model, task.batch(0, torch.device("cpu")))) == {"loss", "s_pos"}
