"""TCA Table 1 pieces: NetVLAD / LSTM / GRU aggregators, attention weights, momentum key encoder, triplet loss."""

import math

import pytest
import torch
import torch.nn.functional as F

from hapref.losses import HardestTripletLoss, contrastive_loss
from hapref.models import (AGGREGATORS, MomentumEncoder, NetVLADAggregator, RecurrentAggregator,
                           TemporalContextAggregator, build_aggregator)


def padded_batch(d: int = 6) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, d, generator=g, dtype=torch.float64)
    valid = torch.tensor([[True] * 5, [True] * 3 + [False] * 2, [True] + [False] * 4])
    return x, valid


# ----------------------------------------------------------------------------------------------- NetVLAD

def test_netvlad_matches_literal_loops() -> None:
    torch.manual_seed(0)
    model = NetVLADAggregator(d_model=6, clusters=3).double()
    x, valid = padded_batch()
    out = model(x, valid)
    for n in range(x.shape[0]):
        parts = []
        for k in range(3):
            acc = torch.zeros(6, dtype=torch.float64)
            for t in range(x.shape[1]):
                if valid[n, t]:
                    logits = model.assign.weight @ x[n, t] + model.assign.bias
                    acc = acc + torch.softmax(logits, 0)[k] * (x[n, t] - model.centres[k])
            parts.append(acc / acc.norm())
        vlad = torch.cat(parts)
        vlad = vlad / vlad.norm()
        expected = model.project(vlad)
        torch.testing.assert_close(out[n], expected / expected.norm())


def test_netvlad_ignores_padding_and_has_gradients() -> None:
    torch.manual_seed(0)
    model = NetVLADAggregator(d_model=6, clusters=3).double()
    x, valid = padded_batch()
    noisy = x.clone()
    noisy[~valid] = 100.0
    torch.testing.assert_close(model(noisy, valid), model(x, valid))
    model(x, valid).sum().backward()
    assert model.centres.grad.abs().sum() > 0 and model.assign.weight.grad.abs().sum() > 0


# ----------------------------------------------------------------------------------------------- LSTM / GRU

@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_recurrent_matches_unpadded_sequences(cell: str) -> None:
    torch.manual_seed(0)
    model = RecurrentAggregator(d_model=6, cell=cell).double()
    x, valid = padded_batch()
    out, frames = model(x, valid), model.frame_embeddings(x, valid)
    for n in range(x.shape[0]):
        length = int(valid[n].sum())
        hidden = model.rnn(x[n:n + 1, :length])[0][0]                  # the sequence alone, no padding
        torch.testing.assert_close(frames[n, :length], F.normalize(hidden, dim=-1))
        assert frames[n, length:].abs().sum() == 0
        torch.testing.assert_close(out[n], F.normalize(hidden.mean(0), dim=0))


def test_recurrent_rejects_bad_input() -> None:
    model = RecurrentAggregator(d_model=4, cell="gru")
    with pytest.raises(ValueError, match="prefix"):
        model(torch.randn(1, 3, 4), torch.tensor([[False, True, True]]))
    with pytest.raises(ValueError, match="cell"):
        RecurrentAggregator(d_model=4, cell="rnn")
    with pytest.raises(ValueError, match="aggregator"):
        build_aggregator("mean", 4)


def test_every_aggregator_follows_the_call_convention() -> None:
    x, valid = padded_batch(8)
    for name in AGGREGATORS:
        model = build_aggregator(name, 8, nhead=2, dim_feedforward=16, dropout=0.0).double().eval()
        out = model(x, valid)
        assert out.shape == (3, 8) and out.dtype == torch.float64, name
        torch.testing.assert_close(out.norm(dim=-1), torch.ones(3, dtype=torch.float64))


# ----------------------------------------------------------------------------------------------- attention

def test_attention_weights_match_a_literal_transcription() -> None:
    torch.manual_seed(0)
    d, heads = 8, 2
    model = TemporalContextAggregator(d_model=d, nhead=heads, num_layers=2, dim_feedforward=16, dropout=0.0).eval()
    model = model.double()
    x, valid = padded_batch(d)
    weights = model.attention_weights(x, valid)
    assert weights.shape == (3, 2, 5, 5)
    layer_input = x
    for layer_index, layer in enumerate(model.encoder.layers):
        attn = layer.self_attn
        q, k, _ = F.linear(layer_input, attn.in_proj_weight, attn.in_proj_bias).chunk(3, dim=-1)
        hd = d // heads
        expected = torch.zeros(3, 5, 5, dtype=torch.float64)
        for h in range(heads):
            logits = q[..., h * hd:(h + 1) * hd] @ k[..., h * hd:(h + 1) * hd].transpose(1, 2) / math.sqrt(hd)
            logits = logits.masked_fill(~valid.unsqueeze(1), -math.inf)
            expected += torch.softmax(logits, dim=-1) / heads
        expected = expected.masked_fill(~valid.unsqueeze(-1), 0.0)
        torch.testing.assert_close(weights[:, layer_index], expected)
        layer_input = layer(layer_input, src_key_padding_mask=~valid)
    rows = weights.sum(-1)
    torch.testing.assert_close(rows, valid.unsqueeze(1).expand_as(rows).double())


# ----------------------------------------------------------------------------------------------- momentum

