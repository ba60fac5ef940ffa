"""TCA: the Transformer aggregator, memory bank, InfoNCE / Circle loss, gradient analysis, pipeline."""

import math
import subprocess
import sys

import pytest
import torch

from conftest import devices
from hapref.losses import (MemoryBank, MemoryBankCircle, MemoryBankInfoNCE, anchor_gradient, contrastive_similarities,
                           negative_weights, similarity_gradients)
from hapref.models import TCA_PRESETS, TemporalContextAggregator


def small_model(**kw) -> TemporalContextAggregator:
    return TemporalContextAggregator(d_model=16, nhead=4, num_layers=2, dim_feedforward=32, **kw).eval()


# ----------------------------------------------------------------------------------------------- model

def test_presets_and_shapes() -> None:
    assert TCA_PRESETS["paper"]["dropout"] == 0.5 and TCA_PRESETS["released"]["dropout"] == 0.2
    big = TemporalContextAggregator.preset("released")
    assert big.d_model == 1024 and big.encoder.layers[0].dropout.p == 0.2
    model = small_model(dropout=0.0)
    x = torch.randn(3, 7, 16)
    v, f = model(x), model.frame_embeddings(x)
    assert v.shape == (3, 16) and f.shape == (3, 7, 16)
    torch.testing.assert_close(v.norm(dim=-1), torch.ones(3))
    torch.testing.assert_close(f.norm(dim=-1), torch.ones(3, 7))


def test_masked_frames_do_not_change_the_result() -> None:
    model = small_model(dropout=0.0)
    x = torch.randn(2, 6, 16)
    valid = torch.tensor([[True] * 4 + [False] * 2, [True] * 6])
    garbage = x.clone()
    garbage[0, 4:] = 100 * torch.randn(2, 16)
    torch.testing.assert_close(model(x, valid), model(garbage, valid))
    torch.testing.assert_close(model(x[:1, :4]), model(x, valid)[:1])
    f = model.frame_embeddings(garbage, valid)
    torch.testing.assert_close(f[0, :4], model.frame_embeddings(x[:1, :4])[0])
    assert (f[0, 4:] == 0).all()
    # a video without any valid frame gives a zero vector, not NaN
    empty = model(x, torch.zeros(2, 6, dtype=torch.bool))
    assert torch.isfinite(empty).all() and (empty == 0).all()


def test_permutation_equivariance_without_positional_encoding() -> None:
    model = small_model(dropout=0.0)
    x = torch.randn(2, 5, 16)
    perm = torch.randperm(5)
    torch.testing.assert_close(model.frame_embeddings(x)[:, perm], model.frame_embeddings(x[:, perm]))
    torch.testing.assert_close(model(x), model(x[:, perm]))


def test_model_input_errors() -> None:
    model = small_model()
    with pytest.raises(ValueError, match="features"):
        model(torch.randn(2, 5, 8))
    with pytest.raises(ValueError, match="valid"):
        model(torch.randn(2, 5, 16), torch.ones(2, 5))
    with pytest.raises(ValueError, match="d_model"):
        TemporalContextAggregator(d_model=10, nhead=4)


@pytest.mark.parametrize("device", devices())
def test_model_on_device(device: str) -> None:
    model = small_model().to(device)
    x = torch.randn(2, 5, 16, device=device)
    assert model(x).device.type == device and model.frame_embeddings(x).device.type == device


# ----------------------------------------------------------------------------------------------- losses

def literal_infonce(sims: torch.Tensor, tau: float) -> torch.Tensor:
    """TCA Eq. 3, one row at a time."""
    total = 0.0
    for row in sims.tolist():
        num = math.exp(row[0] / tau)
        total += -math.log(num / (num + sum(math.exp(s / tau) for s in row[1:])))
    return torch.tensor(total / len(sims), dtype=torch.float64)


