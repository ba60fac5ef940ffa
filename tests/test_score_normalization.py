"""Score normalisation for retrieval (hapref.similarity.score_normalization) and evaluate(normalize=...).

Hand-computed cases, the invariances that define it (per-query AP unchanged, μAP moved), constant rows and
ties, bad input, and the evaluator's option on the real-layout fixtures.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from hapref.evaluation import dataset_ids, evaluate
from hapref.evaluation.fixtures import write_fixtures
from hapref.metrics import map_and_micro_ap
from hapref.metrics.ap import average_precision
from hapref.similarity import background_normalize, normalize_scores, zscore_rows


def test_zscore_by_hand() -> None:
    s = torch.tensor([[0.9, 0.8, 0.7], [0.5, 0.1, 0.0]], dtype=torch.float64)
    z = zscore_rows(s)
    sd0, sd1 = math.sqrt(0.02 / 3), math.sqrt(0.14 / 3)       # population standard deviations
    expected = [[0.1 / sd0, 0.0, -0.1 / sd0], [0.3 / sd1, -0.1 / sd1, -0.2 / sd1]]
    assert torch.allclose(z, torch.tensor(expected, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(z.mean(dim=1), torch.zeros(2, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(z.std(dim=1, unbiased=False), torch.ones(2, dtype=torch.float64), atol=1e-12)


def test_zscore_lifts_micro_ap_of_uncalibrated_rows_by_hand() -> None:
    """Query 1 ranks its copy first but scores it below query 0's unrelated videos: pooled, the copy falls to
    rank 4 (μAP (1/1 + 2/4) / 2 = 0.75); after the per-query z-score both copies lead the pool (μAP 1)."""
    s = torch.tensor([[0.9, 0.8, 0.7], [0.5, 0.1, 0.0]], dtype=torch.float64)
    rel = torch.tensor([[True, False, False], [True, False, False]])
    assert map_and_micro_ap(s, rel) == {"mAP": 1.0, "uAP": 0.75}
    assert map_and_micro_ap(zscore_rows(s), rel) == {"mAP": 1.0, "uAP": 1.0}


def test_background_by_hand() -> None:
    s = torch.tensor([[0.9, 0.5], [0.6, 0.55]], dtype=torch.float64)
    bg = torch.tensor([[0.5, 0.4, 0.0], [0.2, 0.1, 0.0]], dtype=torch.float64)
    out = background_normalize(s, bg, k=2)
    assert torch.allclose(out, s - torch.tensor([[0.45], [0.15]], dtype=torch.float64), atol=1e-15)
    assert torch.allclose(background_normalize(s, bg, k=1, beta=0.5), s - 0.5 * torch.tensor([[0.5], [0.2]],
                                                                                             dtype=torch.float64))
    assert torch.equal(background_normalize(s, bg, k=3, beta=0.0), s)


@pytest.mark.parametrize("how", ["zscore", "background"])
def test_per_query_ap_is_unchanged_and_micro_ap_moves(how: str) -> None:
    g = torch.Generator().manual_seed(0)
    rel = torch.rand(12, 40, generator=g) < 0.2
    rel[:, 0] = True
    # rows on different scales and offsets (uncalibrated), rounded so that ties occur
    scale, offset = torch.rand(12, 1, generator=g) * 3 + 0.1, torch.randn(12, 1, generator=g)
    s = ((torch.randn(12, 40, generator=g) + rel.double()) * scale + offset).double().round(decimals=1)
    bg = torch.randn(12, 30, generator=g, dtype=torch.float64) * scale + offset
    out = normalize_scores(s, how, background=bg, k=5)
    for ties in ("grouped", "expected"):
        for q in range(s.shape[0]):
            before, after = average_precision(s[q], rel[q], ties), average_precision(out[q], rel[q], ties)
            assert float(before) == pytest.approx(float(after), abs=1e-12)
    raw, normed = map_and_micro_ap(s, rel), map_and_micro_ap(out, rel)
    assert raw["mAP"] == pytest.approx(normed["mAP"], abs=1e-12)
    assert abs(raw["uAP"] - normed["uAP"]) > 1e-3
    # ties inside a row stay ties
    eq_before = s[:, :, None] == s[:, None, :]
    assert torch.equal(eq_before, out[:, :, None] == out[:, None, :])


@pytest.mark.parametrize("value", [0.1, 5.0, -3.7, 0.0])
def test_constant_rows_become_zero_not_nan(value: float) -> None:
    s = torch.full((2, 7), value, dtype=torch.float64)
    s[1] = torch.linspace(0, 1, 7)
    z = zscore_rows(s)
    assert torch.equal(z[0], torch.zeros(7, dtype=torch.float64))
    assert torch.isfinite(z).all()
    rel = torch.zeros(2, 7, dtype=torch.bool)
    rel[:, 3] = True
    metrics = map_and_micro_ap(z, rel)
    assert all(math.isfinite(v) for v in metrics.values())


def test_ignore_leaves_entries_out_of_the_statistics() -> None:
    s = torch.tensor([[0.0, 2.0, 9.0], [1.0, 1.0, 4.0]])
    ignore = torch.tensor([[False, False, True], [False, False, True]])
    z = zscore_rows(s, ignore)
    assert torch.allclose(z[0], torch.tensor([-1.0, 1.0, 8.0]))
    assert torch.equal(z[1], torch.zeros(3))                  # the kept entries are constant
    assert torch.equal(zscore_rows(s, torch.ones(2, 3, dtype=torch.bool)), torch.zeros(2, 3))


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64])
def test_dtype_is_kept(dtype: torch.dtype) -> None:
    s = torch.tensor([[1.0, 2.0, 4.0]], dtype=dtype)
    assert zscore_rows(s).dtype == dtype
    assert background_normalize(s, s, k=2).dtype == dtype
    assert torch.allclose(zscore_rows(s).double(), zscore_rows(s.double()), atol=1e-2)


def test_numpy_input() -> None:
    z = zscore_rows(np.array([[1.0, 3.0]]))
    assert torch.equal(z, torch.tensor([[-1.0, 1.0]], dtype=torch.float64))


@pytest.mark.parametrize("call, match", [
    (lambda: zscore_rows(torch.zeros(3)), "scores must have 2"),
    (lambda: zscore_rows(torch.zeros(2, 0)), "M >= 1"),
    (lambda: zscore_rows(torch.tensor([[1.0, float("nan")]])), "scores"),
    (lambda: zscore_rows(torch.tensor([[1.0, float("inf")]])), "finite"),
    (lambda: zscore_rows(torch.tensor([[1, 2]])), "floating"),
    (lambda: zscore_rows(torch.zeros(2, 3), torch.zeros(3, 2, dtype=torch.bool)), "ignore"),
    (lambda: background_normalize(torch.zeros(2, 3), torch.zeros(3, 5)), "one row per query"),
    (lambda: background_normalize(torch.zeros(2, 3), torch.zeros(2, 5), k=6), "at most the 5"),
    (lambda: background_normalize(torch.zeros(2, 3), torch.zeros(2, 5), k=0), "k must be"),
    (lambda: background_normalize(torch.zeros(2, 3), torch.zeros(2, 5), k=2.5), "k must be"),
    (lambda: background_normalize(torch.zeros(2, 3), torch.zeros(2, 5), k=2, beta=-1.0), "beta"),
    (lambda: background_normalize(torch.zeros(2, 3), torch.full((2, 5), float("nan"))), "background"),
    (lambda: normalize_scores(torch.zeros(2, 3), "minmax"), "how must be one of"),
    (lambda: normalize_scores(torch.zeros(2, 3), "background"), "needs background"),
])
def test_bad_input_names_the_argument(call, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()


# ---------------------------------------------------------------------------------- evaluate(normalize=...)
@pytest.fixture(scope="module")
def evve(tmp_path_factory):
    root = write_fixtures(tmp_path_factory.mktemp("norm"))
    queries, database = dataset_ids("evve", root)
    rng = np.random.default_rng(0)
    scale = rng.uniform(0.1, 3.0, size=(len(queries), 1))    # every query on its own scale
    matrix = rng.normal(size=(len(queries), len(database))) * scale + rng.normal(size=(len(queries), 1))
    return root, queries, database, matrix


def test_evaluate_zscore_matches_normalising_first(evve) -> None:
    root, queries, database, matrix = evve
    raw = evaluate("evve", matrix, root)
    normed = evaluate("evve", matrix, root, normalize="zscore")
    first = evaluate("evve", zscore_rows(torch.from_numpy(matrix)).numpy(), root)
    assert normed == pytest.approx(first, abs=1e-12)
    assert normed["EVVE_mAP"] == pytest.approx(raw["EVVE_mAP"], abs=1e-12)   # per query: unchanged
    assert normed["EVVE_uAP"] != pytest.approx(raw["EVVE_uAP"], abs=1e-6)    # pooled: moved
    as_dict = {q: dict(zip(database, map(float, row))) for q, row in zip(queries, matrix)}
    assert evaluate("evve", as_dict, root, normalize="zscore") == pytest.approx(normed, abs=1e-12)


def test_evaluate_background(evve) -> None:
    root, queries, database, matrix = evve
    bg = np.random.default_rng(1).normal(size=(len(queries), 20))
    normed = evaluate("evve", matrix, root, normalize="background", background=bg, background_k=3)
    first = evaluate("evve", background_normalize(torch.from_numpy(matrix), torch.from_numpy(bg), 3).numpy(), root)
    assert normed == pytest.approx(first, abs=1e-12)
    as_dict = {q: dict(zip(database, map(float, row))) for q, row in zip(queries, matrix)}
    by_query = {q: list(row) for q, row in zip(queries, bg)}
    assert evaluate("evve", as_dict, root, normalize="background", background=by_query,
                    background_k=3) == pytest.approx(normed, abs=1e-12)


def test_evaluate_normalize_bad_input(evve) -> None:
    root, queries, _, matrix = evve
    with pytest.raises(ValueError, match="normalize must be one of"):
        evaluate("evve", matrix, root, normalize="minmax")
    with pytest.raises(ValueError, match="needs background"):
        evaluate("evve", matrix, root, normalize="background")
    with pytest.raises(ValueError, match="background must be"):
        evaluate("evve", matrix, root, normalize="background", background=np.zeros((len(queries) + 1, 5)))
    with pytest.raises(ValueError, match="only used with"):
        evaluate("evve", matrix, root, background=np.zeros((len(queries), 5)))
    with pytest.raises(ValueError, match="no scores for query"):
        evaluate("evve", matrix, root, normalize="background", background={queries[0]: [0.0] * 12})
