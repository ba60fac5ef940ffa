"""One vocabulary across the loss classes (issue 26): renamed keywords, ``reduction`` everywhere, renamed classes."""

from __future__ import annotations

import warnings

import pytest
import torch

import hapref.losses as losses
import hapref.losses.pml as pml
from hapref.losses import (MAE, MSE, SSHN, BlackBoxAP, Circle, Contrastive, EuclideanTripletLoss, FastAP,
                           HardestTripletLoss, InfoNCE, ListwiseAP, MemoryBankCircle, MemoryBankInfoNCE, QuadletLoss,
                           QuadLinearAP, Quadruplet1Loss, Quadruplet2Loss, RadialLoss, SigmoidStep, SmoothAP, Triplet,
                           contrastive_loss, dcl_loss, p2set_loss, sigmoid_step, view_contrast)
from hapref.losses.autossvh import AutoSSVHWeights
from hapref.plotting.losses import plot_surrogate_explorer, plot_surrogates
from hapref.plotting.tca import plot_negative_weights

# ---------------------------------------------------------------- renamed keywords

RENAMED = [
    ("SmoothAP", lambda **kw: SmoothAP(**kw), "tau", "temperature"),
    ("SigmoidStep", lambda **kw: SigmoidStep(**kw), "tau", "temperature"),
    ("sigmoid_step", lambda **kw: sigmoid_step(torch.zeros(2), **kw), "tau", "temperature"),
    ("Circle", lambda **kw: Circle(**kw), "m", "margin"),
    ("Circle", lambda **kw: Circle(**kw), "gamma", "scale"),
    ("MemoryBankCircle", lambda **kw: MemoryBankCircle(**kw), "m", "margin"),
    ("MemoryBankCircle", lambda **kw: MemoryBankCircle(**kw), "gamma", "scale"),
    ("MemoryBankInfoNCE", lambda **kw: MemoryBankInfoNCE(**kw), "tau", "temperature"),
    ("QuadletLoss", lambda **kw: QuadletLoss(**kw), "g1", "margin1"),
    ("QuadletLoss", lambda **kw: QuadletLoss(**kw), "g2", "margin2"),
    ("QuadletLoss", lambda **kw: QuadletLoss(**kw), "g3", "margin3"),
    ("view_contrast", lambda **kw: view_contrast(torch.ones(2, 4), torch.ones(2, 4), **kw), "tau", "temperature"),
    ("dcl_loss", lambda **kw: dcl_loss(torch.ones(2, 4), torch.ones(2, 4), **kw), "tau", "temperature"),
    ("dcl_loss", lambda **kw: dcl_loss(torch.ones(2, 4), torch.ones(2, 4), **kw), "tau_plus", "positive_prior"),
    ("p2set_loss", lambda **kw: p2set_loss(torch.ones(2, 4), torch.tensor([0, 0]), torch.ones(1, 4), **kw),
     "tau", "temperature"),
    ("AutoSSVHWeights", lambda **kw: AutoSSVHWeights(**kw), "tau", "temperature"),
    ("AutoSSVHWeights", lambda **kw: AutoSSVHWeights(**kw), "tau_plus", "positive_prior"),
    ("pml.Circle", lambda **kw: pml.Circle(**kw), "gamma", "scale"),
    ("pml.SmoothAP", lambda **kw: pml.SmoothAP(**kw), "tau", "temperature"),
    ("plot_surrogates", lambda **kw: plot_surrogates(**kw), "tau", "temperature"),
    ("plot_surrogate_explorer", lambda **kw: plot_surrogate_explorer(**kw), "tau", "temperature"),
    ("plot_negative_weights", lambda **kw: plot_negative_weights(**kw), "gamma", "scale"),
]


@pytest.mark.parametrize("owner, call, old, new", RENAMED, ids=[f"{r[0]}-{r[2]}" for r in RENAMED])
def test_an_old_keyword_raises_a_type_error_naming_the_new_one(owner, call, old, new):
    with pytest.raises(TypeError, match=f"takes no keyword '{old}': it is now '{new}'"):
        call(**{old: 0.5})
    call(**{new: 0.5 if new != "positive_prior" else 0.1}) if not owner.startswith("plot") else None


