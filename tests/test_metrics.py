"""hapref.metrics against brute-force Python loops and scikit-learn, on every device."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from conftest import devices, tie_orders
from sklearn.metrics import average_precision_score, ndcg_score, roc_auc_score
from sklearn.metrics import precision_recall_curve as sk_precision_recall_curve

import hapref.metrics.ap as ap_module
from hapref.metrics import (average_precision, gmap, map_at_n, mean_average_precision, micro_average_precision,
                            ndcg, precision_recall_curve, quadlet_precision, triplet_precision)
from hapref.plotting.ranking import misordered_pairs, plot_rank_sweep, ranking_summary

DTYPES = [torch.float32, torch.float64]


# ----------------------------------------------------------------------------- brute-force oracles
def brute_ap(scores: list[float], relevant: list[bool]) -> float:
    """Literal AP with tie groups: a relevant item sees the precision of everything scored >= it."""
    precisions = []
    for s_i, r_i in zip(scores, relevant):
        if r_i:
            at_least = [r for s, r in zip(scores, relevant) if s >= s_i]
            precisions.append(sum(at_least) / len(at_least))
    return sum(precisions) / len(precisions)


def brute_map(scores: torch.Tensor, relevance: torch.Tensor, ignore: torch.Tensor | None) -> float:
    aps = []
    for q in range(scores.shape[0]):
        keep = [j for j in range(scores.shape[1]) if ignore is None or not ignore[q, j]]
        s = [float(scores[q, j]) for j in keep]
        r = [bool(relevance[q, j]) for j in keep]
        if any(r):
            aps.append(brute_ap(s, r))
    return sum(aps) / len(aps)


def brute_ap_at_n(scores: list[float], relevant: list[bool], n: int, convention: str) -> float:
    order = sorted(range(len(scores)), key=lambda j: -scores[j])[:n]  # Python's sort is stable
    hits, p = 0, 0.0
    for rank, j in enumerate(order, start=1):
        if relevant[j]:
            hits += 1
            p += hits / rank
    if convention == "autossvh":
        return p / n
    return p / hits if hits else 0.0


def brute_tie_averaged_dcg(scores: list[float], gains: list[float], k: int | None) -> float:
    """Mean DCG over every order of the items that is consistent with the scores."""
    m = len(scores)
    k = m if k is None else k
    values = []
    for perm in itertools.permutations(range(m)):
        if all(scores[perm[a]] >= scores[perm[a + 1]] for a in range(m - 1)):
            values.append(sum(gains[j] / math.log2(rank + 2) for rank, j in enumerate(perm[:k])))
    return sum(values) / len(values)


def tied_scores(shape: tuple[int, ...], levels: int, dtype: torch.dtype, device: str) -> torch.Tensor:
    """Scores with many ties: integers 0..levels-1 scaled into [0, 1]."""
    return (torch.randint(0, levels, shape) / levels).to(dtype=dtype, device=device)


# ----------------------------------------------------------------------------- AP, mAP, μAP
@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("levels", [3, 10, 1000])
def test_average_precision_matches_sklearn_and_brute_force(device: str, dtype: torch.dtype, levels: int) -> None:
    for _ in range(20):
        scores = tied_scores((40,), levels, dtype, device)
        relevance = torch.rand(40, device=device) < 0.3
        relevance[0] = True
        ap = average_precision(scores, relevance)
        assert ap.device.type == device and ap.ndim == 0 and ap.dtype == dtype
        expected = average_precision_score(relevance.cpu().numpy(), scores.cpu().numpy())
        assert ap.item() == pytest.approx(expected, abs=1e-6)
        assert ap.item() == pytest.approx(brute_ap(scores.tolist(), relevance.tolist()), abs=1e-6)


def test_average_precision_hand_example_and_tie_order_invariance() -> None:
    # ranks 1..5: relevant at 1, 3, 4 -> (1/1 + 2/3 + 3/4) / 3
    scores = torch.tensor([0.9, 0.8, 0.7, 0.6, 0.5])
    relevance = torch.tensor([1, 0, 1, 1, 0])
    assert average_precision(scores, relevance).item() == pytest.approx((1 + 2 / 3 + 3 / 4) / 3)
    # a relevant and an irrelevant item tied at the top: both relevant items of the group see 1/2
    tied = torch.tensor([1.0, 1.0, 0.2])
    assert average_precision(tied, torch.tensor([1, 0, 0])).item() == pytest.approx(0.5)
    assert average_precision(tied, torch.tensor([0, 1, 0])).item() == pytest.approx(0.5)
    scores = tied_scores((30,), 4, torch.float64, "cpu")
    relevance = torch.rand(30) < 0.5
    relevance[3] = True
    perm = torch.randperm(30)
    assert average_precision(scores[perm], relevance[perm]).item() == pytest.approx(
        average_precision(scores, relevance).item(), abs=1e-12)


def test_average_precision_float16_and_infinite_scores() -> None:
    scores = torch.tensor([float("inf"), 0.5, -float("inf"), 0.1], dtype=torch.float16)
    relevance = torch.tensor([True, False, True, False])
    ap = average_precision(scores, relevance)
    assert ap.dtype == torch.float32
    assert ap.item() == pytest.approx(average_precision_score([1, 0, 1, 0], [1e9, 0.5, -1e9, 0.1]))


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", DTYPES)
def test_mean_average_precision_ignore_and_skipped_queries(device: str, dtype: torch.dtype) -> None:
    q, m = 7, 25
    scores = tied_scores((q, m), 6, dtype, device)
    relevance = torch.rand(q, m, device=device) < 0.3
    relevance[2] = False                     # no relevant item at all: skipped
    ignore = torch.rand(q, m, device=device) < 0.2
    relevance[4] = ignore[4] & (torch.rand(m, device=device) < 0.5)  # relevant items only under the ignore: skipped
    relevance[0, 0], ignore[0, 0] = True, False
    value = mean_average_precision(scores, relevance, ignore)
    assert value.device.type == device and value.dtype == dtype
    assert value.item() == pytest.approx(brute_map(scores.cpu(), relevance.cpu(), ignore.cpu()), abs=1e-6)
    kept = [i for i in range(q) if (relevance[i] & ~ignore[i]).any()]
    sk = np.mean([average_precision_score(relevance[i][~ignore[i]].cpu().numpy(), scores[i][~ignore[i]].cpu().numpy())
                  for i in kept])
    assert value.item() == pytest.approx(sk, abs=1e-6)
    # the ignored entries really are ignored: changing their scores changes nothing
    shuffled = torch.where(ignore, torch.rand_like(scores), scores)
    assert mean_average_precision(shuffled, relevance, ignore).item() == pytest.approx(value.item(), abs=1e-6)


def test_mean_average_precision_self_ignore_excludes_the_query() -> None:
    scores = torch.tensor([[1.0, 0.9, 0.1], [0.2, 1.0, 0.8]])
    relevance = torch.tensor([[1, 0, 1], [0, 1, 1]])
    ignore = torch.eye(3, dtype=torch.bool)[:2]
    # query 0 ranks [item 1 (irrelevant), item 2 (relevant)] -> 1/2; query 1 ranks [item 2 (relevant), item 0] -> 1
    assert mean_average_precision(scores, relevance, ignore).item() == pytest.approx(0.75)


def test_mean_average_precision_chunked_equals_single_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    scores = tied_scores((13, 30), 5, torch.float64, "cpu")
    relevance = torch.rand(13, 30) < 0.3
    relevance[:, 0] = True
    expected = mean_average_precision(scores, relevance)
    original = ap_module.row_chunks
    monkeypatch.setattr(ap_module, "row_chunks", lambda rows, cols: original(rows, cols, max_elements=60))
    assert len(ap_module.row_chunks(13, 30)) == 7
    assert mean_average_precision(scores, relevance).item() == pytest.approx(expected.item(), abs=1e-12)


@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", DTYPES)
def test_micro_average_precision_pools_all_pairs(device: str, dtype: torch.dtype) -> None:
    scores = tied_scores((6, 20), 8, dtype, device)
    relevance = torch.rand(6, 20, device=device) < 0.25
    relevance[0, 0] = True
    ignore = torch.rand(6, 20, device=device) < 0.2
    ignore[0, 0] = False
    value = micro_average_precision(scores, relevance, ignore)
    keep = ~ignore
    pooled_s, pooled_r = scores[keep].cpu(), relevance[keep].cpu()
    assert value.device.type == device and value.dtype == dtype
    assert value.item() == pytest.approx(average_precision_score(pooled_r.numpy(), pooled_s.numpy()), abs=1e-6)
    assert value.item() == pytest.approx(brute_ap(pooled_s.tolist(), pooled_r.tolist()), abs=1e-6)


def test_map_and_micro_ap_disagree_when_thresholds_differ_per_query() -> None:
    # each query ranks perfectly (mAP = 1) but query 1's positives score below query 0's negatives
    scores = torch.tensor([[0.9, 0.8, 0.7], [0.5, 0.4, 0.3]])
    relevance = torch.tensor([[1, 0, 0], [1, 0, 0]])
    assert mean_average_precision(scores, relevance).item() == 1.0
    assert micro_average_precision(scores, relevance).item() == pytest.approx((1 + 2 / 4) / 2)


def test_all_queries_skipped_raise() -> None:
    scores = torch.rand(3, 5)
    relevance = torch.zeros(3, 5, dtype=torch.bool)
    for fn in (mean_average_precision, micro_average_precision):
        with pytest.raises(ValueError, match="relevance"):
            fn(scores, relevance)
    with pytest.raises(ValueError, match="relevance"):
        map_at_n(scores, relevance, 2)
    with pytest.raises(ValueError, match="relevance"):
        average_precision(scores[0], relevance[0])
    only_ignored = torch.zeros(3, 5, dtype=torch.bool)
    only_ignored[:, 0] = True
    with pytest.raises(ValueError, match="relevance"):
        mean_average_precision(scores, only_ignored, ignore=only_ignored)


# ----------------------------------------------------------------------------- mAP@N, GMAP
@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("convention", ["standard", "autossvh"])
def test_map_at_n_matches_brute_force(device: str, dtype: torch.dtype, convention: str) -> None:
    q, m = 9, 40
    hamming = torch.randint(0, 6, (q, m), device=device)   # hash-like: heavy ties
    scores = (-hamming).to(dtype)
    relevance = torch.rand(q, m, device=device) < 0.3
    relevance[3] = False                                    # skipped
    relevance[0, :] = False
    relevance[0, -1] = True                                 # relevant but probably outside the top N
    for n in (1, 5, 17, 40, 55):
        value = map_at_n(scores, relevance, n, convention)
        assert value.device.type == device and value.dtype == dtype
        expected = np.mean([brute_ap_at_n(scores[i].tolist(), relevance[i].tolist(), n, convention)
                            for i in range(q) if relevance[i].any()])
        assert value.item() == pytest.approx(expected, abs=1e-6)


def test_map_at_n_conventions_hand_example() -> None:
    scores = torch.tensor([[0.9, 0.8, 0.7, 0.6, 0.5]])
    relevance = torch.tensor([[1, 0, 1, 0, 0]])
    p = 1 / 1 + 2 / 3
    assert map_at_n(scores, relevance, 4).item() == pytest.approx(p / 2)
    assert map_at_n(scores, relevance, 4, convention="autossvh").item() == pytest.approx(p / 4)
    all_relevant = torch.ones(1, 5, dtype=torch.bool)
    for convention in ("standard", "autossvh"):
        assert map_at_n(scores, all_relevant, 5, convention).item() == pytest.approx(1.0)
    # with N = M and no ties, the standard convention is AP over the full list
    scores = torch.rand(4, 30, dtype=torch.float64)
    relevance = torch.rand(4, 30) < 0.4
    relevance[:, 0] = True
    assert map_at_n(scores, relevance, 30).item() == pytest.approx(mean_average_precision(scores, relevance).item())


def test_map_at_n_ignore_moves_items_out_of_the_top() -> None:
    scores = torch.tensor([[1.0, 0.9, 0.8]])
    relevance = torch.tensor([[1, 0, 1]])
    ignore = torch.tensor([[True, False, False]])
    # kept list: [irrelevant, relevant] -> standard AP@2 = (1/2)/1
    assert map_at_n(scores, relevance, 2, ignore=ignore).item() == pytest.approx(0.5)


def test_map_at_n_accepts_numpy_integers() -> None:
    scores = torch.rand(3, 12, dtype=torch.float64)
    relevance = torch.rand(3, 12) < 0.5
    relevance[:, 0] = True
    assert map_at_n(scores, relevance, np.int64(4)).item() == map_at_n(scores, relevance, 4).item()
    assert gmap(scores, relevance, ns=np.array([2, 4])).item() == pytest.approx(
        math.hypot(map_at_n(scores, relevance, 2, "autossvh").item(), map_at_n(scores, relevance, 4, "autossvh").item()))


def test_gmap_is_root_of_sum_of_squares() -> None:
    scores = torch.rand(5, 150, dtype=torch.float64)
    relevance = torch.rand(5, 150) < 0.5
    ns = (5, 20, 40, 60, 80, 100)
    for convention in ("standard", "autossvh"):
        expected = math.sqrt(sum(map_at_n(scores, relevance, n, convention).item() ** 2 for n in ns))
        assert gmap(scores, relevance, convention=convention).item() == pytest.approx(expected, abs=1e-12)
    perfect = torch.arange(150, 0, -1, dtype=torch.float64).expand(2, 150)
    relevant_top = torch.zeros(2, 150, dtype=torch.bool)
    relevant_top[:, :120] = True
    assert gmap(perfect, relevant_top).item() == pytest.approx(math.sqrt(6))  # above 1: not a mean
    assert gmap(perfect, relevant_top, ns=(5,)).item() == pytest.approx(1.0)


# ----------------------------------------------------------------------------- NDCG
@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", [None, 1, 4, 12])
def test_ndcg_matches_sklearn_with_ties(device: str, dtype: torch.dtype, k: int | None) -> None:
    scores = tied_scores((8, 15), 5, dtype, device)
    gains = torch.randint(0, 3, (8, 15), device=device)
    gains[5] = 0                                     # skipped here, 0 in scikit-learn
    value = ndcg(scores, gains, k=k)
    assert value.device.type == device and value.dtype == dtype
    rows = [i for i in range(8) if i != 5]
    expected = ndcg_score(gains[rows].cpu().numpy(), scores[rows].cpu().numpy(), k=k)
    assert value.item() == pytest.approx(expected, abs=1e-6)


def test_ndcg_tie_averaging_brute_force_and_mask() -> None:
    for _ in range(10):
        scores = tied_scores((6,), 3, torch.float64, "cpu")
        gains = torch.rand(6, dtype=torch.float64) * 3
        for k in (None, 2, 4):
            ideal = sum(g / math.log2(r + 2) for r, g in enumerate(sorted(gains.tolist(), reverse=True)[:k or 6]))
            expected = brute_tie_averaged_dcg(scores.tolist(), gains.tolist(), k) / ideal
            assert ndcg(scores, gains, k=k).item() == pytest.approx(expected, abs=1e-12)
    scores = torch.tensor([[0.1, 0.9, 0.5, 0.7]])
    gains = torch.tensor([[2, 0, 1, 2]])
    ignore = torch.tensor([[False, True, False, False]])
    # kept ranking: gains [2 (0.7), 1 (0.5), 2 (0.1)]; ideal [2, 2, 1]
    dcg = 2 + 1 / math.log2(3) + 2 / math.log2(4)
    idcg = 2 + 2 / math.log2(3) + 1 / math.log2(4)
    assert ndcg(scores, gains, ignore=ignore).item() == pytest.approx(dcg / idcg)
    with pytest.raises(ValueError, match="gains"):
        ndcg(scores, torch.tensor([[0, 3, 0, 0]]), ignore=ignore)


# ----------------------------------------------------------------------------- PR curve
@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", DTYPES)
def test_precision_recall_curve_matches_sklearn(device: str, dtype: torch.dtype) -> None:
    scores = tied_scores((5, 30), 12, dtype, device)
    relevance = torch.rand(5, 30, device=device) < 0.3
    relevance[0, 0] = True
    ignore = torch.rand(5, 30, device=device) < 0.1
    ignore[0, 0] = False
    single_relevance = relevance[1] | (scores[1] == scores[1].max())
    cases = [((scores[1], single_relevance), (scores[1], single_relevance)),        # one list
             ((scores, relevance, ignore), (scores[~ignore], relevance[~ignore]))]        # pooled, ignored
    for args, (s, r) in cases:
        precision, recall, thresholds = precision_recall_curve(*args)
        sk_p, sk_r, sk_t = sk_precision_recall_curve(r.cpu().numpy(), s.cpu().numpy())
        assert precision.device.type == device and precision.dtype == dtype
        np.testing.assert_allclose(precision.cpu().numpy(), sk_p, atol=1e-6)
        np.testing.assert_allclose(recall.cpu().numpy(), sk_r, atol=1e-6)
        np.testing.assert_allclose(thresholds.cpu().numpy(), sk_t, atol=1e-6)
        area = -torch.sum(torch.diff(recall) * precision[:-1])
        assert area.item() == pytest.approx(average_precision_score(r.cpu().numpy(), s.cpu().numpy()), abs=1e-6)


# ----------------------------------------------------------------------------- QP / TP
@pytest.mark.parametrize("device", devices())
@pytest.mark.parametrize("dtype", DTYPES)
def test_quadlet_and_triplet_precision_brute_force(device: str, dtype: torch.dtype) -> None:
    t = 200
    qp, qi, qn = (torch.randint(0, 4, (t,), device=device).to(dtype) for _ in range(3))  # ties count as wrong
    quadlet = quadlet_precision(qp, qi, qn)
    triplet = triplet_precision(qp, qn)
    assert quadlet.device.type == device and quadlet.dtype == dtype
    rows = list(zip(qp.tolist(), qi.tolist(), qn.tolist()))
    assert quadlet.item() == pytest.approx(sum(p > i > n for p, i, n in rows) / t)
    assert triplet.item() == pytest.approx(sum(p > n for p, _, n in rows) / t)
    assert quadlet_precision(torch.tensor([3.0]), torch.tensor([2.0]), torch.tensor([1.0])).item() == 1.0
    assert quadlet_precision(torch.tensor([3.0]), torch.tensor([3.0]), torch.tensor([1.0])).item() == 0.0
    # every correctly ranked quadlet yields two correctly ranked triplets (q,p,n), (q,i,n)
    expanded = triplet_precision(torch.cat([qp, qi]), torch.cat([qn, qn]))
    assert expanded.item() >= quadlet.item()


def test_all_pairs_triplet_precision_is_roc_auc_and_ranking_summary() -> None:
    scores = torch.randn(60, dtype=torch.float64)
    relevance = torch.rand(60) < 0.3
    pos, neg = scores[relevance], scores[~relevance]
    pairs = triplet_precision(pos[:, None].expand(-1, len(neg)).flatten(), neg[None, :].expand(len(pos), -1).flatten())
    assert pairs.item() == pytest.approx(roc_auc_score(relevance.numpy(), scores.numpy()))
    ranked = relevance[scores.argsort(descending=True)].tolist()
    ap, pair_fraction = ranking_summary(ranked)
    n_pos = sum(ranked)
    assert ap == pytest.approx(average_precision(scores, relevance).item())
    assert pair_fraction == pytest.approx(1 - len(misordered_pairs(ranked)) / (n_pos * (len(ranked) - n_pos)))
    assert pair_fraction == pytest.approx(pairs.item())
    with pytest.raises(ValueError, match="rank"):
        plot_rank_sweep(n_items=10, other_positives=[1, 4], rank=4)


# ----------------------------------------------------------------------------- bad inputs
def call(fn, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN201
    return lambda: fn(*args, **kwargs)


@pytest.mark.parametrize("case, name", [
    (call(average_precision, torch.rand(5), torch.ones(4)), "relevance"),
    (call(average_precision, torch.tensor([0.1, float("nan")]), torch.ones(2)), "scores"),
    (call(average_precision, torch.rand(3), torch.tensor([0, 2, 1])), "relevance"),
    (call(average_precision, torch.rand(0), torch.ones(0)), "scores"),
    (call(average_precision, torch.rand(2, 3), torch.ones(2, 3)), "scores"),
    (call(average_precision, torch.arange(3), torch.ones(3)), "scores"),
    (call(average_precision, [0.3, 0.2], torch.ones(2)), "scores"),
    (call(mean_average_precision, torch.rand(2, 3), torch.ones(2, 4)), "relevance"),
    (call(mean_average_precision, torch.rand(2, 0), torch.ones(2, 0)), "scores"),
    (call(mean_average_precision, torch.rand(2, 3), torch.ones(2, 3), torch.ones(3, 2)), "ignore"),
    (call(mean_average_precision, torch.rand(2, 3), torch.full((2, 3), 0.5)), "relevance"),
    (call(micro_average_precision, torch.full((2, 2), float("nan")), torch.ones(2, 2)), "scores"),
    (call(map_at_n, torch.rand(2, 3), torch.ones(2, 3), 0), "n"),
    (call(map_at_n, torch.rand(2, 3), torch.ones(2, 3), 2.0), "n"),
    (call(map_at_n, torch.rand(2, 3), torch.ones(2, 3), 2, "divide-by-k"), "convention"),
    (call(gmap, torch.rand(2, 3), torch.ones(3, 2)), "relevance"),
    (call(gmap, torch.rand(2, 3), torch.ones(2, 3), ns=()), "n"),
    (call(ndcg, torch.rand(2, 3), -torch.ones(2, 3)), "gains"),
    (call(ndcg, torch.rand(2, 3), torch.ones(2, 2)), "gains"),
    (call(ndcg, torch.rand(2, 3), torch.full((2, 3), float("inf"))), "gains"),
    (call(ndcg, torch.rand(2, 3), torch.ones(2, 3), k=0), "k"),
    (call(ndcg, torch.rand(2, 3), torch.zeros(2, 3)), "gains"),
    (call(precision_recall_curve, torch.rand(4), torch.zeros(4)), "relevance"),
    (call(precision_recall_curve, torch.rand(2, 2, 2), torch.zeros(2, 2, 2)), "scores"),
    (call(quadlet_precision, torch.rand(3), torch.rand(4), torch.rand(3)), "sim_qi"),
    (call(quadlet_precision, torch.rand(0), torch.rand(0), torch.rand(0)), "sim_qp"),
    (call(triplet_precision, torch.rand(3), torch.tensor([0.0, float("nan"), 1.0])), "sim_qn"),
    (call(triplet_precision, torch.rand(3, 1), torch.rand(3, 1)), "sim_qp"),
])
def test_bad_inputs_raise_value_error_naming_the_argument(case, name: str) -> None:  # noqa: ANN001
    with pytest.raises((ValueError, TypeError), match=name):
        case()


# ------------------------------------------------------------------- ties= (one policy per call, issue 22)
def _released_calculate_metric(y_true, y_score, gt_len):
    """The released evaluators' calculate_metric, transcribed: numpy argsort reversed, cumsum precision."""
    y = np.array(y_true)[np.argsort(y_score)[::-1]]
    precisions = np.cumsum(y) / (np.arange(y.shape[0]) + 1)
    return float(np.sum(precisions * y / gt_len))


