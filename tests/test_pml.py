"""PML's call for hapref's losses: PML's numbers and gradients for the losses PML has, the score-matrix losses
for the others (miners restrict pairs), a training loop learns, and PML users' keywords get clear answers."""

from __future__ import annotations

import inspect
import warnings

import pytest
import torch

import hapref.losses as hl
from hapref.losses import embedding_batch, pml
from hapref.metrics import mean_average_precision

NAMES = ["QuadLinearAP", "SmoothAP", "FastAP", "ListwiseAP", "BlackBoxAP", "Contrastive", "Triplet", "Circle",
         "MAE", "MSE", "InfoNCE"]
NOT_IN_PML = ["QuadLinearAP", "ListwiseAP", "BlackBoxAP", "MAE", "MSE"]


def _batch(seed: int = 0, classes: int = 4, per_class: int = 4, dim: int = 8, shuffle: bool = False):
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(classes, dim, generator=g, dtype=torch.float64)
    labels = torch.arange(classes).repeat_interleave(per_class)
    emb = centres[labels] + 0.8 * torch.randn(len(labels), dim, generator=g, dtype=torch.float64)
    if shuffle:
        order = torch.randperm(len(labels), generator=g)
        emb, labels = emb[order], labels[order]
    return emb, labels


@pytest.mark.parametrize("name", NOT_IN_PML)
def test_pml_call_equals_the_score_matrix_loss(name):
    emb, labels = _batch()
    ours = getattr(pml, name)()(emb, labels)
    assert torch.equal(ours, getattr(hl, name)().on_embeddings(emb, labels))
    assert torch.equal(getattr(pml, name)(keep_self=True)(emb, labels),
                       getattr(hl, name)().on_embeddings(emb, labels, keep_self=True))
    ref, ref_labels = _batch(seed=1)
    assert torch.equal(getattr(pml, name)()(emb, labels, ref_emb=ref, ref_labels=ref_labels),
                       getattr(hl, name)().on_embeddings(emb, labels, ref, ref_labels))


