"""The API as a new user meets it: embeddings + labels, NumPy inputs, single videos, clear errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hapref.losses import (MAE, MSE, BlackBoxAP, Circle, Contrastive, FastAP, HAPVRObjective, InfoNCE, ListwiseAP,
                           QuadLinearAP, SmoothAP, SSHN, Triplet, embedding_batch, p2set_loss)
from hapref.metrics import (average_precision, mean_average_precision, micro_average_precision, ndcg,
                            precision_recall_curve, quadlet_precision, triplet_precision)
from hapref.similarity import chamfer_similarity, pairwise_cosine, topk_chamfer

RANKING_LOSSES = {"QuadLinearAP": QuadLinearAP, "SmoothAP": SmoothAP, "FastAP": FastAP, "BlackBoxAP": BlackBoxAP,
                  "ListwiseAP": ListwiseAP, "Contrastive": Contrastive, "Triplet": Triplet, "Circle": Circle,
                  "MAE": MAE, "MSE": MSE, "InfoNCE": InfoNCE}


def balanced_batch(classes: int, per_class: int, dim: int = 8, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    emb = torch.randn(classes * per_class, dim, dtype=torch.float64, generator=g)
    labels = torch.arange(classes).repeat_interleave(per_class)
    perm = torch.randperm(len(labels), generator=g)
    return emb[perm], labels[perm]


# ---------------------------------------------------------------- embeddings + labels

@pytest.mark.parametrize("name", sorted(RANKING_LOSSES))
def test_on_embeddings_is_the_loss_of_the_cosine_matrix_without_self_pairs(name):
    emb, labels = balanced_batch(3, 4)
    emb.requires_grad_(True)
    loss = RANKING_LOSSES[name]()
    out = loss.on_embeddings(emb, labels)
    cos = torch.nn.functional.normalize(emb, dim=1) @ torch.nn.functional.normalize(emb, dim=1).T
    expected = loss(cos, labels[:, None] == labels[None, :], torch.eye(12, dtype=torch.bool))
    assert out.item() == pytest.approx(expected.item(), abs=1e-12)
    out.backward()
    assert torch.isfinite(emb.grad).all() and emb.grad.abs().sum() > 0


def test_on_embeddings_takes_numpy_labels_a_reference_set_and_keep_self():
    emb, labels = balanced_batch(3, 3)
    a = QuadLinearAP().on_embeddings(emb, labels.numpy())
    b = QuadLinearAP().on_embeddings(emb, labels)
    assert a.item() == b.item()
    ref = QuadLinearAP().on_embeddings(emb[:4], labels[:4], ref_embeddings=emb, ref_labels=labels)
    assert ref.item() == pytest.approx(QuadLinearAP()(pairwise_cosine(emb[:4], emb),
                                                      labels[:4, None] == labels[None]).item(), abs=1e-12)
    kept = QuadLinearAP().on_embeddings(emb, labels, keep_self=True)
    assert kept.item() == pytest.approx(QuadLinearAP()(pairwise_cosine(emb), labels[:, None] == labels).item())


def test_embedding_batch_computes_half_precision_cosines_in_float32():
    emb = torch.tensor([[1e-4, 0.0], [0.0, 3e-4], [0.0, 0.0]], dtype=torch.float16)
    scores, relevance, ignore = embedding_batch(emb, torch.tensor([0, 1, 1]))
    assert scores.dtype == torch.float32 and torch.isfinite(scores).all()
    assert scores[0, 0].item() == pytest.approx(1.0, abs=1e-3) and scores[2, 2].item() == 0


@pytest.mark.parametrize("classes,per_class", [(3, 4), (4, 4), (5, 2)])
def test_on_embeddings_equals_pytorch_metric_learning_on_class_balanced_batches(classes, per_class):
    pml = pytest.importorskip("pytorch_metric_learning")
    from pytorch_metric_learning.distances import CosineSimilarity
    from pytorch_metric_learning.losses import CircleLoss, ContrastiveLoss, FastAPLoss, TripletMarginLoss
    from pytorch_metric_learning.reducers import MeanReducer
    del pml
    emb, labels = balanced_batch(classes, per_class)
    pairs = [
        (FastAP(num_bins=10), FastAPLoss(num_bins=10)),
        (Contrastive(1.0, 0.0), ContrastiveLoss(pos_margin=1.0, neg_margin=0.0, distance=CosineSimilarity(),
                                                reducer=MeanReducer())),
        (Triplet(margin=0.2), TripletMarginLoss(margin=0.2, distance=CosineSimilarity(), reducer=MeanReducer())),
        (Circle(m=0.4, gamma=80), CircleLoss(m=0.4, gamma=80)),
    ]
    for ours, theirs in pairs:
        assert ours.on_embeddings(emb, labels).item() == pytest.approx(theirs(emb, labels).item(), rel=1e-6, abs=1e-9), \
            type(ours).__name__


def test_documented_difference_from_pytorch_metric_learning_smooth_ap():
    """PML's SmoothAPLoss ranks each query among its own positives; ``keep_self=True`` does the same."""
    pytest.importorskip("pytorch_metric_learning")
    from pytorch_metric_learning.losses import SmoothAPLoss
    emb = torch.randn(16, 8, dtype=torch.float64)
    labels = torch.arange(4).repeat_interleave(4)  # PML needs contiguous, equal class blocks (classes == per class)
    theirs = SmoothAPLoss(temperature=0.01)(emb, labels).item()
    assert SmoothAP(0.01).on_embeddings(emb, labels, keep_self=True).item() == pytest.approx(theirs, abs=1e-6)
    assert SmoothAP(0.01).on_embeddings(emb, labels).item() != pytest.approx(theirs, abs=1e-6)


