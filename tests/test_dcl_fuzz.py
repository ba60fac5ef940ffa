"""Fuzz test of AutoSSVH's debiased view contrast (``dcl_loss``) at small temperatures in float32.

2,000 random batches, each checked for a finite loss, finite gradients and agreement with a float64
evaluation of the released formula (Chuang et al. 2020) written out without any shift.
"""

from __future__ import annotations

import math

import torch

from hapref.losses.autossvh import dcl_loss

TRIALS = 2000
TEMPERATURES = (0.005, 0.01, 0.05, 0.5)
PRIORS = (0.0, 0.1, 0.3)
KINDS = ("gaussian", "sign", "identical", "antipodal", "one_code", "sign_identical")


def _reference(b1: torch.Tensor, b2: torch.Tensor, temperature: float, prior: float) -> float:
    """``mean(log(e^{s⁺} + Ng) − s⁺)`` in float64 without a shift (e^{2/τ} ≤ e^{400} fits float64)."""
    z = torch.nn.functional.normalize(torch.cat([b1, b2]).double(), dim=-1)
    logits = z @ z.T / temperature
    two_n = len(z)
    n = two_n - 2
    total = 0.0
    for i in range(two_n):
        j = (i + two_n // 2) % two_n
        pos = math.exp(float(logits[i, j]))
        neg = sum(math.exp(float(logits[i, k])) for k in range(two_n) if k not in (i, j))
        ng = max((neg - prior * n * pos) / (1 - prior), n * math.exp(-1 / temperature))
        total += math.log(pos + ng) - float(logits[i, j])
    return total / two_n


def _codes(kind: str, n: int, d: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    b1 = torch.randn(n, d, generator=gen)
    b2 = torch.randn(n, d, generator=gen)
    if kind in ("sign", "sign_identical"):
        b1, b2 = torch.where(b1 >= 0, 1.0, -1.0), torch.where(b2 >= 0, 1.0, -1.0)
    if kind in ("identical", "sign_identical"):
        b2 = b1.clone()
    elif kind == "antipodal":
        b2 = -b1
    elif kind == "one_code":  # every code of the batch the same: positives and negatives all at 1/τ
        b1 = b1[:1].expand(n, d).clone()
        b2 = b1.clone()
    return b1, b2


def _trials():
    gen = torch.Generator().manual_seed(31)
    for trial in range(TRIALS):
        n = int(torch.randint(2, 9, (1,), generator=gen))
        d = int(torch.randint(2, 17, (1,), generator=gen))
        temperature = TEMPERATURES[trial % len(TEMPERATURES)]
        prior = PRIORS[(trial // len(TEMPERATURES)) % len(PRIORS)]
        kind = KINDS[int(torch.randint(len(KINDS), (1,), generator=gen))]
        yield (n, d, temperature, prior, kind), _codes(kind, n, d, gen)


def test_dcl_loss_is_finite_and_matches_float64_in_float32() -> None:
    bad = []
    for setting, (b1, b2) in _trials():
        _, _, temperature, prior, _ = setting
        x, y = b1.clone().requires_grad_(), b2.clone().requires_grad_()
        loss = dcl_loss(x, y, temperature=temperature, positive_prior=prior)
        loss.backward()
        assert loss.dtype == torch.float32
        finite = all(bool(torch.isfinite(t).all()) for t in (loss, x.grad, y.grad))
        expected = _reference(b1, b2, temperature, prior)
        close = finite and abs(loss.item() - expected) <= max(1e-4 * abs(expected), 1e-3)
        if not close:
            bad.append((setting, loss.item(), expected, finite))
    assert not bad, f"{len(bad)} of {TRIALS} trials non-finite or off the float64 value, e.g. {bad[:3]}"


def test_dcl_loss_float64_is_the_released_formula() -> None:
    """In float64 the shifted evaluation equals the unshifted formula to rounding (1e-12), gradients included."""
    for index, (setting, (b1, b2)) in enumerate(_trials()):
        if index % 10:  # 200 of the trials
            continue
        _, _, temperature, prior, _ = setting
        x, y = b1.double().requires_grad_(), b2.double().requires_grad_()
        loss = dcl_loss(x, y, temperature=temperature, positive_prior=prior)
        expected = _reference(b1, b2, temperature, prior)
        assert abs(loss.item() - expected) <= 1e-12 * max(1.0, abs(expected)), (setting, loss.item(), expected)
        loss.backward()
        assert torch.isfinite(x.grad).all() and torch.isfinite(y.grad).all(), setting