def test_new_keywords_keep_the_values_and_the_paper_symbols_stay_in_the_docstrings():
    def doc(cls):
        return " ".join(cls.__doc__.split())

    assert SmoothAP(temperature=0.05).temperature == 0.05 and "temperature τ" in doc(SmoothAP)
    circle = Circle(margin=0.3, scale=64.0)
    assert (circle.margin, circle.scale) == (0.3, 64.0) and repr(circle) == "Circle(margin=0.3, scale=64.0)"
    assert "scale factor γ" in doc(Circle) and "relaxation margin m" in doc(Circle)
    assert QuadletLoss(margin1=0.9, margin2=0.1, margin3=0.2).margin3 == 0.2
    weights = AutoSSVHWeights(temperature=0.3, positive_prior=0.05)
    assert (weights.temperature, weights.positive_prior) == (0.3, 0.05)
    assert contrastive_loss("circle", margin=0.3, scale=64.0).scale == 64.0
    assert contrastive_loss("infonce", temperature=0.2).temperature == 0.2
    with pytest.raises(TypeError, match="it is now 'scale'"):
        contrastive_loss("circle", gamma=64.0)


def _loss_signatures():
    import importlib
    import inspect
    import pkgutil

    names = [m.name for m in pkgutil.iter_modules(losses.__path__, "hapref.losses.")]
    for module in map(importlib.import_module, ["hapref.losses", *names, "hapref.plotting.losses",
                                                "hapref.plotting.tca"]):
        for name, obj in vars(module).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
                continue
            fns = [(name, obj)] + ([(f"{name}.__init__", obj.__init__)] if inspect.isclass(obj) else [])
            for qualname, fn in fns:
                try:
                    yield f"{module.__name__}.{qualname}", inspect.signature(fn)
                except (TypeError, ValueError):
                    continue


def test_no_loss_takes_an_old_hyperparameter_name():
    old = {"tau", "tau_plus", "gamma", "m", "g1", "g2", "g3"}
    signatures = dict(_loss_signatures())
    assert "hapref.losses.smooth_ap.SmoothAP.__init__" in signatures  # the scan sees the classes
    sizes = {"hapref.losses.pml.mined_pairs"}  # its m is the number of candidates [n, m], not a margin
    assert [name for name, sig in signatures.items() if old & set(sig.parameters) and name not in sizes] == []


# ---------------------------------------------------------------- renamed classes


@pytest.mark.parametrize("module, old, new", [
    ("hapref.losses", "CircleLoss", MemoryBankCircle), ("hapref.losses", "TripletLoss", EuclideanTripletLoss),
    ("hapref.losses.memory_bank", "CircleLoss", MemoryBankCircle),
    ("hapref.losses.radial", "TripletLoss", EuclideanTripletLoss),
])
def test_old_class_names_import_with_a_deprecation_warning_naming_the_new_one(module, old, new):
    mod = __import__(module, fromlist=["x"])
    with pytest.warns(DeprecationWarning, match=f"{old} was renamed {new.__name__}"):
        assert getattr(mod, old) is new
    assert old not in mod.__all__ and new.__name__ in mod.__all__
    with pytest.raises(AttributeError):
        getattr(mod, "NoSuchLoss")


def test_the_score_matrix_names_are_unchanged_and_distinct_from_their_variants():
    assert losses.Circle is Circle and losses.Triplet is Triplet
    assert Circle is not MemoryBankCircle and Triplet is not EuclideanTripletLoss
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new names import without a warning
        from hapref.losses import EuclideanTripletLoss as _a, MemoryBankCircle as _b  # noqa: F401


# ---------------------------------------------------------------- reduction


def _score_batch(all_positive: bool):
    g = torch.Generator().manual_seed(3)
    scores = torch.rand(5, 7, generator=g, dtype=torch.float64) * 2 - 1
    relevance = torch.rand(5, 7, generator=g) > 0.6
    relevance[:, 0] = True
    ignore = torch.zeros(5, 7, dtype=torch.bool)
    ignore[1, 3] = True
    if not all_positive:
        relevance[2] = False  # query 2 has no positive: 0 in "none", left out of the mean
    return scores, relevance, ignore


RANKING = {"MAE": MAE, "MSE": MSE, "Contrastive": Contrastive, "Triplet": Triplet, "Circle": lambda **kw: Circle(
    scale=16.0, **kw), "FastAP": FastAP, "ListwiseAP": lambda **kw: ListwiseAP(score_range=(-1.0, 1.0), **kw),
    "BlackBoxAP": BlackBoxAP, "SmoothAP": lambda **kw: SmoothAP(temperature=0.05, **kw), "QuadLinearAP": QuadLinearAP,
    "QuadLinearAP-chunked": lambda **kw: QuadLinearAP(max_elements=8, **kw),
    "SmoothAP-chunked": lambda **kw: SmoothAP(temperature=0.05, max_elements=8, **kw)}


def _grad(fn, x):
    x = x.clone().requires_grad_()
    (g,) = torch.autograd.grad(fn(x), x)
    return g