def test_ap_ties_policies_expected_released_and_grouped_default() -> None:
    from hapref.evaluation import evaluate  # noqa: F401  (the same words as the evaluation)
    rng = np.random.default_rng(0)
    for _ in range(25):
        scores = rng.integers(0, 3, size=7).astype(float)
        relevant = rng.random(7) < 0.5
        if not relevant.any():
            continue
        values = [np.sum(np.cumsum(y) / np.arange(1, 8) * y) / y.sum() for _, y in tie_orders(scores, relevant)]
        t_s, t_r = torch.tensor(scores, dtype=torch.float64), torch.tensor(relevant)
        assert float(average_precision(t_s, t_r, ties="expected")) == pytest.approx(np.mean(values), abs=1e-12)
        assert float(average_precision(t_s, t_r, ties="released")) == pytest.approx(
            _released_calculate_metric(relevant.astype(int), scores, relevant.sum()), abs=1e-12)
        assert float(average_precision(t_s, t_r)) == pytest.approx(brute_ap(scores.tolist(), relevant.tolist()))
    scores = torch.tensor(rng.integers(0, 4, size=(5, 12)), dtype=torch.float64)
    relevance = torch.tensor(rng.random((5, 12)) < 0.4)
    ignore = torch.eye(5, 12, dtype=torch.bool)
    for ties in ("grouped", "expected", "released"):
        got = mean_average_precision(scores, relevance, ignore, ties=ties)
        rows = [ap_module.average_precision(scores[i][~ignore[i]], relevance[i][~ignore[i]], ties=ties)
                for i in range(5) if (relevance[i] & ~ignore[i]).any()]
        assert float(got) == pytest.approx(float(torch.stack(rows).mean()), abs=1e-12)
    keep = ~ignore
    pooled_s, pooled_r = scores[keep].numpy(), relevance[keep].numpy()
    assert float(micro_average_precision(scores, relevance, ignore, ties="released")) == pytest.approx(
        _released_calculate_metric(pooled_r.astype(int), pooled_s, pooled_r.sum()), abs=1e-12)
    with pytest.raises(ValueError, match="ties"):
        average_precision(scores[0], relevance[0], ties="sklearn")
