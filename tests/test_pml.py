"""PML's call for hapref's losses: equal to the score-matrix losses, miners restrict pairs, a training loop learns."""

from __future__ import annotations

import pytest
import torch

import hapref.losses as hl
from hapref.losses import embedding_batch, pml
from hapref.metrics import mean_average_precision

NAMES = ["QuadLinearAP", "SmoothAP", "FastAP", "ListwiseAP", "BlackBoxAP", "Contrastive", "Triplet", "Circle",
         "MAE", "MSE", "InfoNCE"]


def _batch(seed: int = 0, classes: int = 4, per_class: int = 4, dim: int = 8):
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(classes, dim, generator=g, dtype=torch.float64)
    labels = torch.arange(classes).repeat_interleave(per_class)
    emb = centres[labels] + 0.8 * torch.randn(len(labels), dim, generator=g, dtype=torch.float64)
    return emb, labels


@pytest.mark.parametrize("name", NAMES)
def test_pml_call_equals_the_score_matrix_loss(name):
    emb, labels = _batch()
    ours = getattr(pml, name)()(emb, labels)
    assert torch.equal(ours, getattr(hl, name)().on_embeddings(emb, labels))
    ref, ref_labels = _batch(seed=1)
    if name != "InfoNCE":                                     # InfoNCE needs the square in-batch matrix
        assert torch.equal(getattr(pml, name)()(emb, labels, ref_emb=ref, ref_labels=ref_labels),
                           getattr(hl, name)().on_embeddings(emb, labels, ref, ref_labels))


@pytest.mark.parametrize("name", ["QuadLinearAP", "SmoothAP", "Contrastive", "Triplet", "InfoNCE"])
@pytest.mark.parametrize("miner", ["pairs", "triplets"])
def test_a_pml_miner_restricts_the_pairs(name, miner):
    miners = pytest.importorskip("pytorch_metric_learning.miners")
    emb, labels = _batch(seed=2)
    mined = (miners.MultiSimilarityMiner(epsilon=0.3) if miner == "pairs"
             else miners.TripletMarginMiner(margin=0.5, type_of_triplets="semihard"))(emb, labels)
    assert len(mined) == (4 if miner == "pairs" else 3) and mined[0].numel() > 0
    got = getattr(pml, name)()(emb, labels, mined)
    # brute force: the same loss on the score matrix with every unmined pair ignored
    scores, relevance, ignore = embedding_batch(emb, labels)
    keep = torch.zeros_like(relevance)
    if miner == "pairs":
        a1, p, a2, n = (t.tolist() for t in mined)
        for i, j in [*zip(a1, p), *zip(a2, n)]:
            keep[i, j] = True
    else:
        for a, p, n in zip(*(t.tolist() for t in mined)):
            keep[a, p] = keep[a, n] = True
    expected = getattr(hl, name)()(scores, relevance, ignore | ~keep)
    assert torch.allclose(got, expected, rtol=0, atol=1e-12)
    assert not torch.allclose(got, getattr(hl, name)()(scores, relevance, ignore))   # the miner changed it


def _nuisance_batch(seed: int, classes: int = 6, per_class: int = 8):
    """Classes differ in 4 of 16 dimensions; the other 12 carry larger class-free noise a model must learn to drop."""
    centres = torch.randn(classes, 4, generator=torch.Generator().manual_seed(100), dtype=torch.float64)
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(classes).repeat_interleave(per_class)
    signal = centres[labels] + 0.3 * torch.randn(len(labels), 4, generator=g, dtype=torch.float64)
    return torch.cat([signal, 1.5 * torch.randn(len(labels), 12, generator=g, dtype=torch.float64)], 1), labels


def test_a_pml_training_loop_switches_to_quadlinear_ap_with_one_line():
    miners = pytest.importorskip("pytorch_metric_learning.miners")
    torch.manual_seed(0)
    x_train, y_train = _nuisance_batch(seed=3)
    x_test, y_test = _nuisance_batch(seed=4)                # same classes, unseen samples
    model = torch.nn.Linear(16, 8).double()
    miner, loss_fn = miners.MultiSimilarityMiner(epsilon=0.1), pml.QuadLinearAP()   # the one line
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

    def test_map():
        with torch.no_grad():
            scores, relevance, ignore = embedding_batch(model(x_test), y_test)
        return float(mean_average_precision(scores, relevance, ignore=ignore))

    before = test_map()
    for _ in range(60):
        emb = model(x_train)
        loss = loss_fn(emb, y_train, miner(emb, y_train))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert test_map() > before + 0.05


def test_score_matrix_losses_point_pml_users_to_the_pml_class():
    emb, labels = _batch()
    for name in ("QuadLinearAP", "InfoNCE", "Circle"):
        with pytest.raises(ValueError, match=rf"hapref\.losses\.pml\.{name}\(\)"):
            getattr(hl, name)()(emb, labels)


@pytest.mark.parametrize("indices, message", [
    ((torch.tensor([0]), torch.tensor([1])), "indices_tuple must be a PML miner's output"),
    ((torch.tensor([0]), torch.tensor([1]), torch.tensor([99])), r"negatives must index \[0, 16\)"),
    ((torch.tensor([0.0]), torch.tensor([1]), torch.tensor([2])), "anchors must be a 1-D integer tensor"),
    ((torch.tensor([0, 1]), torch.tensor([1]), torch.tensor([2])), "must have one length"),
])
def test_bad_indices_tuple_names_the_argument(indices, message):
    emb, labels = _batch()
    with pytest.raises(ValueError, match=message):
        pml.QuadLinearAP()(emb, labels, indices)