@pytest.mark.parametrize("all_positive", [True, False])
@pytest.mark.parametrize("name", list(RANKING))
def test_ranking_losses_reduce_their_per_query_values(name, all_positive):
    scores, relevance, ignore = _score_batch(all_positive)
    make = RANKING[name]
    mean, total = make()(scores, relevance, ignore), make(reduction="sum")(scores, relevance, ignore)
    each = make(reduction="none")(scores, relevance, ignore)
    has_positive = (relevance & ~ignore).any(1)
    assert each.shape == (5,) and mean.ndim == 0 and total.ndim == 0
    assert torch.all(each[~has_positive] == 0)
    torch.testing.assert_close(total, each.sum())
    torch.testing.assert_close(mean, each.sum() / has_positive.sum())
    if all_positive:
        torch.testing.assert_close(mean, each.mean())
    per_query = make().per_query(scores[has_positive], (relevance & ~ignore)[has_positive],
                                 (~relevance & ~ignore)[has_positive])
    torch.testing.assert_close(each[has_positive], per_query)
    count = int(has_positive.sum())
    torch.testing.assert_close(_grad(lambda s: make()(s, relevance, ignore), scores),
                               _grad(lambda s: make(reduction="none")(s, relevance, ignore).sum() / count, scores))
    torch.testing.assert_close(_grad(lambda s: make(reduction="sum")(s, relevance, ignore), scores),
                               _grad(lambda s: make(reduction="none")(s, relevance, ignore).sum(), scores))


@pytest.mark.parametrize("name", ["SmoothAP", "Circle", "MAE"])
def test_ranking_losses_without_any_positive_stay_on_the_graph_in_every_reduction(name):
    scores = torch.rand(3, 4, dtype=torch.float64, requires_grad=True)
    relevance = torch.zeros(3, 4, dtype=torch.bool)
    for reduction, shape in (("mean", ()), ("sum", ()), ("none", (3,))):
        out = RANKING[name](reduction=reduction)(scores, relevance)
        assert out.shape == shape and out.requires_grad and torch.all(out == 0)


def test_ranking_losses_in_half_precision_return_float32_per_query():
    scores, relevance, ignore = _score_batch(False)
    each = SmoothAP(reduction="none")(scores.half(), relevance, ignore)
    assert each.dtype == torch.float32 and each.shape == (5,)


def _square_batch():
    g = torch.Generator().manual_seed(5)
    emb = torch.nn.functional.normalize(torch.randn(6, 4, generator=g, dtype=torch.float64), dim=1)
    labels = torch.tensor([0, 0, 1, 1, 2, 3])  # queries 4 and 5 have no positive
    return emb @ emb.T, labels[:, None] == labels[None, :]


def test_infonce_reductions():
    scores, relevance = _square_batch()
    each = InfoNCE(temperature=0.1, reduction="none")(scores, relevance)
    has_positive = (relevance & ~torch.eye(6, dtype=torch.bool)).any(1)
    assert each.shape == (6,) and torch.all(each[~has_positive] == 0)
    torch.testing.assert_close(InfoNCE(temperature=0.1, reduction="sum")(scores, relevance), each.sum())
    torch.testing.assert_close(InfoNCE(temperature=0.1)(scores, relevance), each.sum() / has_positive.sum())
    torch.testing.assert_close(_grad(lambda s: InfoNCE(temperature=0.1)(s, relevance), scores),
                               _grad(lambda s: InfoNCE(temperature=0.1, reduction="none")(s, relevance).sum() / 4,
                                     scores))


def test_sshn_reductions():
    scores, relevance = _square_batch()
    relevance[0] = True  # row 0: every other item relevant, no negative
    hn, self_sim = SSHN(reduction="none")(scores, relevance)
    has_negative = (~relevance & ~torch.eye(6, dtype=torch.bool)).any(1)
    assert hn.shape == self_sim.shape == (6,) and hn[0] == 0 and not has_negative[0]
    hn_mean, self_mean = SSHN()(scores, relevance)
    hn_sum, self_sum = SSHN(reduction="sum")(scores, relevance)
    torch.testing.assert_close(hn_sum, hn.sum())
    torch.testing.assert_close(self_sum, self_sim.sum())
    torch.testing.assert_close(hn_mean, hn.sum() / has_negative.sum())
    torch.testing.assert_close(self_mean, self_sim.mean())


MEMORY_BANK = {"MemoryBankInfoNCE": lambda **kw: MemoryBankInfoNCE(0.1, **kw),
               "MemoryBankCircle": lambda **kw: MemoryBankCircle(0.25, 16.0, **kw),
               "MemoryBankCircle-released": lambda **kw: MemoryBankCircle(0.25, 16.0, released=True, **kw),
               "HardestTripletLoss": lambda **kw: HardestTripletLoss(0.3, **kw)}


