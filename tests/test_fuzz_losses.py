"""Fuzzing the losses in half precision: random inputs over many scales, compared with float64.

Every loss computes float16/bfloat16 inputs in float32 and returns a float32 value, so its value
must match the float64 loss of the same (rounded) inputs and be finite, with finite gradients,
at scales where a float16 computation would overflow (|x| = 1e4) or underflow (1e-4).
"""

from __future__ import annotations

import pytest
import torch

from hapref.losses import (MAE, MSE, BlackBoxAP, Circle, Contrastive, EuclideanTripletLoss, FastAP, InfoNCE,
                           ListwiseAP, MemoryBankCircle, MemoryBankInfoNCE, QuadLinearAP, Quadruplet1Loss,
                           Quadruplet2Loss, QuadletLoss, RadialLoss, SmoothAP, SSHN, Triplet, dcl_loss,
                           frame_reconstruction, p2set_loss, view_contrast)

HALF = [torch.float16, torch.bfloat16]
SEEDS = range(3)


def _close(half_value: torch.Tensor, reference: torch.Tensor) -> None:
    assert half_value.dtype == torch.float32, half_value.dtype
    assert torch.isfinite(half_value), half_value
    torch.testing.assert_close(half_value.double(), reference, rtol=2e-4, atol=1e-5)


def _check(fn, inputs: list[torch.Tensor], dtype: torch.dtype, grads: bool = True) -> None:
    """fn on the half-precision inputs vs fn on the same values in float64; finite gradients."""
    half = [x.to(dtype).requires_grad_(x.is_floating_point()) for x in inputs]
    reference = fn(*[x.detach().double() if x.is_floating_point() else x for x in half])
    out = fn(*half)
    _close(out, reference)
    if grads:
        out.backward()
        for x in half:
            assert x.grad is None or torch.isfinite(x.grad.float()).all()


# ---------------------------------------------------------------- tuple losses (Radial paper)

TUPLE_LOSSES = {"triplet": (EuclideanTripletLoss, 3), "quadlet": (QuadletLoss, 4), "radial": (RadialLoss, 4),
                "quadruplet1": (Quadruplet1Loss, 4), "quadruplet2": (Quadruplet2Loss, 4)}


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("name", sorted(TUPLE_LOSSES))
@pytest.mark.parametrize("scale", [1e-4, 1.0, 1e2, 1e4])
@pytest.mark.parametrize("seed", SEEDS)
def test_tuple_losses_in_half_precision(name, dtype, scale, seed):
    make, arity = TUPLE_LOSSES[name]
    g = torch.Generator().manual_seed(seed)
    inputs = [torch.randn(6, 5, generator=g) * scale for _ in range(arity)]
    # Gradients of size ~scale² do not fit float16 at 1e4: the value is checked, the backward only below.
    _check(make(), inputs, dtype, grads=scale <= 1e2)


# ---------------------------------------------------------------- memory-bank losses (TCA)

@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("make", [MemoryBankInfoNCE, lambda: MemoryBankInfoNCE(0.01), MemoryBankCircle,
                                  lambda: MemoryBankCircle(released=True)])
@pytest.mark.parametrize("seed", SEEDS)
def test_memory_bank_losses_in_half_precision(make, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    sims = torch.rand(5, 1 + 20, generator=g) * 2 - 1  # cosine similarities
    valid = torch.rand(5, 20, generator=g) > 0.2
    _check(lambda s: make()(s, valid), [sims], dtype)


# ---------------------------------------------------------------- AutoSSVH losses

@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("scale", [1e-4, 1.0, 1e4])
@pytest.mark.parametrize("seed", SEEDS)
def test_autossvh_losses_in_half_precision(dtype, scale, seed):
    g = torch.Generator().manual_seed(seed)
    b1, b2 = torch.randn(6, 16, generator=g) * scale, torch.randn(6, 16, generator=g) * scale
    for tau in (0.5, 0.05):
        _check(lambda x, y: view_contrast(x, y, tau), [b1, b2], dtype)
        _check(lambda x, y: dcl_loss(x, y, tau, 0.1), [b1, b2], dtype)
    centres = torch.sign(torch.randn(3, 16, generator=g))
    assigned = torch.randint(0, 3, (6,), generator=g)
    _check(lambda x, c: p2set_loss(x, assigned, c, 0.2), [b1, centres], dtype)
    if scale <= 1e2:  # squared errors of 1e4 features do not fit float16 gradients
        _check(frame_reconstruction, [b1[:, None], b2[:, None]], dtype)


def test_dcl_loss_does_not_overflow_at_a_small_temperature():
    b = torch.randn(8, 16)
    out = dcl_loss(b, b.flip(0), temperature=0.005)  # e^{1/τ} = e^{200} overflows even float32
    assert torch.isfinite(out)
    assert dcl_loss(b.half(), b.flip(0).half(), temperature=0.01).dtype == torch.float32


# ---------------------------------------------------------------- ranking losses on a batch matrix

RANKING = {"QuadLinearAP": QuadLinearAP, "SmoothAP": SmoothAP, "FastAP": FastAP, "BlackBoxAP": BlackBoxAP,
           "ListwiseAP": ListwiseAP, "Contrastive": Contrastive, "Triplet": Triplet, "Circle": Circle,
           "MAE": MAE, "MSE": MSE, "InfoNCE": InfoNCE}


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("name", sorted(RANKING))
@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e4])
def test_ranking_losses_in_half_precision(name, dtype, scale):
    g = torch.Generator().manual_seed(1)
    scores = (torch.rand(6, 6, generator=g) * 2 - 1) * scale
    labels = torch.arange(6) // 2
    relevance = labels[:, None] == labels[None]
    ignore = torch.eye(6, dtype=torch.bool)
    # Circle's gradient γ·α·… is ~1e6 at 1e4 and does not fit float16.
    _check(lambda s: RANKING[name]()(s, relevance, ignore), [scores], dtype, grads=scale <= 1.0 or name != "Circle")


@pytest.mark.parametrize("dtype", HALF)
def test_sshn_and_embeddings_in_half_precision(dtype):
    scores = torch.rand(6, 6) * 0.98
    relevance = (torch.arange(6) // 2)[:, None] == (torch.arange(6) // 2)[None]
    _check(lambda s: sum(SSHN()(s, relevance)), [scores], dtype)
    emb = torch.randn(6, 4) * 1e-4  # tiny embeddings: float16 normalisation would give NaN
    _check(lambda e: QuadLinearAP().on_embeddings(e, torch.arange(6) // 2), [emb], dtype)
