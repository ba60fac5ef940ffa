"""hapref.features.temporal against slow literal transcriptions (one clip at a time, NumPy)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import devices

from hapref.features.temporal import (concat_with_mean, frame_differences, temporal_mean, temporal_pyramid,
                                      temporal_trend, valid_frames)


def _clips(seed: int = 0, shape=(3, 4), steps: int = 9, dim: int = 5):
    gen = torch.Generator().manual_seed(seed)
    features = torch.randn(*shape, steps, dim, generator=gen, dtype=torch.float64)
    lengths = torch.randint(4, steps + 1, shape, generator=gen)
    return features, lengths


def _each(features, lengths):
    """(index, the clip's valid frames as NumPy [L, D]) for every clip of a batch."""
    for index in np.ndindex(*lengths.shape):
        yield index, features[index][: int(lengths[index])].numpy()


def test_mean_and_differences_match_loops():
    features, lengths = _clips()
    mean = temporal_mean(features, lengths)
    for lag in (1, 2, 3):
        diff = frame_differences(features, lengths, lag=lag)
        for index, x in _each(features, lengths):
            np.testing.assert_allclose(mean[index].numpy(), x.mean(0), rtol=1e-12, atol=1e-12)
            literal = np.mean([x[t + lag] - x[t] for t in range(len(x) - lag)], axis=0)
            np.testing.assert_allclose(diff[index].numpy(), literal, rtol=1e-12, atol=1e-12)


def test_differences_of_too_short_clips_are_zero():
    features = torch.randn(2, 4, 3, dtype=torch.float64)
    out = frame_differences(features, torch.tensor([1, 4]), lag=1)
    assert torch.equal(out[0], torch.zeros(3, dtype=torch.float64))
    assert torch.equal(frame_differences(features, lag=4), torch.zeros(2, 3, dtype=torch.float64))


def test_trend_matches_numpy_polyfit():
    features, lengths = _clips(1)
    per_frame, per_clip = temporal_trend(features, lengths), temporal_trend(features, lengths, unit_time=True)
    for index, x in _each(features, lengths):
        t = np.arange(len(x))
        slope = np.polyfit(t, x, 1)[0]                              # one fit per column
        np.testing.assert_allclose(per_frame[index].numpy(), slope, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(per_clip[index].numpy(), np.polyfit(t / (len(x) - 1), x, 1)[0],
                                   rtol=1e-9, atol=1e-12)
    one = temporal_trend(torch.randn(1, 3, 2, dtype=torch.float64), torch.tensor([1]))
    assert torch.equal(one, torch.zeros(1, 2, dtype=torch.float64))


@pytest.mark.parametrize("levels", [(0,), (1,), (0, 1, 2), (2, 1)])
@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("centred", [False, True])
def test_pyramid_matches_array_split(levels, normalize, centred):
    if centred and 0 in levels:
        return                                          # refused: test_bad_inputs_name_the_argument
    features, lengths = _clips(2)
    out = temporal_pyramid(features, lengths, levels=levels, normalize=normalize, centred=centred)
    for index, x in _each(features, lengths):
        pieces = [p.mean(0) - (x.mean(0) if centred else 0)
                  for level in levels for p in np.array_split(x, 2 ** level)]
        if normalize:
            pieces = [p / max(np.linalg.norm(p), 1e-12) for p in pieces]    # F.normalize: 0 stays 0
        np.testing.assert_allclose(out[index].numpy(), np.concatenate(pieces), rtol=1e-12, atol=1e-12)


def test_concat_with_mean_matches_its_equation():
    features, lengths = _clips(3, shape=(6,))
    diff = frame_differences(features, lengths)
    for weight in (0.0, 0.5, 2.0):
        e = concat_with_mean(features, diff, lengths, weight)
        for index, x in _each(features, lengths):
            m, d = x.mean(0), diff[index].numpy()
            literal = np.concatenate([m / np.linalg.norm(m), weight * d / np.linalg.norm(d)])
            np.testing.assert_allclose(e[index].numpy(), literal / np.linalg.norm(literal), rtol=1e-12)
        # the cosine of two embeddings is (cos m + w^2 cos d) / (1 + w^2)
        m, d = torch.nn.functional.normalize(temporal_mean(features, lengths), dim=-1), \
            torch.nn.functional.normalize(diff, dim=-1)
        assert torch.allclose(e @ e.T, (m @ m.T + weight ** 2 * d @ d.T) / (1 + weight ** 2))


def test_reversal_negates_the_motion_cues_and_keeps_the_mean():
    features, lengths = _clips(4, shape=(5,))
    reversed_ = torch.zeros_like(features)
    for i, length in enumerate(lengths.tolist()):
        reversed_[i, :length] = features[i, :length].flip(0)
    assert torch.allclose(temporal_mean(reversed_, lengths), temporal_mean(features, lengths))
    for fn in (frame_differences, temporal_trend):
        assert torch.allclose(fn(reversed_, lengths), -fn(features, lengths))
    even = lengths - lengths % 2                          # 2 divides L: the halves swap exactly
    halves = temporal_pyramid(features, even, levels=(1,)).view(5, 2, -1)
    for i, length in enumerate(even.tolist()):
        reversed_[i, :length] = features[i, :length].flip(0)
    assert torch.allclose(temporal_pyramid(reversed_, even, levels=(1,)).view(5, 2, -1), halves.flip(1))


def test_padding_is_ignored():
    features, lengths = _clips(5, shape=(4,))
    noisy = features.clone()
    for i, length in enumerate(lengths.tolist()):
        noisy[i, length:] = 1e6
    for fn in (temporal_mean, frame_differences, temporal_trend, temporal_pyramid):
        assert torch.allclose(fn(noisy, lengths), fn(features, lengths))


@pytest.mark.parametrize("device", devices())
def test_dtype_and_device_are_kept(device):
    features = torch.randn(2, 6, 3, dtype=torch.float32, device=device)
    lengths = torch.tensor([6, 4], device=device)
    for fn in (temporal_mean, frame_differences, temporal_trend, temporal_pyramid):
        out = fn(features, lengths)
        assert out.dtype == torch.float32 and out.device == features.device
    e = concat_with_mean(features, temporal_trend(features, lengths), lengths, 0.5)
    assert e.dtype == torch.float32 and e.device == features.device and e.shape == (2, 6)


def test_bad_inputs_name_the_argument():
    x = torch.randn(2, 5, 3)
    with pytest.raises(ValueError, match="features"):
        temporal_mean(torch.arange(6).view(2, 3))
    with pytest.raises(ValueError, match="features"):
        temporal_mean(torch.randn(4))
    with pytest.raises(ValueError, match="lengths"):
        valid_frames(x, torch.tensor([5]))
    with pytest.raises(ValueError, match="lengths"):
        valid_frames(x, torch.tensor([0, 5]))
    with pytest.raises(ValueError, match="lengths"):
        valid_frames(x, torch.tensor([6, 5]))
    with pytest.raises(ValueError, match="lengths"):
        valid_frames(x, torch.tensor([5.0, 5.0]))
    with pytest.raises(ValueError, match="lag"):
        frame_differences(x, lag=0)
    with pytest.raises(ValueError, match="levels"):
        temporal_pyramid(x, levels=(1, 1))
    with pytest.raises(ValueError, match="levels"):
        temporal_pyramid(x, levels=(0, 1), centred=True)
    with pytest.raises(ValueError, match="lengths"):
        temporal_pyramid(x, torch.tensor([5, 3]), levels=(2,))
    with pytest.raises(ValueError, match="weight"):
        concat_with_mean(x, temporal_trend(x), weight=-1.0)
    with pytest.raises(ValueError, match="descriptor"):
        concat_with_mean(x, torch.randn(3, 3))
