"""The book's departures of the Radial pipeline: heads on the tuned descriptor and the learned mean + difference
pooling (hapref.models.radial), selected with head= in the training config, and the memorisation probes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from hapref.features.frames import FeatureSplit
from hapref.models.radial import DescriptorHead, MeanDiffPooling, QuadletVideoNet, pad_features
from hapref.train.radial import HEADS, PROFILES, RadialTask, build, order_dependence, train_fine_map


def _clips(dtype=torch.float64):
    gen = torch.Generator().manual_seed(3)
    return [torch.rand(n, 5, generator=gen, dtype=dtype) for n in (4, 7, 5)]


def _literal_descriptor(clip: torch.Tensor, lag: int, weight: float) -> torch.Tensor:
    """normalize([m/|m|, w Δ/|Δ|]) of one unpadded clip [L, F], written out with Python sums."""
    length = clip.shape[0]
    mean = sum(clip[t] for t in range(length)) / length
    diff = sum(clip[t + lag] - clip[t] for t in range(length - lag)) / (length - lag)
    joined = torch.cat([mean / mean.norm(), weight * diff / diff.norm()])
    return joined / joined.norm()


def test_descriptor_head_equals_a_literal_transcription():
    clips = _clips()
    padded, lengths = pad_features(clips)
    head = DescriptorHead(5, embed_dim=3, lag=2, weight=0.7).double()
    weak = DescriptorHead(5, lag=2, weight=0.7, diagonal=True).double()
    with torch.no_grad():
        weak.gain.copy_(torch.linspace(0.5, 2.0, 10))
    for k, clip in enumerate(clips):
        d = _literal_descriptor(clip, 2, 0.7)
        linear = head.linear.weight @ d + head.linear.bias
        torch.testing.assert_close(head.embed_features(padded, lengths)[k], linear / linear.norm())
        scaled = weak.gain * d
        torch.testing.assert_close(weak.embed_features(padded, lengths)[k], scaled / scaled.norm())


def test_mean_diff_pooling_equals_a_literal_transcription_and_sees_reversal():
    clips = _clips()
    padded, lengths = pad_features(clips)
    pool = MeanDiffPooling(5, embed_dim=4, lag=1).double()
    emb = pool.embed_features(padded, lengths)
    for k, clip in enumerate(clips):
        mean, diff = clip.mean(0), (clip[-1] - clip[0]) / (clip.shape[0] - 1)   # lag 1 telescopes
        out = pool.mean_map.weight @ mean + pool.diff_map.weight @ diff
        torch.testing.assert_close(emb[k], out / out.norm())
    rev = pool.embed_features(*pad_features([c.flip(0) for c in clips]))
    a, b = pool.mean_map(padded.sum(1) / lengths[:, None]), pool.diff_map(torch.stack(
        [(c[-1] - c[0]) / (c.shape[0] - 1) for c in clips]))
    torch.testing.assert_close(rev, F.normalize(a - b, dim=-1))            # reversal negates only B·Δ


@pytest.mark.parametrize("make", [lambda: DescriptorHead(5, embed_dim=3), lambda: DescriptorHead(5, diagonal=True),
                                  lambda: MeanDiffPooling(5, embed_dim=3)])
def test_heads_shapes_padding_and_gradients(make):
    torch.manual_seed(0)
    head = make().double()
    clips = _clips()
    padded, lengths = pad_features(clips)
    emb = head.embed_features(padded, lengths)
    assert emb.shape[0] == 3 and torch.allclose(emb.norm(dim=1), torch.ones(3, dtype=torch.float64))
    alone = head.embed_features(clips[0][None], torch.tensor([4]))     # padding leaves no trace
    torch.testing.assert_close(alone[0], emb[0])
    params = tuple(p.detach().clone().requires_grad_() for p in head.parameters())
    assert torch.autograd.gradcheck(lambda *ps: _embed_with(head, ps, padded, lengths), params)   # finite differences
    features = padded.clone().requires_grad_()
    head.embed_features(features, lengths).sum().backward()
    assert features.grad[0, 4:].abs().max() == 0 and features.grad[0, :4].abs().max() > 0   # padding: no gradient


def _embed_with(head, params, padded, lengths):
    names = [n for n, _ in head.named_parameters()]
    return _call(head, dict(zip(names, params)), padded, lengths)


def _call(head, params, padded, lengths):
    class Embed(torch.nn.Module):              # functional_call runs forward(): route it to embed_features
        def __init__(self):
            super().__init__()
            self.head = head

        def forward(self, features, lengths):
            return self.head.embed_features(features, lengths)

    return torch.func.functional_call(Embed(), {f"head.{k}": v for k, v in params.items()}, (padded, lengths))


def test_heads_refuse_bad_input():
    padded, lengths = pad_features(_clips(torch.float32))
    for head in (DescriptorHead(5), MeanDiffPooling(5)):
        with pytest.raises(ValueError, match="features must have shape"):
            head.embed_features(padded[..., :4], lengths)
        with pytest.raises(ValueError, match="lengths must be"):
            head.embed_features(padded, torch.tensor([4, 8, 5]))
        with pytest.raises(ValueError, match="lengths must be"):
            head.embed_features(padded, lengths.double())
        with pytest.raises(ValueError, match="features must have 3"):
            head.embed_features(padded[0], lengths)
        with pytest.raises(ValueError, match="NaN"):
            head.embed_features(torch.full_like(padded, float("nan")), lengths)
    with pytest.raises(ValueError, match="embed_dim"):
        DescriptorHead(5, embed_dim=0)
    with pytest.raises(ValueError, match="lag"):
        MeanDiffPooling(5, lag=0)
    with pytest.raises(ValueError, match="weight"):
        DescriptorHead(5, weight=-1.0)
    with pytest.raises(ValueError, match="head must be one of"):
        RadialTask({**PROFILES["smoke"], "head": "gru"}, "radial")
    with pytest.raises(ValueError, match="finetune_backbone"):
        RadialTask({**PROFILES["smoke"], "head": "linear", "finetune_backbone": True}, "radial")


@pytest.mark.parametrize("head", HEADS)
def test_every_head_trains_in_the_radial_task(head):
    from hapref.train.loop import fit

    task, config = build("smoke", "radial", 0, progress=False, overrides={"head": head, "steps": "3"})
    result = fit(task, config, progress=False)
    assert set(result.metrics) >= {"fine_MAP", "train_fine_MAP", "QP"}
    assert all(0 <= v <= 1 for v in result.metrics.values())
    expected = {"lstm": QuadletVideoNet, "linear": DescriptorHead, "weighting": DescriptorHead,
                "meandiff": MeanDiffPooling}[head]
    assert type(result.model) is expected


def test_train_fine_map_is_leave_one_out_by_brute_force():
    gen = torch.Generator().manual_seed(0)
    classes, subs = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1]), torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    split = FeatureSplit(torch.zeros(8, 1, 1), torch.ones(8, dtype=torch.long), classes, subs)
    emb = F.normalize(torch.randn(8, 3, generator=gen, dtype=torch.float64), dim=1)
    aps = []
    for q in range(8):
        others = [k for k in range(8) if k != q]
        order = sorted(others, key=lambda k: -float(emb[q] @ emb[k]))
        hits = [int(subs[k] == subs[q]) for k in order]
        aps.append(sum(sum(hits[:r + 1]) / (r + 1) for r, h in enumerate(hits) if h) / sum(hits))
    assert abs(train_fine_map(emb, split) - float(sum(aps) / 8)) < 1e-12


def test_order_dependence_of_known_embeddings():
    clips = _clips()
    padded, lengths = pad_features(clips)
    split = FeatureSplit(padded, lengths, torch.zeros(3), torch.zeros(3))
    order_free = MeanDiffPooling(5, embed_dim=3).double()
    with torch.no_grad():
        order_free.diff_map.weight.zero_()                  # A·mean only: a clip and its reversal coincide
    probe = order_dependence(order_free, split)
    assert abs(probe["reversal_cos"] - 1) < 1e-12 and probe["last_cos"] < 1
    motion_only = MeanDiffPooling(5, embed_dim=3).double()
    with torch.no_grad():
        motion_only.mean_map.weight.zero_()                 # B·Δ only: reversal negates the embedding
    assert abs(order_dependence(motion_only, split)["reversal_cos"] + 1) < 1e-12
    net = QuadletVideoNet(5, fc_dim=4, hidden_dim=3).double()
    whole = order_dependence(net, split, last=4)                 # the LSTM head: its last 4 frames by hand
    tail = net.embed_features(*pad_features([c[-4:] for c in clips]))
    expected = float((net.embed_features(padded, lengths) * tail).sum(-1).mean().detach())
    assert abs(whole["last_cos"] - expected) < 1e-12
    with pytest.raises(ValueError, match="last must be"):
        order_dependence(order_free, split, last=5)


@pytest.mark.parametrize("head", ["linear", "weighting", "meandiff"])
def test_a_run_with_another_head_reloads_from_its_folder(tmp_path, head):
    from hapref.train import load_run
    from hapref.train.loop import fit

    task, config = build("smoke", "triplet", 0, progress=False, overrides={"head": head, "steps": "2"})
    result = fit(task, config, out_dir=tmp_path, progress=False)
    model, _ = load_run(tmp_path)
    split = task.test_split
    with torch.no_grad():
        torch.testing.assert_close(model.embed_features(split.features, split.lengths),
                                   result.model.eval().embed_features(split.features, split.lengths))
