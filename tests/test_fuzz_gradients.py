"""Fuzzing every public loss and its building blocks in float32, float16 and bfloat16: value and gradient.

The documented inputs (issue 25): the values the pipelines produce, zero rows, and finite values with
|x| <= 1e4. On those, every public loss's value and its gradient with respect to each float input must be
finite in all three dtypes. Scores are drawn in [-1, 1] (cosines) or scaled up to 1e4; embeddings and codes
at scales 1e-3 ... 1e4, each batch with one all-zero row.
"""

from __future__ import annotations

import pytest
import torch

from hapref.losses import (MAE, MSE, BlackBoxAP, Circle, Contrastive, EuclideanTripletLoss, FastAP,
                           HardestTripletLoss, HAPVRObjective, InfoNCE, ListwiseAP, MemoryBankCircle,
                           MemoryBankInfoNCE, QuadLinearAP, QuadLinearStep, Quadruplet1Loss, Quadruplet2Loss,
                           QuadletLoss, RadialLoss, SigmoidStep, SmoothAP, SSHN, Triplet, anchor_gradient,
                           dcl_loss, frame_level_ap_loss, frame_pseudo_labels, frame_reconstruction, heaviside,
                           histogram_ap, negative_step_sum, negative_weights, p2set_loss, quad_linear,
                           relaxed_rank_ap, sigmoid_step, similarity_gradients, view_contrast)
import hapref.losses.pml as pml

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
SCALES = [0.0, 1e-3, 1.0, 1e2, 1e4]  # 0.0: all-zero inputs


def _finite(fn, inputs: list[torch.Tensor], dtype: torch.dtype, overflow: bool = False) -> torch.Tensor:
    """fn on ``inputs`` cast to ``dtype`` (requiring grad); the value and every gradient must be finite.

    ``overflow``: the exact gradient exceeds the dtype's range (Circle's γ·α at |s| = 1e4 in float16): it may be
    ±inf (never NaN), as it must be for a loss scaler to see the overflow.
    """
    leaves = [x.to(dtype).clone().requires_grad_() for x in inputs]
    out = fn(*leaves)
    total = sum(o.float().sum() for o in out) if isinstance(out, tuple) else out.float().sum()
    assert torch.isfinite(total), f"value {total}"
    if total.requires_grad:
        total.backward()
    for k, x in enumerate(leaves):
        if x.grad is not None:
            bad = (torch.isnan(x.grad) if overflow else ~torch.isfinite(x.grad)).sum().item()
            assert bad == 0, f"input {k}: {bad} non-finite gradient entries of {x.grad.numel()} ({x.grad.dtype})"
    return out


def _embeddings(seed: int, scale: float, n: int = 8, d: int = 6) -> torch.Tensor:
    x = torch.randn(n, d, generator=torch.Generator().manual_seed(seed)) * scale
    x[1] = 0  # a zero row in every batch
    return x


def _scores(seed: int, scale: float, n: int = 8) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(n, n, generator=g) * 2 - 1) * max(scale, 1.0) if scale else torch.zeros(n, n)


def _circle_overflow(name: str, scale: float, dtype: torch.dtype) -> bool:
    """Circle's gradient is γ·α ≈ 256·|s| per unit of softmax weight: ~1e6 at |s| = 1e4, beyond float16's 65504.

    The one documented exception (the Circle docstrings): its inputs are cosine similarities, |s| <= 1.
    """
    return name.lower().startswith("circle") and scale > 1e2 and dtype == torch.float16


RANKING = {"QuadLinearAP": QuadLinearAP, "SmoothAP": SmoothAP, "FastAP": FastAP, "BlackBoxAP": BlackBoxAP,
           "ListwiseAP": ListwiseAP, "Contrastive": Contrastive, "Triplet": Triplet, "Circle": Circle,
           "MAE": MAE, "MSE": MSE, "InfoNCE": InfoNCE, "SSHN": SSHN}