def test_shared_losses_with_aligned_settings_are_the_score_matrix_losses():
    """On a class-balanced batch, PML's losses with these settings are hapref's score-matrix losses."""
    emb, labels = _batch(classes=3, per_class=4, shuffle=True)
    same = [(pml.SmoothAP(keep_self=False), hl.SmoothAP()), (pml.FastAP(), hl.FastAP()),
            (pml.Contrastive(1.0, 0.0, distance="cosine", reduction="mean"), hl.Contrastive(1.0, 0.0)),
            (pml.Triplet(0.1, distance="cosine", reduction="mean"), hl.Triplet(0.1)),
            (pml.Circle(0.25, 256.0, reduction="mean"), hl.Circle(0.25, 256.0))]
    for ours, score_matrix in same:
        torch.testing.assert_close(ours(emb, labels), score_matrix.on_embeddings(emb, labels), rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- equal to pytorch-metric-learning

def _pml_pairs():
    losses = pytest.importorskip("pytorch_metric_learning.losses")
    return {"SmoothAP": (pml.SmoothAP, losses.SmoothAPLoss), "FastAP": (pml.FastAP, losses.FastAPLoss),
            "Contrastive": (pml.Contrastive, losses.ContrastiveLoss),
            "Triplet": (pml.Triplet, losses.TripletMarginLoss), "Circle": (pml.Circle, losses.CircleLoss),
            "InfoNCE": (pml.InfoNCE, losses.NTXentLoss), "NTXent": (pml.NTXent, losses.NTXentLoss)}


def _miner(kind):
    miners = pytest.importorskip("pytorch_metric_learning.miners")
    return {None: None, "pairs": miners.MultiSimilarityMiner(epsilon=0.05),
            "triplets": miners.TripletMarginMiner(margin=0.1, type_of_triplets="semihard")}[kind]


def _value_and_grad(loss, emb, labels, mined, **ref):
    x = emb.clone().requires_grad_(True)
    value = loss(x, labels, mined, **ref)
    value.backward()
    return value.detach(), x.grad


# PML's SmoothAPLoss is right only on contiguous class blocks with as many classes as items per class (it reshapes
# the batch into such blocks) and stores each AP in float32: on those batches, to 1e-7.
BATCHES = {"4x4 blocks": dict(classes=4, per_class=4), "3x5 shuffled": dict(classes=3, per_class=5, shuffle=True),
           "6x3 shuffled": dict(classes=6, per_class=3, shuffle=True, seed=5)}


@pytest.mark.parametrize("batch", sorted(BATCHES))
@pytest.mark.parametrize("miner", [None, "pairs", "triplets"])
@pytest.mark.parametrize("name", ["SmoothAP", "FastAP", "Contrastive", "Triplet", "Circle", "InfoNCE", "NTXent"])
def test_shared_losses_give_pml_values_and_gradients_with_pml_defaults(name, miner, batch):
    ours, theirs = _pml_pairs()[name]
    if name == "SmoothAP" and batch != "4x4 blocks":
        pytest.skip("PML's SmoothAPLoss is wrong on this batch (see test_pml_smooth_ap_is_only_right_on_square_blocks)")
    emb, labels = _batch(**BATCHES[batch])
    mined = None if miner is None else _miner(miner)(emb, labels)
    if mined is not None:
        assert all(t.numel() > 1 for t in mined)
    tol = 1e-7 if name == "SmoothAP" else 1e-12
    v1, g1 = _value_and_grad(ours(), emb, labels, mined)
    v2, g2 = _value_and_grad(theirs(), emb, labels, mined)
    assert v1.item() == pytest.approx(v2.item(), abs=tol, rel=tol)
    torch.testing.assert_close(g1, g2, rtol=1e-6, atol=tol)


def test_the_miners_change_the_shared_losses():
    emb, labels = _batch(**BATCHES["6x3 shuffled"])
    for name, (ours, _) in _pml_pairs().items():
        if name == "SmoothAP":
            continue
        plain = ours()(emb, labels)
        assert any(ours()(emb, labels, _miner(kind)(emb, labels)) != plain for kind in ("pairs", "triplets")), name


def test_shared_losses_take_pml_distances_reducers_and_a_reference_set():
    losses = pytest.importorskip("pytorch_metric_learning.losses")
    from pytorch_metric_learning import distances, reducers
    emb, labels = _batch(**BATCHES["3x5 shuffled"])
    ref, ref_labels = _batch(seed=7, classes=3, per_class=4)
    cos, l2, l2sq = distances.CosineSimilarity(), distances.LpDistance(), distances.LpDistance(power=2)
    cases = [
        (pml.Contrastive(1.0, 0.0, distance="cosine", reduction="mean"),
         losses.ContrastiveLoss(1.0, 0.0, distance=cos, reducer=reducers.MeanReducer())),
        (pml.Contrastive(0.1, 1.5, distance=l2sq, reducer=reducers.SumReducer()),
         losses.ContrastiveLoss(0.1, 1.5, distance=l2sq, reducer=reducers.SumReducer())),
        (pml.Triplet(0.2, distance=cos, reducer=reducers.MeanReducer()),
         losses.TripletMarginLoss(0.2, distance=cos, reducer=reducers.MeanReducer())),
        (pml.Triplet(0.3, smooth_loss=True), losses.TripletMarginLoss(0.3, smooth_loss=True)),
        (pml.Circle(0.25, 256.0, reduction="mean"), losses.CircleLoss(0.25, 256, reducer=reducers.MeanReducer())),
        (pml.InfoNCE(0.5, distance=l2), losses.NTXentLoss(0.5, distance=l2)),
    ]
    for ours, theirs in cases:
        for kwargs in ({}, {"ref_emb": ref, "ref_labels": ref_labels}):
            v1, g1 = _value_and_grad(ours, emb, labels, None, **kwargs)
            v2, g2 = _value_and_grad(theirs, emb, labels, None, **kwargs)
            assert v1.item() == pytest.approx(v2.item(), rel=1e-12, abs=1e-12), (ours, kwargs)
            torch.testing.assert_close(g1, g2, rtol=1e-9, atol=1e-12)


def test_pml_smooth_ap_is_only_right_on_square_blocks():
    """hapref's SmoothAP is the literal Smooth-AP on every batch; PML's agrees only on square contiguous blocks."""
    losses = pytest.importorskip("pytorch_metric_learning.losses")
    for classes, per_class, pml_right in ((4, 4, True), (8, 4, False), (2, 4, False)):
        emb, labels = _batch(classes=classes, per_class=per_class)
        scores, relevance, _ = embedding_batch(emb, labels, keep_self=True)
        ours = pml.SmoothAP()(emb, labels)
        torch.testing.assert_close(ours, hl.SmoothAP()(scores, relevance), rtol=1e-12, atol=1e-12)
        assert (abs(ours.item() - losses.SmoothAPLoss()(emb, labels).item()) < 1e-7) == pml_right


def test_signatures_are_explicit_and_take_keep_self():
    for name in pml.__all__:
        obj = getattr(pml, name)
        if inspect.isclass(obj) and obj is not pml.PMLLoss:
            kinds = {p.kind for p in inspect.signature(obj).parameters.values()}
            assert not kinds & {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD}, name
    emb, labels = _batch()
    for name in ["SmoothAP", "FastAP", *NOT_IN_PML]:
        assert "keep_self" in inspect.signature(getattr(pml, name)).parameters
    assert pml.SmoothAP().keep_self and not pml.FastAP().keep_self and not pml.QuadLinearAP().keep_self
    assert pml.SmoothAP(keep_self=False)(emb, labels) != pml.SmoothAP()(emb, labels)


def test_pml_defaults():
    assert (pml.Circle().loss.margin, pml.Circle().loss.scale) == (0.4, 80.0)
    assert pml.InfoNCE().temperature == 0.07 and pml.SmoothAP().loss.temperature == 0.01
    assert pml.Triplet().margin == 0.05 and pml.Triplet().distance == "euclidean"
    assert (pml.Contrastive().pos_margin, pml.Contrastive().neg_margin) == (0.0, 1.0)
    assert pml.Contrastive().reduction == pml.Triplet().reduction == pml.Circle().reduction == "avg_nonzero"
    assert (hl.Circle().margin, hl.Circle().scale, hl.InfoNCE().temperature) == (0.25, 256.0, 0.03)  # papers'


@pytest.mark.parametrize("make, match", [
    (lambda: pml.Circle(distance="euclidean"), r"Circle: distance='euclidean' is not supported.*'cosine'"),
    (lambda: pml.SmoothAP(distance="euclidean"), r"distance= 'cosine'.*hapref\.losses\.SmoothAP"),
    (lambda: pml.FastAP(distance="cosine"), r"distance= 'squared_euclidean'"),
    (lambda: pml.Triplet(distance="manhattan"), r"'cosine' \| 'euclidean' \| 'squared_euclidean'"),
])
def test_an_unsupported_distance_names_the_hapref_way(make, match):
    with pytest.raises(TypeError, match=match):
        make()


def test_pml_distance_and_reducer_objects_are_mapped_or_refused():
    pytest.importorskip("pytorch_metric_learning")
    from pytorch_metric_learning import distances, reducers
    assert pml.Triplet(distance=distances.CosineSimilarity()).distance == "cosine"
    assert pml.FastAP(distance=distances.LpDistance(power=2)).reduction == "mean"
    assert pml.Circle(reducer=reducers.MeanReducer()).reduction == "mean"
    with pytest.raises(TypeError, match=r"distance='LpDistance\(normalize_embeddings=False.*hapref computes"):
        pml.Triplet(distance=distances.LpDistance(normalize_embeddings=False))
    with pytest.raises(TypeError, match=r"reducer=ThresholdReducer\(\).*reduction= 'mean'.*reduction='none'"):
        pml.Contrastive(reducer=reducers.ThresholdReducer(low=0.1))
    with pytest.raises(TypeError, match=r"reducer=AvgNonZeroReducer\(\)"):
        pml.SmoothAP(reducer=reducers.AvgNonZeroReducer())   # an AP loss has no zero terms to drop
    with pytest.raises(TypeError, match="takes no keyword 'gamma': it is now 'scale'"):
        pml.Circle(gamma=80)


@pytest.mark.parametrize("name", NAMES)
def test_an_empty_mined_set_warns_once(name):
    emb, labels = _batch()
    empty = torch.tensor([], dtype=torch.long)
    weighs_queries = name in ("SmoothAP", "FastAP")   # a miner weighs their queries; nothing mined: all weigh 1
    no_negatives = (torch.tensor([0, 1]), torch.tensor([1, 0]), empty, empty)
    mined = (empty, empty, empty, empty) if weighs_queries else no_negatives
    loss = getattr(pml, name)()
    with pytest.warns(UserWarning, match=f"{name}: the miner's indices_tuple holds no (pair|negative pair|triplet)"):
        value = loss(emb.requires_grad_(), labels, mined)
    if weighs_queries:
        assert value.item() == loss(emb, labels).item() > 0
    elif name in ("Contrastive", "MAE", "MSE"):        # their positive-pair terms are left
        assert value.item() > 0
    else:
        assert value.item() == 0 and value.requires_grad
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loss(emb, labels, mined)          # once per loss object


@pytest.mark.parametrize("name", NOT_IN_PML)
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
