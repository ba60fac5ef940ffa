"""Mixed precision without a GPU: every loss under CPU autocast, and one AMP training step of every pipeline.

CUDA's AMP (float16 autocast + GradScaler, or bfloat16) is exercised here on the CPU: ``torch.autocast("cpu")``
lowers the same ops (matmul, einsum, ...) to half precision, and ``hapref.train.loop.AMP_DEVICE_TYPES`` lets
the trainer's AMP path run on the CPU. A custom autograd Function that mixes dtypes, or a loss that gives up
its float32 accumulation, fails here the way it would on the first step on a GPU.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from hapref import losses as L
from hapref.losses import autossvh as A
from hapref.models.autossvh import gradient_reversal
from hapref.train import loop, registry

HALF = [torch.bfloat16, torch.float16]
#: Steps of the AMP trainer test: a GradScaler skips steps while it halves its initial scale 2^16 (TCA's
#: InfoNCE at τ = 1/256 scales gradients by 256, so its first float16 steps overflow and are skipped).
STEPS = 12
#: Relative tolerance of an autocast loss against float32 (inputs stay float32; only lowered ops round).
LOSS_RTOL = {torch.bfloat16: 2e-2, torch.float16: 2e-3}


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _ranking(cls):
    def make():
        g = _gen()
        emb = F.normalize(torch.randn(12, 16, generator=g), dim=-1)
        labels = torch.arange(12) % 4
        rel = labels[:, None] == labels[None]

        def fn(x):  # x: the embedding table; the score matrix is a matmul, lowered by autocast
            scores = x @ x.T
            return cls()(scores, rel, ignore=torch.eye(12, dtype=torch.bool))
        return emb, fn
    return make


def _tuple(cls, n: int):
    def make():
        x = torch.randn(n * 6, 8, generator=_gen())
        w = torch.randn(8, 8, generator=_gen(1))

        def fn(x):
            parts = (x @ w).chunk(n)
            return cls()(*parts)
        return x, fn
    return make


def _bank(cls):
    def make():
        x = torch.randn(8, 16, generator=_gen())
        bank = L.MemoryBank(32, 16)
        bank.enqueue(F.normalize(torch.randn(32, 16, generator=_gen(2)), dim=-1), torch.arange(32) + 100)
        w = torch.randn(16, 16, generator=_gen(1))

        def fn(x):
            q = F.normalize(x @ w, dim=-1)
            p = F.normalize((x + 0.1) @ w, dim=-1)
            sims, valid = L.contrastive_similarities(q, p, bank)
            return cls()(sims, valid)
        return x, fn
    return make


def _codes(fn_loss):
    def make():
        x = torch.randn(10, 16, generator=_gen())
        w = torch.randn(16, 12, generator=_gen(1))

        def fn(x):
            return fn_loss(torch.tanh(x @ w), torch.tanh((x + 0.2) @ w))
        return x, fn
    return make


def _hapvr_objective():
    """Eq. 15 with QuadLinear-AP at both levels: the combination that crashed the first GPU step."""
    rel = torch.arange(6)[:, None] // 2 == torch.arange(6)[None] // 2

    def make():
        x = torch.randn(6, 5, 8, generator=_gen(3))
        teacher = torch.rand(6, 6, 5, 5, generator=_gen(4))

        def fn(x):
            frames = torch.einsum("aid,bjd->abij", x, x).div(8).tanh()
            video = frames.amax(-1).mean(-1).sigmoid()
            objective = L.HAPVRObjective(L.QuadLinearAP(), L.QuadLinearAP(), weights="paper")
            return objective(video, rel, frames.abs().mean(), frames, teacher)["loss"]
        return x, fn
    return make


def _frame_level():
    def make():
        x = torch.randn(4, 5, 8, generator=_gen())

        def fn(x):
            frames = torch.einsum("bid,bjd->bij", x, x.flip(1)).tanh()
            pos = frames > 0.5
            neg = frames < -0.5
            return L.frame_level_ap_loss(frames[None], pos[None], neg[None], torch.ones(1, 4, dtype=torch.bool),
                                         L.SmoothAP())
        return x, fn
    return make


CASES = {name: _ranking(getattr(L, name)) for name in
         ["QuadLinearAP", "SmoothAP", "FastAP", "ListwiseAP", "BlackBoxAP", "Contrastive", "Triplet", "Circle",
          "MAE", "MSE"]}
CASES.update({
    "InfoNCE": _ranking(L.InfoNCE),
    "EuclideanTripletLoss": _tuple(L.EuclideanTripletLoss, 3),
    "QuadletLoss": _tuple(L.QuadletLoss, 4),
    "RadialLoss": _tuple(L.RadialLoss, 4),
    "Quadruplet1Loss": _tuple(L.Quadruplet1Loss, 4),
    "Quadruplet2Loss": _tuple(L.Quadruplet2Loss, 4),
    "MemoryBankInfoNCE": _bank(L.MemoryBankInfoNCE),
    "MemoryBankCircle": _bank(L.MemoryBankCircle),
    "HardestTripletLoss": _bank(L.HardestTripletLoss),
    "view_contrast": _codes(A.view_contrast),
    "dcl_loss": _codes(A.dcl_loss),
    "frame_reconstruction": _codes(lambda a, b: A.frame_reconstruction(a.view(10, 3, 4), b.view(10, 3, 4))),
    "HAPVRObjective": _hapvr_objective(),
    "frame_level_ap_loss": _frame_level(),
})


@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("name", sorted(CASES))
def test_every_loss_under_cpu_autocast(name, dtype):
    """Forward under autocast, backward outside it: finite, float32, within LOSS_RTOL of float32 throughout."""
    x, fn = CASES[name]()
    x32 = x.clone().requires_grad_()
    ref = fn(x32)
    ref.backward()
    xa = x.clone().requires_grad_()
    with torch.autocast("cpu", dtype=dtype):
        out = fn(xa)
    assert out.dtype == torch.float32, out.dtype          # the loss itself never comes back in half precision
    out.backward()
    assert torch.isfinite(out) and torch.isfinite(xa.grad).all()
    assert out.item() == pytest.approx(ref.item(), rel=LOSS_RTOL[dtype], abs=LOSS_RTOL[dtype])
    # the gradient points the same way (the inputs of the lowered matmuls are rounded, so not bit for bit)
    cos = F.cosine_similarity(xa.grad.flatten(), x32.grad.flatten(), dim=0)
    assert cos > 0.97 or x32.grad.abs().max() < 1e-6, cos


@pytest.mark.parametrize("dtype", HALF, ids=str)
def test_custom_functions_return_gradients_in_their_inputs_dtype(dtype):
    """Half-precision inputs to the custom autograd Functions get half-precision gradients, no dtype error."""
    scores = torch.randn(3, 7, generator=_gen()).to(dtype).requires_grad_()
    pos = scores.detach()[:, :2].clone().requires_grad_()
    negative = torch.ones(3, 7, dtype=dtype)
    with torch.autocast("cpu", dtype=dtype):
        out = L.negative_step_sum(scores, pos, negative, L.QuadLinearStep(0.1))
        out = out + L.quad_linear(scores, 0.1).sum(-1, keepdim=True) + L.blackbox_ranks(scores, 4.0).sum(-1,
                                                                                                   keepdim=True)
        out = out + gradient_reversal(scores, 0.5).float().sum(-1, keepdim=True)
    out.sum().backward()
    assert out.dtype == torch.float32
    assert scores.grad.dtype == dtype and pos.grad.dtype == dtype
    assert torch.isfinite(scores.grad.float()).all() and torch.isfinite(pos.grad.float()).all()


def test_histogram_losses_stay_finite_on_float16_scores():
    """FastAP / ListwiseAP clamp with their working dtype's limits: no NaN when the histogram has empty bins."""
    scores = torch.tensor([[0.9, 0.85, 0.1, 0.05]], dtype=torch.float16, requires_grad=True)
    rel = torch.tensor([[True, False, True, False]])
    for cls in (L.FastAP, L.ListwiseAP):
        with torch.autocast("cpu", dtype=torch.float16):
            value = cls()(scores, rel)
        value.backward()
        assert torch.isfinite(value) and torch.isfinite(scores.grad.float()).all()
        scores.grad = None