@pytest.mark.parametrize("call, name", [
    (lambda: SmoothAP().on_embeddings(torch.rand(4, 3), torch.tensor([0, 1, 0])), "labels"),
    (lambda: SmoothAP().on_embeddings(torch.rand(4, 3), torch.rand(4)), "labels"),
    (lambda: SmoothAP().on_embeddings(torch.rand(4), torch.tensor([0, 1, 0, 1])), "embeddings"),
    (lambda: SmoothAP().on_embeddings([[1.0]], [0]), "embeddings"),
    (lambda: SmoothAP().on_embeddings(torch.rand(0, 3), torch.zeros(0, dtype=torch.long)), "embeddings"),
    (lambda: SmoothAP().on_embeddings(torch.rand(2, 3), torch.tensor([0, 1]), ref_embeddings=torch.rand(2, 3)),
     "ref_labels"),
    (lambda: SmoothAP().on_embeddings(torch.rand(2, 3), torch.tensor([0, 1]), torch.rand(2, 4), torch.tensor([0, 1])),
     "ref_embeddings"),
])
def test_on_embeddings_misuse_names_the_argument(call, name):
    with pytest.raises((ValueError, TypeError), match=name):
        call()


# ---------------------------------------------------------------- NumPy inputs

def test_metrics_accept_numpy_arrays():
    rng = np.random.default_rng(0)
    scores, relevance = rng.random((3, 6)), rng.random((3, 6)) > 0.5
    relevance[:, 0] = True
    t_scores, t_rel = torch.from_numpy(scores), torch.from_numpy(relevance)
    assert mean_average_precision(scores, relevance).item() == mean_average_precision(t_scores, t_rel).item()
    assert micro_average_precision(scores, relevance.astype(int)).item() == micro_average_precision(t_scores, t_rel).item()
    assert average_precision(scores[0], relevance[0]).item() == average_precision(t_scores[0], t_rel[0]).item()
    assert ndcg(scores, relevance.astype(float)).item() == ndcg(t_scores, t_rel.double()).item()
    for a, b in zip(precision_recall_curve(scores, relevance), precision_recall_curve(t_scores, t_rel)):
        assert torch.equal(a, b)
    assert quadlet_precision(scores[0], scores[1], scores[2]) == quadlet_precision(t_scores[0], t_scores[1], t_scores[2])
    assert triplet_precision(scores[0], scores[1]) == triplet_precision(t_scores[0], t_scores[1])
    assert mean_average_precision(scores.astype(np.float32), relevance).dtype == torch.float32
    from hapref.metrics import gmap, map_at_n
    assert map_at_n(scores, relevance, 3).item() == map_at_n(t_scores, t_rel, 3).item()
    assert gmap(scores, relevance).item() == gmap(t_scores, t_rel).item()


def test_metrics_name_the_argument_for_lists_and_other_non_arrays():
    with pytest.raises(TypeError, match="scores must be a torch.Tensor or a NumPy array, got list"):
        mean_average_precision([[0.3, 0.2]], torch.ones(1, 2))
    with pytest.raises(TypeError, match="relevance must be a torch.Tensor or a NumPy array, got list"):
        mean_average_precision(torch.rand(1, 2), [[1, 0]])
    with pytest.raises(TypeError, match="gains must be"):
        ndcg(torch.rand(1, 2), [[1, 0]])


# ---------------------------------------------------------------- bad inputs: clear errors

@pytest.mark.parametrize("name", sorted(RANKING_LOSSES))
@pytest.mark.parametrize("value", [float("inf"), float("-inf")])
def test_infinite_scores_are_refused_instead_of_giving_nan(name, value):
    scores = torch.rand(4, 4)
    scores[1, 2] = value
    with pytest.raises(ValueError, match="scores must be finite"):
        RANKING_LOSSES[name]()(scores, torch.eye(4, dtype=torch.bool) | (torch.rand(4, 4) > 0.5))