def test_momentum_encoder_is_an_exponential_moving_average() -> None:
    torch.manual_seed(0)
    query = torch.nn.Linear(4, 3)
    start = query.weight.detach().clone()
    key = MomentumEncoder(query, momentum=0.5)
    targets = []
    for _ in range(3):
        with torch.no_grad():
            query.weight.add_(1.0)
        targets.append(query.weight.detach().clone())
        key.update(query)
    expected = start
    for t in targets:
        expected = 0.5 * expected + 0.5 * t
    torch.testing.assert_close(key.encoder.weight, expected)
    assert all(not p.requires_grad for p in key.parameters())
    copy_key = MomentumEncoder(query, momentum=0.0)
    with torch.no_grad():
        query.bias.add_(3.0)
    copy_key.update(query)
    torch.testing.assert_close(copy_key.encoder.bias, query.bias.detach())
    with pytest.raises(ValueError, match="momentum"):
        MomentumEncoder(query, momentum=1.0)
    with pytest.raises(ValueError, match="architecture"):
        key.update(torch.nn.Linear(5, 3))


# ----------------------------------------------------------------------------------------------- triplet

def test_hardest_triplet_matches_brute_force_and_autograd() -> None:
    g = torch.Generator().manual_seed(1)
    sims = (torch.rand(5, 7, generator=g, dtype=torch.float64) * 2 - 1).requires_grad_(True)
    valid = torch.rand(5, 6, generator=g) > 0.3
    valid[4] = False                                              # a row without negatives contributes 0
    loss = HardestTripletLoss(margin=0.2)(sims, valid)
    total = 0.0
    for i in range(5):
        negatives = [sims[i, 1 + j].item() for j in range(6) if valid[i, j]]
        if negatives:
            total += max(0.0, max(negatives) - sims[i, 0].item() + 0.2)
    assert loss.item() == pytest.approx(total / 5)
    (grad,) = torch.autograd.grad(loss, sims)
    assert (grad[:, 0] <= 0).all() and (grad[4] == 0).all() and grad.abs().sum() > 0
    assert isinstance(contrastive_loss("triplet", margin=0.3), HardestTripletLoss)
    with pytest.raises(ValueError, match="margin"):
        HardestTripletLoss(margin=-1.0)


# ----------------------------------------------------------------------------------------------- pipeline

def test_pipeline_variants_train_at_smoke_size() -> None:
    from hapref.train import fit
    from hapref.train.tca import TCATask, Variant, config_for

    torch.set_num_threads(1)
    for variant in (Variant(aggregator="netvlad", pooling="imac"), Variant(aggregator="gru"),
                    Variant(loss="triplet", bank_size=0, in_batch_negatives=True), Variant(momentum=0.9)):
        task = TCATask("smoke", variant, seed=0)
        model = task.build_model()
        start = {k: v.clone() for k, v in model.state_dict().items()}
        result = fit(task, config_for("smoke", 0, steps=3, warmup_steps=1), progress=False)
        assert math.isfinite(result.history[-1]["loss"]) and 0 <= result.metrics["mAP"] <= 1
        assert ("mAP_f" in result.metrics) == (variant.aggregator != "netvlad")
        if variant.momentum:
            state = result.model.state_dict()
            key = next(k for k in state if k.startswith("key_encoder.") and k.endswith("weight"))
            query = key.replace("key_encoder.encoder.", "aggregator.")
            moved = state[key] - start[key]
            torch.testing.assert_close(state[key], start[key] + moved)  # the key encoder moved ...
            assert moved.abs().sum() > 0 and not torch.equal(state[key], state[query])  # ... but lags behind
    with pytest.raises(ValueError, match="aggregator"):
        Variant(aggregator="mean")
    with pytest.raises(ValueError, match="momentum"):
        Variant(momentum=1.0)


# ----------------------------------------------------------------------------------------------- per-frame MLP

def test_per_frame_mlp_matches_a_literal_transcription_and_sees_one_frame() -> None:
    """PerFrameMLP (chapter 6's per-frame control): LayerNorm(x + W2 ReLU(W1 x)) frame by frame, L2-normalised;
    a frame's output does not depend on the other frames (its clip), unlike TCA's encoder."""
    from hapref.models import PerFrameMLP

    torch.manual_seed(0)
    model = PerFrameMLP(d_model=6, dim_feedforward=12, dropout=0.3).double().eval()
    x, valid = padded_batch()
    frames = model.frame_embeddings(x, valid)
    lin1, lin2 = model.block[0], model.block[3]
    for n in range(x.shape[0]):
        for t in range(x.shape[1]):
            if not valid[n, t]:
                assert frames[n, t].abs().sum() == 0
                continue
            h = x[n, t] + lin2.weight @ torch.relu(lin1.weight @ x[n, t] + lin1.bias) + lin2.bias
            h = (h - h.mean()) / torch.sqrt(h.var(unbiased=False) + model.norm.eps)
            h = h * model.norm.weight + model.norm.bias
            torch.testing.assert_close(frames[n, t], h / h.norm())
    other = x.clone()
    other[0, 1:] = torch.randn(4, 6, dtype=torch.float64)               # change the clip around frame 0
    torch.testing.assert_close(model.frame_embeddings(other, valid)[0, 0], frames[0, 0])
    tca = TemporalContextAggregator(d_model=6, nhead=2, dim_feedforward=12, dropout=0.0).double().eval()
    assert not torch.allclose(tca.frame_embeddings(other, valid)[0, 0], tca.frame_embeddings(x, valid)[0, 0])
    mean = (frames * valid[..., None]).sum(1) / valid.sum(1, keepdim=True)
    torch.testing.assert_close(model(x, valid), F.normalize(mean, dim=-1))
    with pytest.raises(ValueError, match="dropout"):
        PerFrameMLP(6, 12, dropout=1.0)
    with pytest.raises(ValueError, match="d_model"):
        PerFrameMLP(0, 12)