def literal_circle(sims: torch.Tensor, m: float, gamma: float) -> torch.Tensor:
    """TCA Eq. 4, one row at a time."""
    total = 0.0
    for row in sims.tolist():
        sp, negs = row[0], row[1:]
        pos = math.exp(gamma * max(1 + m - sp, 0.0) * (sp - (1 - m)))
        neg = sum(math.exp(gamma * max(s + m, 0.0) * (s - m)) for s in negs)
        total += -math.log(pos / (pos + neg))
    return torch.tensor(total / len(sims), dtype=torch.float64)


def test_losses_match_literal_transcriptions() -> None:
    sims = torch.rand(4, 9, dtype=torch.float64) * 2 - 1
    torch.testing.assert_close(MemoryBankInfoNCE(0.2)(sims), literal_infonce(sims, 0.2))
    torch.testing.assert_close(MemoryBankCircle(0.25, 8.0)(sims), literal_circle(sims, 0.25, 8.0))
    # the paper's γ = 256 overflows a naive exp; the package's log-sum-exp does not
    assert torch.isfinite(MemoryBankCircle()(sims))


def test_valid_flags_drop_negatives() -> None:
    sims = torch.rand(3, 6, dtype=torch.float64)
    valid = torch.tensor([[True, False, True, True, False]] * 3)
    for loss in (MemoryBankInfoNCE(0.1), MemoryBankCircle(0.25, 16.0)):
        torch.testing.assert_close(loss(sims, valid), loss(sims[:, [0, 1, 3, 4]]))


def test_released_circle_differs_from_paper() -> None:
    sims = torch.rand(3, 5, dtype=torch.float64)
    paper, released = MemoryBankCircle(0.25, 16.0), MemoryBankCircle(0.25, 16.0, released=True)
    assert not torch.allclose(paper(sims), released(sims))
    # rows != 0 of the released logits treat the positive as a negative: α = [s_p + m]_+, Δ = m
    lr = released.logits(sims)
    torch.testing.assert_close(lr[1:, 0], 16.0 * (sims[1:, 0] + 0.25) * (sims[1:, 0] - 0.25))
    torch.testing.assert_close(lr[0, 1:], 16.0 * (1.25 - sims[0, 1:]) * (sims[0, 1:] - 0.75))
    torch.testing.assert_close(lr[1:, 1:], paper.logits(sims)[1:, 1:])


def test_gradcheck_losses() -> None:
    sims = (torch.rand(3, 6, dtype=torch.float64) * 1.6 - 0.8).requires_grad_()
    valid = torch.rand(3, 5) > 0.3
    assert torch.autograd.gradcheck(lambda s: MemoryBankInfoNCE(0.3)(s, valid), (sims,))
    # Circle detaches α (finite differences would see it move), so check it with α frozen at its value
    circle = MemoryBankCircle(0.25, 4.0)
    alpha = torch.cat([(1.25 - sims[:, :1]), (sims[:, 1:] + 0.25)], 1).clamp_min(0).detach()
    delta = torch.tensor([0.75] + [0.25] * 5, dtype=torch.float64)
    frozen = lambda s: torch.nn.functional.cross_entropy(  # noqa: E731
        (4.0 * alpha * (s - delta)).masked_fill(~torch.cat([torch.ones(3, 1, dtype=torch.bool), valid], 1), -1e300),
        torch.zeros(3, dtype=torch.long))
    torch.testing.assert_close(circle(sims, valid), frozen(sims))
    assert torch.autograd.gradcheck(frozen, (sims,))
    g_circle = torch.autograd.grad(circle(sims, valid), sims)[0]
    torch.testing.assert_close(g_circle, torch.autograd.grad(frozen(sims), sims)[0])