LABELS = torch.arange(8) // 2


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("name", sorted(RANKING))
def test_ranking_losses_on_embeddings(name, scale, dtype):
    for seed in range(2):
        _finite(lambda e: RANKING[name]().on_embeddings(e, LABELS), [_embeddings(seed, scale)], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("name", sorted(RANKING))
def test_ranking_losses_on_scores(name, scale, dtype):
    relevance = LABELS[:, None] == LABELS[None]
    ignore = torch.eye(8, dtype=torch.bool)
    for seed in range(2):
        scores = _scores(seed, scale)
        if name == "SSHN":  # SSHN takes similarities in [0, 1) (a log(1 - s) term)
            scores = scores.abs().clamp(max=0.98) if scale <= 1 else scores.abs() / scores.abs().max() * 0.98
        _finite(lambda s: RANKING[name]()(s, relevance, ignore), [scores], dtype,
                overflow=_circle_overflow(name, scale, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("name", sorted(set(pml.__all__) - {"PMLLoss", "mined_pairs"}))
def test_pml_wrappers(name, scale, dtype):
    _finite(lambda e: getattr(pml, name)()(e, LABELS), [_embeddings(0, scale)], dtype)


TUPLE_LOSSES = {"triplet": (EuclideanTripletLoss, 3), "quadlet": (QuadletLoss, 4), "radial": (RadialLoss, 4),
                "quadruplet1": (Quadruplet1Loss, 4), "quadruplet2": (Quadruplet2Loss, 4)}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("name", sorted(TUPLE_LOSSES))
def test_tuple_losses(name, scale, dtype):
    make, arity = TUPLE_LOSSES[name]
    _finite(make(), [_embeddings(k, scale) for k in range(arity)], dtype)


MEMORY_BANK = {"infonce": MemoryBankInfoNCE, "infonce-0.01": lambda: MemoryBankInfoNCE(0.01),
               "circle": MemoryBankCircle, "circle-released": lambda: MemoryBankCircle(released=True),
               "hardest-triplet": HardestTripletLoss}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("name", sorted(MEMORY_BANK))
def test_memory_bank_losses(name, scale, dtype):
    g = torch.Generator().manual_seed(0)
    sims = (torch.rand(5, 21, generator=g) * 2 - 1) * scale
    ignore = torch.rand(5, 20, generator=g) < 0.2
    _finite(lambda s: MEMORY_BANK[name]()(s, ignore=ignore), [sims], dtype,
            overflow=_circle_overflow(name, scale, dtype))
    _finite(lambda s: MEMORY_BANK[name]()(s), [sims[:0]], dtype)  # an empty batch: zero, not NaN


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scale", SCALES)
def test_autossvh_losses(scale, dtype):
    b1, b2 = _embeddings(0, scale, 6, 16), _embeddings(1, scale, 6, 16)
    for tau in (0.5, 0.05):
        _finite(lambda x, y: view_contrast(x, y, tau), [b1, b2], dtype)
        _finite(lambda x, y: dcl_loss(x, y, tau, 0.1), [b1, b2], dtype)
    centres = torch.sign(torch.randn(3, 16, generator=torch.Generator().manual_seed(2)))
    assigned = torch.arange(6) % 3
    _finite(lambda x, c: p2set_loss(x, assigned, c, 0.2), [b1, centres], dtype)
    _finite(frame_reconstruction, [b1[:, None], b2[:, None]], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scale", [0.0, 1.0])
def test_hapvr_objective_and_frame_loss(scale, dtype):
    g = torch.Generator().manual_seed(0)
    video = torch.rand(4, 4, generator=g) * scale
    relevance = torch.eye(4, dtype=torch.bool) | torch.tensor([[0, 1, 0, 0], [1, 0, 0, 0], [0] * 4, [0] * 4]).bool()
    frames = (torch.rand(4, 4, 5, 5, generator=g) * 2 - 1) * scale
    teacher = torch.rand(4, 4, 5, 5, generator=g)
    objective = HAPVRObjective(QuadLinearAP(), QuadLinearAP(), weights="released")
    _finite(lambda v, f: objective(v, relevance, torch.tensor(0.0), f, teacher)["loss"], [video, frames], dtype)
    pos, neg = frame_pseudo_labels(teacher)
    for video_relevance in (relevance, torch.zeros(4, 4, dtype=torch.bool)):
        out = _finite(lambda f: frame_level_ap_loss(f, pos, neg, video_relevance, QuadLinearAP()), [frames], dtype)
        assert out.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scale", SCALES)
def test_building_blocks(scale, dtype):
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(4, 9, generator=g) * 2 - 1) * scale
    positive = torch.rand(4, 9, generator=g) < 0.4
    positive[:, 0] = True
    negative = ~positive
    _finite(lambda v: quad_linear(v, 0.18), [x], dtype)
    _finite(lambda v: sigmoid_step(v, 0.01), [x], dtype)
    pos_scores = x[:, :3].clone()
    _finite(lambda s, p: negative_step_sum(s, p, negative.float(), QuadLinearStep(0.18)), [x, pos_scores], dtype)
    _finite(lambda s: relaxed_rank_ap(s, positive, negative, heaviside, QuadLinearStep(0.18)), [x], dtype)
    _finite(lambda s: relaxed_rank_ap(s, positive, negative, SigmoidStep(0.01), SigmoidStep(0.01)), [x], dtype)
    centres = torch.linspace(1, -1, 11).to(dtype)
    ap = _finite(lambda s: histogram_ap(s, positive, negative, centres), [x], dtype)
    assert (ap <= 1).all() and (ap >= 0).all()
    for loss in (MemoryBankInfoNCE(0.07), MemoryBankCircle()):
        grads = similarity_gradients(loss, x.to(dtype))
        assert all(torch.isfinite(t).all() for t in grads)
        assert torch.isfinite(negative_weights(loss, x[0].to(dtype).clamp(-1, 1))).all()
        anchor = torch.randn(5, generator=g) * max(scale, 1e-3)
        keys = torch.nn.functional.normalize(torch.randn(4, 5, generator=g), dim=-1)
        assert torch.isfinite(anchor_gradient(loss, anchor.to(dtype), keys[0].to(dtype), keys[1:].to(dtype))).all()


def test_a_zero_embedding_row_has_a_finite_gradient_in_float16():
    """The issue's example: e[1] = 0 gave e.grad[1] = [-inf, nan, inf]."""
    e = torch.randn(4, 3).half()
    e[1] = 0
    e.requires_grad_()
    QuadLinearAP().on_embeddings(e, torch.tensor([0, 0, 1, 1])).backward()
    assert torch.isfinite(e.grad).all()


def test_anchor_gradient_refuses_a_zero_anchor():
    keys = torch.eye(3)
    with pytest.raises(ValueError, match="anchor must be a non-zero vector"):
        anchor_gradient(MemoryBankInfoNCE(0.1), torch.zeros(3), keys[0], keys[1:])
