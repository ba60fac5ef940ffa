"""Training-free hash codes (issue 31): sign LSH and PCA hashing of mean frame features."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.decomposition import PCA

from hapref.search import lsh_codes, pca_sign_codes


def _data(n=40, f=12, seed=0):
    gen = torch.Generator().manual_seed(seed)
    scale = torch.linspace(3.0, 0.2, f, dtype=torch.float64)          # distinct variances: a unique PCA basis
    return torch.randn(n, f, generator=gen, dtype=torch.float64) * scale + 1.5


def test_pca_sign_codes_match_scikit_learn_up_to_the_sign_of_each_component():
    train, queries = _data(), _data(10, seed=1)
    ours = pca_sign_codes(train, queries, 5)
    projected = PCA(n_components=5, svd_solver="full").fit(train.numpy()).transform(queries.numpy())
    theirs = np.where(projected >= 0, 1.0, -1.0)
    for j in range(5):                                                  # a component is defined up to sign
        column = ours[:, j].numpy()
        assert np.array_equal(column, theirs[:, j]) or np.array_equal(column, -theirs[:, j]), j
    # the orientation is fixed (largest-magnitude entry positive): the same codes on every call
    assert torch.equal(pca_sign_codes(train, queries, 5), pca_sign_codes(train.clone(), queries.clone(), 5))
    assert ours.dtype == torch.float64 and set(ours.unique().tolist()) == {-1.0, 1.0}


def test_pca_sign_codes_fit_on_training_rows_only_and_accept_numpy():
    train, queries = _data(), _data(10, seed=1)
    assert torch.equal(pca_sign_codes(train.numpy(), queries.numpy(), 4), pca_sign_codes(train, queries, 4))
    # float32 inputs are computed in float64: the same codes
    assert torch.equal(pca_sign_codes(train.float(), queries.float(), 4),
                       pca_sign_codes(train.float().double(), queries.float().double(), 4))
    with pytest.raises(ValueError, match="bits must be a positive int <= 12"):
        pca_sign_codes(train, queries, 13)
    with pytest.raises(ValueError, match="dimensions"):
        pca_sign_codes(train, queries[:, :5], 4)


def test_lsh_codes_are_seeded_and_estimate_angles():
    x = _data(200, 16)
    a, b = lsh_codes(x, 32, seed=3), lsh_codes(x, 32, seed=3)
    assert torch.equal(a, b) and not torch.equal(a, lsh_codes(x, 32, seed=4))
    assert a.shape == (200, 32) and a.dtype == torch.float64
    # default centre: the rows' own mean; an explicit centre gives the same codes
    assert torch.equal(a, lsh_codes(x, 32, seed=3, mean=x.mean(0)))
    # P(bit differs) = angle / pi: check on many bits
    u, v = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64).unbind()
    codes = lsh_codes(torch.stack([u, v]), 20000, seed=0, mean=torch.zeros(2))
    assert abs(float((codes[0] != codes[1]).double().mean()) - 0.5) < 0.02
    with pytest.raises(ValueError, match="mean must have 16 entries"):
        lsh_codes(x, 8, mean=torch.zeros(3))
    with pytest.raises(ValueError, match="2-D"):
        lsh_codes(torch.zeros(3), 8)