@pytest.mark.parametrize("name", list(MEMORY_BANK))
def test_memory_bank_losses_reduce_their_rows(name):
    g = torch.Generator().manual_seed(7)
    sims = torch.rand(4, 6, generator=g, dtype=torch.float64) * 2 - 1
    valid = torch.rand(4, 5, generator=g) > 0.3
    make = MEMORY_BANK[name]
    each = make(reduction="none")(sims, valid)
    assert each.shape == (4,)
    torch.testing.assert_close(make()(sims, valid), each.mean())
    torch.testing.assert_close(make(reduction="sum")(sims, valid), each.sum())
    torch.testing.assert_close(_grad(lambda s: make()(s, valid), sims),
                               _grad(lambda s: make(reduction="none")(s, valid).mean(), sims))
    torch.testing.assert_close(_grad(lambda s: make(reduction="sum")(s, valid), sims),
                               _grad(lambda s: make(reduction="none")(s, valid).sum(), sims))
    empty = make(reduction="none")(sims[:0])
    assert empty.shape == (0,) and make()(sims[:0]).item() == 0


def test_memory_bank_gradient_analysis_follows_the_reduction():
    from hapref.losses import similarity_gradients
    sims = torch.tensor([[0.5, 0.2, -0.3], [0.1, 0.4, 0.0]], dtype=torch.float64)
    for reduction in ("mean", "sum"):
        loss = MemoryBankCircle(0.25, 16.0, reduction=reduction)
        g_pos, g_neg = similarity_gradients(loss, sims)
        auto = _grad(loss, sims)
        torch.testing.assert_close(torch.cat([g_pos[:, None], g_neg], dim=1), auto)
    with pytest.raises(ValueError, match="reduction"):
        similarity_gradients(MemoryBankInfoNCE(reduction="none"), sims)


TUPLES = {"EuclideanTripletLoss": (EuclideanTripletLoss, 3), "QuadletLoss": (QuadletLoss, 4),
          "RadialLoss": (RadialLoss, 4), "Quadruplet1Loss": (Quadruplet1Loss, 4), "Quadruplet2Loss": (Quadruplet2Loss, 4)}


@pytest.mark.parametrize("name", list(TUPLES))
def test_tuple_losses_reduce_their_tuples(name):
    cls, arity = TUPLES[name]
    g = torch.Generator().manual_seed(11)
    members = [0.5 * torch.randn(6, 3, generator=g, dtype=torch.float64) for _ in range(arity)]
    each = cls(reduction="none")(*members)
    assert each.shape == (6,)
    torch.testing.assert_close(cls()(*members), each.mean())
    torch.testing.assert_close(cls(reduction="sum")(*members), each.sum())
    torch.testing.assert_close(_grad(lambda q: cls()(q, *members[1:]), members[0]),
                               _grad(lambda q: cls(reduction="none")(q, *members[1:]).mean(), members[0]))


def test_pml_wrappers_pass_the_reduction_through():
    emb = torch.randn(8, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    labels = torch.arange(4).repeat(2)
    each = pml.QuadLinearAP(reduction="none")(emb, labels)
    assert each.shape == (8,)
    torch.testing.assert_close(pml.QuadLinearAP()(emb, labels), each.mean())
    torch.testing.assert_close(pml.Circle(margin=0.25, scale=32.0, reduction="sum")(emb, labels),
                               Circle(scale=32.0, reduction="none").on_embeddings(emb, labels).sum())


EVERY_LOSS_CLASS = [*RANKING.values(), InfoNCE, SSHN, *MEMORY_BANK.values(), *(c for c, _ in TUPLES.values()),
                    pml.SmoothAP, pml.Triplet]


@pytest.mark.parametrize("make", EVERY_LOSS_CLASS)
@pytest.mark.parametrize("bad", ["avg", "Mean", None, "batchmean"])
def test_an_invalid_reduction_names_the_argument_and_the_allowed_values(make, bad):
    with pytest.raises(ValueError, match=r"reduction must be 'mean', 'sum' or 'none'( \(or 'avg_nonzero', PML's AvgNonZeroReducer\))?, got"):
        make(reduction=bad)


def test_the_reduction_shows_in_the_repr_when_not_the_default():
    assert repr(SmoothAP()) == "SmoothAP(temperature=0.01)"
    assert repr(QuadLinearAP(reduction="none")) == "QuadLinearAP(delta=0.18, p=1.0, reduction='none')"
    assert repr(MAE(reduction="sum")) == "MAE(reduction='sum')"
