"""Chapter 6's diagnosis (issue 49): the clip-mean diagnostics recover the share k of the mean a hand-set encoder
subtracts, and the frame-level objective (Circle loss on Chamfer similarities of refined frames against a bank of
frame keys) equals a slow literal transcription, values and gradients."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from hapref.losses.memory_bank import MemoryBank, MemoryBankCircle
from hapref.models.tca import TemporalContextAggregator, clip_mean_share, mean_share_regression
from hapref.train.tca import PROFILES, TCATask, Variant, _ChamferToKeys, frame_contrastive_similarities

SHARES = (0.0, 0.5, 1.0, 1.25)


@pytest.mark.parametrize("k", SHARES)
def test_diagnostics_recover_the_hand_set_share(k) -> None:
    model = TemporalContextAggregator.mean_subtracting(16, k, nhead=4).eval()
    x = torch.randn(5, 7, 16, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    model = model.double()
    valid = torch.ones(5, 7, dtype=torch.bool)
    valid[1, 5:] = False                                    # padding: the mean is over real frames only
    frames = model.frame_embeddings(x, valid)
    # what the hand-set layer computes, written out: LayerNorm(x_t - k mean), L2-normalised
    mean = (x * valid[..., None]).sum(1, keepdim=True) / valid.sum(1)[:, None, None]
    expected = torch.nn.functional.normalize(torch.nn.functional.layer_norm(x - k * mean, (16,)), dim=-1)
    assert torch.allclose(frames[valid], expected[valid], atol=1e-6)
    assert clip_mean_share(model) == pytest.approx(k, abs=1e-12)
    assert mean_share_regression(x, frames, valid) == pytest.approx(k, abs=1e-6)


def test_diagnostics_read_zero_without_a_mean_and_refuse_bad_input() -> None:
    g = torch.Generator().manual_seed(1)
    model = TemporalContextAggregator(16, 4, 1, 32, 0.0).double().eval()
    layer = model.encoder.layers[0]
    with torch.no_grad():
        layer.self_attn.out_proj.weight.zero_()             # W_o W_v = 0: attention adds no multiple of the mean
        layer.self_attn.out_proj.bias.zero_()
        layer.linear2.weight.zero_()
        layer.linear2.bias.zero_()
    x = torch.randn(4, 6, 16, generator=g, dtype=torch.float64)
    assert clip_mean_share(model) == 0.0
    assert abs(mean_share_regression(x, model.frame_embeddings(x))) < 1e-9
    # a random layer: the trace reads the isotropic part of W_o W_v, a number, not NaN
    assert math.isfinite(clip_mean_share(TemporalContextAggregator(16, 4, 1, 32, 0.0)))
    with pytest.raises(ValueError, match="refined"):
        mean_share_regression(x, x[:, :3])
    with pytest.raises(TypeError, match="model"):
        clip_mean_share(torch.nn.Linear(3, 3))
    with pytest.raises(ValueError, match="layer"):
        clip_mean_share(model, layer=1)


def _chamfer_literal(q, q_valid, k, k_valid):
    """Chamfer similarity of one query's frames with one candidate's, by loops (TCA Eq. 8)."""
    rows = [max((q[t] @ k[s]) for s in range(len(k)) if k_valid[s])
            for t in range(len(q)) if q_valid[t]]
    return sum(rows) / len(rows)


def _circle_literal(row, keep, m=0.25, gamma=16.0):
    """Circle loss of one row (positive first), by its formula (TCA Eq. 4)."""
    sp, negatives = row[0], [s for s, kept in zip(row[1:], keep) if kept]
    logit_p = gamma * (1 + m - sp).clamp_min(0).detach() * (sp - (1 - m))
    logits = [logit_p] + [gamma * (s + m).clamp_min(0).detach() * (s - m) for s in negatives]
    return torch.logsumexp(torch.stack(logits), 0) - logit_p


def test_frame_objective_matches_a_literal_transcription_values_and_gradients() -> None:
    g = torch.Generator().manual_seed(2)
    b, t, d = 3, 4, 6

    def unit(*shape):
        return torch.nn.functional.normalize(torch.randn(*shape, generator=g, dtype=torch.float64), dim=-1)

    raw = torch.randn(b, t, d, generator=g, dtype=torch.float64, requires_grad=True)
    positive = unit(b, t, d)
    q_valid = torch.ones(b, t, dtype=torch.bool)
    q_valid[0, 3] = False
    p_valid = torch.ones(b, t, dtype=torch.bool)
    p_valid[2, 2:] = False
    bank = MemoryBank(size=4, dim=d, dtype=torch.float64, frames=t)
    bank_keys, bank_valid = unit(5, t, d), torch.ones(5, t, dtype=torch.bool)
    bank_valid[4, 0] = False
    bank.enqueue(bank_keys[:3], torch.tensor([-1, 1, -3]))
    bank.enqueue(bank_keys[3:], torch.tensor([-4, -5]), bank_valid[3:])    # wraps: the first key is dropped
    clips = torch.tensor([0, 1, 2])
    loss_fn = MemoryBankCircle(margin=0.25, scale=16.0)

    query = torch.nn.functional.normalize(raw, dim=-1)
    sims, keep = frame_contrastive_similarities(query, positive, bank, clips, True, q_valid, p_valid)
    fast = loss_fn(sims, keep)
    (fast_grad,) = torch.autograd.grad(fast, raw)

    query = torch.nn.functional.normalize(raw, dim=-1)
    kept_keys, kept_ids, kept_valid = bank_keys[1:], [1, -3, -4, -5], bank_valid[1:]
    losses = []
    for i in range(b):
        row = [_chamfer_literal(query[i], q_valid[i], positive[i], p_valid[i])]
        keep_row = []
        for j in range(b):
            if j != i:
                row.append(_chamfer_literal(query[i], q_valid[i], positive[j], p_valid[j]))
                keep_row.append(True)
        for key, key_id, key_valid in zip(kept_keys, kept_ids, kept_valid):
            row.append(_chamfer_literal(query[i], q_valid[i], key, key_valid))
            keep_row.append(key_id != i)                        # the bank's key of clip 1 is no negative of row 1
        assert torch.allclose(torch.stack(row), sims[i], atol=1e-12)
        assert keep_row == keep[i].tolist()
        losses.append(_circle_literal(torch.stack(row), keep_row))
    slow = torch.stack(losses).mean()
    (slow_grad,) = torch.autograd.grad(slow, raw)
    assert abs(fast.detach().item() - slow.detach().item()) < 1e-12
    assert torch.allclose(fast_grad, slow_grad, atol=1e-12)


def test_chamfer_to_keys_gradient_is_max_gradient() -> None:
    g = torch.Generator().manual_seed(3)
    query = torch.randn(2, 3, 5, generator=g, dtype=torch.float64, requires_grad=True)
    keys = torch.randn(4, 6, 5, generator=g, dtype=torch.float64)
    keys_valid = torch.rand(4, 6, generator=g) > 0.3
    keys_valid[:, 0] = True
    weights = torch.tensor([[0.5, 0.5, 0.0], [1 / 3, 1 / 3, 1 / 3]], dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda q: _ChamferToKeys.apply(q, keys, keys_valid, weights), (query,))
    dense = torch.einsum("btd,msd->bmts", query, keys).masked_fill(~keys_valid[None, :, None], -math.inf)
    reference = (dense.amax(-1) * weights[:, None]).sum(-1)
    assert torch.allclose(_ChamferToKeys.apply(query, keys, keys_valid, weights), reference, atol=1e-12)


def test_frame_objective_trains_the_encoder_with_a_bank_of_frame_keys() -> None:
    profile = replace(PROFILES["context-smoke"], dropout=0.0)
    task = TCATask(profile, Variant(objective="frame"), seed=0)
    torch.manual_seed(0)
    model = task.build_model()
    assert tuple(model.bank.keys.shape) == (profile.bank_size, profile.frames, profile.whiten_dim)
    batch = task.batch(0, torch.device("cpu"))
    out = task.loss(model, batch)
    out["loss"].backward()
    attention = model.aggregator.encoder.layers[0].self_attn
    assert torch.isfinite(out["loss"]) and attention.in_proj_weight.grad.abs().sum() > 0
    keys, ids = model.bank.filled()
    assert ids[-profile.distractors_per_step:].tolist() == batch["distractor_ids"].tolist()
    assert torch.allclose(keys[-profile.distractors_per_step:],
                          model.key_frames(batch["distractors"]).to(keys.dtype), atol=1e-6)
    # the pooled objective (the default) leaves the bank one vector per key
    assert TCATask(profile).build_model().bank.keys.ndim == 2
    assert task.model_spec()["kwargs"]["bank_frames"] == profile.frames


def test_frame_bank_and_variant_refuse_bad_input() -> None:
    bank = MemoryBank(size=3, dim=2, frames=2)
    with pytest.raises(ValueError, match="keys must have 3 dimension"):
        bank.enqueue(torch.ones(1, 2))
    with pytest.raises(ValueError, match="valid"):
        bank.enqueue(torch.ones(1, 2, 2), valid=torch.ones(1, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="valid is only"):
        MemoryBank(size=3, dim=2).enqueue(torch.ones(1, 2), valid=torch.ones(1, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match="objective"):
        Variant(objective="video")
    with pytest.raises(ValueError, match="distractors_per_step"):
        Variant(distractors_per_step=0)
    with pytest.raises(ValueError, match="frame bank"):
        frame_contrastive_similarities(torch.ones(1, 2, 2), torch.ones(1, 2, 2), MemoryBank(3, 2))


def test_bank16_enqueues_16_keys_per_step() -> None:
    variant = Variant(bank_size=16, distractors_per_step=16)
    task = TCATask(replace(PROFILES["edits-smoke"], distractor_clips=32, distractors_per_step=32), variant)
    assert task.distractors_per_step == 16 and len(task.batch(0, torch.device("cpu"))["distractors"]) == 16
    with pytest.raises(ValueError, match="do not fit the memory bank"):
        TCATask(replace(PROFILES["edits-smoke"], distractors_per_step=32), Variant(bank_size=16))
