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


# ----------------------------------------------------------------------------- channel overlays ("context")

def test_the_edits_instances_are_unchanged_by_the_overlay_option() -> None:
    """Without overlays the generator draws the same numbers as before the option existed (chapter 6's stored
    edits sweep depends on them): checksums of instance 0 taken before the change."""
    b = generate_descriptor_benchmark("edits", dtype=torch.float64)
    assert b.query_channels is None and b.database_channels is None
    assert abs(b.train.sum().item() - -669.6411482594181) < 1e-9
    assert abs(b.database.sum().item() - -112.99801293226301) < 1e-9


@pytest.fixture(scope="module")
def context():
    return generate_descriptor_benchmark("context", dtype=torch.float64)


def test_channels_are_new_at_evaluation_and_shared_by_the_distractors(context) -> None:
    c, b = context.config, context
    n_copies = c.queries * c.copies_per_query
    assert torch.equal(b.query_channels, torch.arange(c.queries))
    copies, distractors = b.database_channels[:n_copies], b.database_channels[n_copies:]
    assert len(set(copies.tolist())) == n_copies and not set(copies.tolist()) & set(range(c.queries))
    assert torch.equal(distractors, torch.arange(c.distractors) % c.queries)
    assert torch.allclose(b.database.norm(dim=-1), torch.ones((), dtype=torch.float64))


def _mean_cosines(b, x, db) -> tuple[float, float]:
    """Mean Chamfer similarity (each query frame's best cosine) of a query with its copies and with the
    distractors of its own channel."""
    c = b.config
    n_copies = c.queries * c.copies_per_query
    sims = torch.einsum("qtd,msd->qmts", F.normalize(x, dim=-1), F.normalize(db, dim=-1)).amax(-1).mean(-1)
    same_channel = torch.zeros_like(b.relevance)
    same_channel[:, n_copies:] = b.database_channels[n_copies:][None] == b.query_channels[:, None]
    return sims[b.relevance].mean().item(), sims[same_channel].mean().item()


def test_a_frame_alone_is_ambiguous_and_its_clip_resolves_it(context) -> None:
    """The design's premise: per frame, a query resembles the unrelated uploads of its channel more than its own
    copies; subtracting the view's mean frame (what all frames share, a use of the clip) reverses that."""
    copies, channel = _mean_cosines(context, context.queries, context.database)
    assert channel > copies + 0.05
    centred = [x - x.mean(1, keepdim=True) for x in (context.queries, context.database)]
    copies, channel = _mean_cosines(context, *centred)
    assert copies > channel + 0.05


def test_overlay_is_the_channel_vector_on_the_chosen_frames() -> None:
    """A literal check: with no content noise, drift or edits, and overlays on every frame, the frames of all views
    of one training clip that share a channel are identical, and two channels' frames differ by their overlays."""
    config = replace(PROFILES["context-smoke"], noise=0.0, drift=0.0, overlay_frames=1.0, channels=1)
    b = generate_descriptor_benchmark(config, dtype=torch.float64)
    views = b.train                                                     # one channel: every view overlaid alike
    first = views[:, 0, 0]
    for v in range(1, config.views):
        same_start = (views[:, v, 0] - first).norm(dim=-1) < 1e-9
        assert same_start.any()                                          # windows that start alike are equal


@pytest.mark.parametrize("bad, match", [({"overlay": -1.0}, "overlay"), ({"overlay_frames": 0.0}, "overlay"),
                                        ({"channels": 0}, "channels")])
def test_bad_overlay_configs_name_the_field(bad, match) -> None:
    with pytest.raises(ValueError, match=match):
        DescriptorBenchmarkConfig(**bad)


def test_tca_profile_reads_the_context_benchmark() -> None:
    data = prepare_data("context-smoke")
    p = TCA_PROFILES["context-smoke"]
    assert data.train.shape == (p.train_clips, p.strong_views + 1, p.frames, p.whiten_dim)
    assert TCA_PROFILES["context"].descriptors == "context" and PROFILES["context"].content_in_edits == 1.0