def test_loss_edge_cases_and_errors() -> None:
    for loss in (MemoryBankInfoNCE(), MemoryBankCircle()):
        empty = torch.zeros(0, 5, requires_grad=True)
        out = loss(empty)
        assert out.item() == 0.0 and torch.isfinite(out)
        out.backward()
        assert loss(torch.rand(2, 1)).item() == 0.0          # no negatives: nothing to contrast
        with pytest.raises(ValueError, match="sims"):
            loss(torch.rand(5))
        with pytest.raises(ValueError, match="valid"):
            loss(torch.rand(2, 5), torch.ones(2, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="temperature"):
        MemoryBankInfoNCE(0.0)


# ----------------------------------------------------------------------------------------------- memory bank

def test_memory_bank_fifo() -> None:
    bank = MemoryBank(size=5, dim=2)
    keys, ids = bank.filled()
    assert keys.shape == (0, 2) and ids.shape == (0,)
    for start in (0, 3, 6):
        x = torch.arange(start, start + 3, dtype=torch.float32)
        bank.enqueue(torch.stack([x, x], 1), x.long())
    keys, ids = bank.filled()
    assert ids.tolist() == [4, 5, 6, 7, 8] and keys[:, 0].tolist() == [4, 5, 6, 7, 8]
    bank.enqueue(torch.arange(20, 27, dtype=torch.float32).unsqueeze(1).repeat(1, 2))  # larger than the bank
    keys, ids = bank.filled()
    assert keys[:, 0].tolist() == [22, 23, 24, 25, 26] and ids.tolist() == [-1] * 5


def test_memory_bank_detaches_and_checks() -> None:
    bank = MemoryBank(size=4, dim=3)
    x = torch.randn(2, 3, requires_grad=True)
    bank.enqueue(x * 2)
    assert not bank.keys.requires_grad
    with pytest.raises(ValueError, match="dtype"):
        bank.enqueue(torch.randn(2, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="keys"):
        bank.enqueue(torch.randn(2, 4))
    with pytest.raises(ValueError, match="ids"):
        bank.enqueue(torch.randn(2, 3), torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="size"):
        MemoryBank(0, 3)


@pytest.mark.parametrize("device", devices())
def test_memory_bank_device(device: str) -> None:
    bank = MemoryBank(size=4, dim=3).to(device)
    bank.enqueue(torch.randn(2, 3, device=device), torch.tensor([1, 2], device=device))
    assert bank.filled()[0].device.type == device
    if device == "cpu" and torch.cuda.is_available():
        with pytest.raises(ValueError, match="device"):
            bank.enqueue(torch.randn(2, 3, device="cuda"))


def test_contrastive_similarities_layout() -> None:
    q = torch.nn.functional.normalize(torch.randn(3, 4), dim=-1)
    p = torch.nn.functional.normalize(torch.randn(3, 4), dim=-1)
    bank = MemoryBank(size=4, dim=4)
    bank.enqueue(p[:2], torch.tensor([0, 7]))
    sims, valid = contrastive_similarities(q, p, bank, torch.tensor([0, 1, 2]))
    assert sims.shape == (3, 1 + 2 + 2)
    torch.testing.assert_close(sims[:, 0], (q * p).sum(-1))
    torch.testing.assert_close(sims[0, 1:3], q[0] @ p[[1, 2]].T)
    torch.testing.assert_close(sims[:, 3:], q @ p[:2].T)
    assert valid[:, :2].all() and valid[:, 3].all()
    assert valid[:, 2].tolist() == [False, True, True]       # bank entry of clip 0 is not a negative of clip 0


# ----------------------------------------------------------------------------------------------- gradients

@pytest.mark.parametrize("loss", [MemoryBankInfoNCE(0.1), MemoryBankCircle(0.25, 16.0)])
def test_similarity_gradients_match_autograd(loss) -> None:
    sims = (torch.rand(4, 7, dtype=torch.float64) * 2 - 1).requires_grad_()
    loss(sims).backward()
    g_pos, g_neg = similarity_gradients(loss, sims.detach())
    torch.testing.assert_close(g_pos, sims.grad[:, 0])
    torch.testing.assert_close(g_neg, sims.grad[:, 1:])
    assert (g_pos <= 0).all() and (g_neg >= 0).all()


@pytest.mark.parametrize("loss", [MemoryBankInfoNCE(0.2), MemoryBankCircle(0.25, 8.0)])
def test_anchor_gradient_matches_autograd(loss) -> None:
    normed = lambda x: torch.nn.functional.normalize(x, dim=-1)  # noqa: E731
    w = torch.randn(6, dtype=torch.float64, requires_grad=True)
    pos, negs = normed(torch.randn(6, dtype=torch.float64)), normed(torch.randn(5, 6, dtype=torch.float64))
    z = w / w.norm()
    loss(torch.cat([(z @ pos).view(1), negs @ z]).unsqueeze(0)).backward()
    torch.testing.assert_close(anchor_gradient(loss, w.detach(), pos, negs), w.grad)


def test_hard_negatives_weigh_more() -> None:
    s = torch.tensor([-0.95, -0.5, 0.0, 0.3], dtype=torch.float64)
    for loss in (MemoryBankInfoNCE(0.1), MemoryBankCircle(0.25, 32.0)):
        w = negative_weights(loss, s, s_pos=0.7, background=8, s_background=-0.2)
        assert (w.diff() >= 0).all() and w[-1] > w[-2] > w[0], w
    circle = negative_weights(MemoryBankCircle(0.25, 32.0), torch.tensor([-0.5]), 0.7, 8, -0.2)
    assert circle.item() == 0.0                              # Circle: α_n = 0 below −m, no push at all


# ----------------------------------------------------------------------------------------------- pipeline

def test_training_steps_reduce_the_loss() -> None:
    torch.manual_seed(0)
    model = TemporalContextAggregator(16, 4, 1, 32, dropout=0.0)
    base = torch.randn(8, 6, 16)
    views = [base + 0.3 * torch.randn_like(base) for _ in range(2)]
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn, losses = MemoryBankInfoNCE(0.1), []
    for _ in range(30):
        sims, valid = contrastive_similarities(model(views[0]), model(views[1]).detach())
        loss = loss_fn(sims, valid)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0]


def test_smoke_pipeline_prints_eval_line(tmp_path) -> None:
    env = {"HAPREF_DATA": str(tmp_path), "HAPREF_RUNS": str(tmp_path / "runs"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-m", "hapref.train", "tca", "--profile", "smoke", "--loss", "circle",
                          "--no-progress"], capture_output=True, text=True, env=env, timeout=300, check=True)
    last = out.stdout.strip().splitlines()[-1]
    assert last.startswith("eval: mAP=") and " uAP=" in last
    assert "it/s" not in out.stderr                      # --no-progress hides the data-preparation bars too


def test_resume_is_exact_including_the_memory_bank(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HAPREF_DATA", str(tmp_path / "data"))
    from hapref.train.loop import fit, load_checkpoint
    from hapref.train.tca import TCATask, config_for

    class Interrupted(TCATask):
        def batch(self, step, device):
            if step == 4:
                raise KeyboardInterrupt
            return super().batch(step, device)

    cfg = config_for("smoke", seed=1, steps=6, eval_every=3, checkpoint_every=3)
    reference = fit(TCATask("smoke", seed=1), cfg, progress=False)
    with pytest.raises(KeyboardInterrupt):
        fit(Interrupted("smoke", seed=1), cfg, out_dir=tmp_path / "run", progress=False)
    saved = load_checkpoint(tmp_path / "run")
    assert saved["step"] == 3 and int(saved["model"]["bank.count"]) > 0     # the bank travels with the checkpoint
    resumed = fit(TCATask("smoke", seed=1), cfg, out_dir=tmp_path / "run", resume=True, progress=False)
    for name, value in reference.model.state_dict().items():
        assert torch.equal(value, resumed.model.state_dict()[name]), name
    assert [h["loss"] for h in resumed.history] == [h["loss"] for h in reference.history]