@pytest.mark.parametrize("make, name", [
    (lambda: Triplet(margin=-0.1), "margin"), (lambda: Circle(m=-0.1), "m must"), (lambda: Circle(gamma=-1), "gamma"),
    (lambda: Circle(gamma=0), "gamma"), (lambda: Contrastive(pos_margin=0.0, neg_margin=0.5), "pos_margin"),
])
def test_negative_margins_and_scales_are_refused(make, name):
    with pytest.raises(ValueError, match=name):
        make()


def test_sshn_on_an_empty_batch_gives_zeros_on_the_graph():
    scores = torch.zeros(0, 0, requires_grad=True)
    hard_negative, self_sim = SSHN()(scores, torch.zeros(0, 0, dtype=torch.bool))
    assert hard_negative.item() == 0 and self_sim.item() == 0
    (hard_negative + self_sim).backward()
    assert scores.grad.shape == (0, 0)


def test_unknown_objective_preset_is_a_value_error_listing_the_presets():
    with pytest.raises(ValueError, match="weights must be one of .*paper.*released"):
        HAPVRObjective(QuadLinearAP(), None, weights="papers")


def test_p2set_refuses_cluster_ids_out_of_range():
    codes = torch.tensor([[1.0, -1.0], [-1.0, 1.0]])
    with pytest.raises(ValueError, match=r"assigned must hold cluster ids in \[0, C=2\)"):
        p2set_loss(codes, torch.tensor([0, 2]), codes)
    with pytest.raises(ValueError, match="assigned"):
        p2set_loss(codes, torch.tensor([0, -1]), codes)


def test_topk_chamfer_given_two_videos_says_what_it_takes():
    a, b = torch.rand(5, 3, 4), torch.rand(6, 3, 4)
    with pytest.raises(TypeError, match="k must be a float rate in \\[0, 1\\].*frame_to_frame"):
        topk_chamfer(a, b)


def test_chamfer_on_empty_input_is_a_value_error():
    for sim in (torch.rand(0, 4), torch.rand(4, 0), torch.rand(2, 0, 3)):
        with pytest.raises(ValueError, match="sim must have at least one query and one target item"):
            chamfer_similarity(sim)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_pairwise_cosine_of_half_precision_zero_and_tiny_rows_is_finite(dtype):
    x = torch.tensor([[0.0, 0.0], [1e-4, 0.0], [3.0, 4.0]], dtype=dtype)
    sim = pairwise_cosine(x)
    assert sim.dtype == dtype and torch.isfinite(sim).all()
    assert sim[0].abs().max().item() == 0 and sim[1, 1].item() == pytest.approx(1.0, abs=1e-2)


@pytest.mark.parametrize("call, name", [
    (lambda: __import__("hapref.similarity", fromlist=["x"]).mean_pooled_similarity(
        torch.rand(3, 4), torch.rand(3, 4), x_valid=torch.ones(7, dtype=torch.bool)), "x_valid"),
    (lambda: __import__("hapref.similarity", fromlist=["x"]).pair_valid(torch.ones(3, dtype=torch.bool), [1, 0]),
     "target_valid"),
    (lambda: __import__("hapref.losses.radial", fromlist=["x"]).squared_distance(torch.rand(3, 2), torch.rand(3, 3)),
     "a and b"),
])
def test_similarity_helpers_name_the_argument(call, name):
    with pytest.raises((ValueError, TypeError), match=name):
        call()


@pytest.mark.parametrize("make, name", [
    (lambda: __import__("hapref.losses", fromlist=["x"]).TripletLoss(margin=-0.1), "margin"),
    (lambda: __import__("hapref.losses", fromlist=["x"]).QuadletLoss(g1=0.7, g2=-0.3, g3=0.5), "g2"),
    (lambda: __import__("hapref.losses", fromlist=["x"]).RadialLoss(margin=-1.0), "margin"),
    (lambda: __import__("hapref.losses", fromlist=["x"]).Quadruplet1Loss(margin=-0.5), "margin"),
    (lambda: __import__("hapref.losses", fromlist=["x"]).Quadruplet2Loss(1.0, -0.5), "margin2"),
])
def test_tuple_losses_refuse_negative_margins(make, name):
    with pytest.raises(ValueError, match=f"{name} must be >= 0"):
        make()


def test_tuple_losses_refuse_infinite_embeddings():
    from hapref.losses import QuadletLoss, RadialLoss, TripletLoss
    q, p, i, n = torch.randn(4, 3, 5)
    n[1, 2] = float("inf")
    with pytest.raises(ValueError, match="n must be finite"):
        TripletLoss()(q, p, n)
    for loss in (QuadletLoss(), RadialLoss()):
        with pytest.raises(ValueError, match="n must be finite"):
            loss(q, p, i, n)