def test_memory_bank_similarities_accumulate_in_float32():
    """Under autocast the bank's similarities are float32 dot products, as the docstrings promise."""
    q = F.normalize(torch.randn(4, 64, generator=_gen()), dim=-1)
    bank = L.MemoryBank(16, 64)
    bank.enqueue(F.normalize(torch.randn(16, 64, generator=_gen(1)), dim=-1), torch.arange(16) + 10)
    ref, _ = L.contrastive_similarities(q, q, bank)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        sims, _ = L.contrastive_similarities(q, q, bank)
    assert sims.dtype == torch.float32
    torch.testing.assert_close(sims, ref)


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before:UserWarning")
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("pipeline", sorted(registry.PIPELINES))
def test_amp_training_steps_of_every_pipeline(pipeline, dtype, monkeypatch):
    """The trainer's AMP path (autocast, plus a GradScaler for float16), forced on for the CPU: STEPS steps of
    each pipeline's default loss on its smoke profile. The first step's loss (same initial weights) is within 5 %
    of the float32 run's, every logged loss is finite and the weights move (see STEPS for the skipped steps)."""
    module = registry.load_pipeline(pipeline)
    monkeypatch.setattr(loop, "AMP_DEVICE_TYPES", ("cuda", "cpu"))
    first = {}
    for amp in (False, True):
        task, config = module.build("smoke", module.DEFAULT_LOSS, 0, progress=False)
        config = type(config)(**{**config.__dict__, "steps": STEPS, "warmup_steps": 0, "amp": amp,
                                 "amp_dtype": dtype, "device": "cpu", "eval_every": 0})
        monkeypatch.setattr(task, "evaluate", lambda model: {})     # the steps are under test, not the metrics
        torch.manual_seed(0)
        initial = [p.detach().clone() for p in task.build_model().parameters()]
        result = loop.fit(task, config, progress=False)
        params = list(result.model.parameters())
        assert all(torch.isfinite(p).all() for p in params)
        assert all(math.isfinite(entry["loss"]) for entry in result.history)
        assert any(not torch.equal(p.detach(), q) for p, q in zip(params, initial) if p.shape == q.shape)
        first[amp] = result.history[0]["loss"]
    assert first[True] == pytest.approx(first[False], rel=0.05, abs=1e-3), first


def test_amp_dtype_is_validated():
    with pytest.raises(ValueError, match="amp_dtype must be one of float16, bfloat16"):
        loop.TrainConfig(steps=1, amp_dtype="float8")
