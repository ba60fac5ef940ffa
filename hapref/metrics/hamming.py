"""Tie-aware mAP@N for Hamming rankings, on dense distances or straight from a :class:`~hapref.search.HammingIndex`.

A 64-bit code takes only 65 distances, so a database of 10⁵ videos ranks in huge tie groups and
the order inside a group decides which items fall in the top N. Instead of one arbitrary order (the
stable sort of :func:`hapref.metrics.map_at_n`, FAISS's ascending ids, or ``np.argsort``'s), the
functions here return the **expected** AP@N over all orders of the tied items, each equally likely,
in closed form (the tie-aware AP of McSherry & Najork, ECIR 2008, extended to a cut at N):

* position ``r`` in a tie group ``g`` (items at positions ``a+1 … a+n``, ``R`` of them relevant,
  ``H`` relevant items ranked before it) holds a relevant item with probability ``R/n``, and then
  ``E[hits@r] = H + 1 + (j−1)(R−1)/(n−1)`` with ``j = r − a``; so ``E[Σ_{r≤N} P@r·rel_r]`` is a sum
  of closed-form terms, with the group that straddles N cut after its first ``m = N − a`` positions;
* the ``"standard"`` convention divides by the relevant count of the top N, ``H + X`` where X, the
  relevant items among the m drawn from the boundary group, is hypergeometric: the expectation is
  a finite sum over the values of X (the ``"autossvh"`` convention divides by N, a constant).

Only items at distance ≤ the N-th distance matter, so :func:`hamming_map_at_n` searches the top N
with FAISS, then gathers each query's whole boundary tie group with a range search: no dense
[queries × database] matrix is ever formed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from numbers import Integral

import numpy as np
import torch
from torch import Tensor

from hapref.metrics.hashing import CONVENTIONS
from hapref.search.codes import _as_tensor, as_packed
from hapref.search.index import HammingIndex
from hapref.validation import check_binary, renamed_keywords


def _check_n_convention(n: object, convention: str) -> int:
    if not isinstance(n, Integral) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    if convention not in CONVENTIONS:
        raise ValueError(f"convention must be one of {CONVENTIONS}, got {convention!r}")
    return int(n)


def expected_ap_at_n(distances: np.ndarray, relevant: np.ndarray, n: int, convention: str = "standard") -> float:
    """Expected AP@N of one query over all orders of tied items, in closed form (see the module docstring).

    Args:
        distances: [K] distances of the candidate items (any order; lower = closer). Must contain every
            database item at distance ≤ the N-th smallest distance (farther items may be included too).
        relevant: [K] bool, which candidates are relevant.
        n: cut-off N ≥ 1 (a list shorter than N is scored in full; "autossvh" still divides by N).
        convention: "standard" (divide by the relevant count of the top N) or "autossvh" (divide by N),
            as in :func:`hapref.metrics.map_at_n`.

    Returns:
        The expected AP@N as a float (0 when the list is empty).

    Examples:
        One relevant item tied with one irrelevant item for the first place: AP@1 is 1 or 0.

        >>> import numpy as np
        >>> round(expected_ap_at_n(np.array([3, 3]), np.array([True, False]), n=1), 6)
        0.5
        >>> round(expected_ap_at_n(np.array([3, 3]), np.array([True, False]), n=2), 6)  # (1 + 1/2) / 2
        0.75
    """
    n = _check_n_convention(n, convention)
    distances = np.asarray(distances, dtype=np.float64).reshape(-1)
    relevant = np.asarray(relevant, dtype=bool).reshape(-1)
    if distances.shape != relevant.shape:
        raise ValueError(f"distances and relevant must have the same length, got {distances.shape} "
                         f"and {relevant.shape}")
    if distances.size == 0:
        return 0.0
    order = np.argsort(distances, kind="stable")
    d, rel = distances[order], relevant[order].astype(np.float64)
    starts = np.flatnonzero(np.r_[True, d[1:] != d[:-1]])
    sizes = np.diff(np.r_[starts, d.size])
    rel_per_group = np.add.reduceat(rel, starts)
    before = np.cumsum(rel_per_group) - rel_per_group          # relevant items ranked before each group
    top = min(n, d.size)
    b = int(np.searchsorted(starts, top - 1, side="right")) - 1  # the group holding position `top`
    # E[P@r · rel_r] for every position r ≤ top.
    pos = np.arange(1, top + 1, dtype=np.float64)
    g = np.searchsorted(starts, np.arange(top), side="right") - 1
    size, r_g, h = sizes[g].astype(np.float64), rel_per_group[g], before[g]
    j = pos - starts[g]
    spread = np.where(size > 1, (j - 1) * (r_g - 1) / np.maximum(size - 1, 1), 0.0)
    term = r_g / size * (h + 1 + spread) / pos
    numerator_full = term.sum()
    if convention == "autossvh":
        return float(numerator_full / n)
    a, size_b, r_b, h_b = int(starts[b]), int(sizes[b]), int(rel_per_group[b]), float(before[b])
    m = top - a                                                   # positions taken from the boundary group
    p_before = term[:a].sum()
    if m == size_b:                                               # nothing is cut: the count is fixed
        total = h_b + r_b
        return float(numerator_full / total) if total > 0 else 0.0
    expected = 0.0
    jj = np.arange(1, m + 1, dtype=np.float64)
    for x in range(max(0, m - (size_b - r_b)), min(m, r_b) + 1):
        if h_b + x == 0:
            continue                                             # AP@N = 0 when the top N holds no relevant item
        log_p = (math.lgamma(r_b + 1) - math.lgamma(x + 1) - math.lgamma(r_b - x + 1)
                 + math.lgamma(size_b - r_b + 1) - math.lgamma(m - x + 1) - math.lgamma(size_b - r_b - m + x + 1)
                 - math.lgamma(size_b + 1) + math.lgamma(m + 1) + math.lgamma(size_b - m + 1))
        spread_x = (jj - 1) * (x - 1) / (m - 1) if m > 1 else np.zeros(1)
        p_b = (x / m * (h_b + 1 + spread_x) / (a + jj)).sum()
        expected += math.exp(log_p) * (p_before + p_b) / (h_b + x)
    return float(expected)


@renamed_keywords(mask="ignore")
def map_at_n_tie_aware(distances: Tensor, relevance: Tensor, n: int, convention: str = "standard",
                       ignore: Tensor | None = None) -> Tensor:
    """Tie-aware mAP@N of dense distances: the mean over queries of the expected AP@N (AutoSSVH Sec. 4.2).

    Same metric as :func:`hapref.metrics.map_at_n` (with ``scores = -distances``), except that each
    tie group is averaged over all its orders instead of kept in database order; the two agree when
    no tie crosses a relevant/irrelevant boundary. For a large database use :func:`hamming_map_at_n`.

    Args:
        distances: [Q, M] distances (Hamming distances in bits, or any float/int; lower = closer).
        relevance: [Q, M] bool or 0/1 labels.
        n: cut-off N ≥ 1.
        convention: "standard" or "autossvh" (see :func:`hapref.metrics.map_at_n`).
        ignore: optional [Q, M] bool, True = leave the entry out of the ranking.

    Returns:
        0-d float64 tensor. Queries without a relevant (kept) item are skipped.

    Examples:
        >>> import torch
        >>> d = torch.tensor([[0, 1, 1, 2]])
        >>> rel = torch.tensor([[False, True, False, False]])
        >>> map_at_n_tie_aware(d, rel, n=2)  # the relevant item is 2nd (AP@2 = 1/2) or 3rd (0), equally likely
        tensor(0.2500, dtype=torch.float64)
    """
    n = _check_n_convention(n, convention)
    dist = _as_tensor(distances, "distances")
    if dist.ndim != 2 or dist.numel() == 0:
        raise ValueError(f"distances must be a non-empty [Q, M] tensor, got shape {tuple(dist.shape)}")
    if dist.dtype == torch.bool or dist.is_complex():
        raise TypeError(f"distances must be a real numeric tensor, got {dist.dtype}")
    if dist.is_floating_point() and torch.isnan(dist).any():
        raise ValueError("distances contains NaN")
    rel = check_binary(_as_tensor(relevance, "relevance"), "relevance", dist.shape)
    keep = torch.ones_like(rel) if ignore is None else ~check_binary(_as_tensor(ignore, "ignore"), "ignore",
                                                                     dist.shape)
    dist, rel, keep = dist.cpu().double().numpy(), rel.cpu().numpy(), keep.cpu().numpy()
    aps = [expected_ap_at_n(dist[q][keep[q]], rel[q][keep[q]], n, convention)
           for q in range(dist.shape[0]) if (rel[q] & keep[q]).any()]
    if not aps:
        raise ValueError("relevance has no relevant (kept) item in any query: mAP@N is undefined")
    return torch.tensor(aps, dtype=torch.float64).mean()


def _labels(x: object, name: str) -> Tensor:
    t = _as_tensor(x, name).cpu()
    if t.ndim == 1 and not t.is_floating_point() and t.dtype != torch.bool:
        return t.long()
    if t.ndim == 2:
        return check_binary(t, name, t.shape)
    raise ValueError(f"{name} must be [N] integer class ids or [N, C] multi-hot (bool or 0/1) labels, "
                     f"got shape {tuple(t.shape)} and dtype {t.dtype}")


def hamming_map_at_n(index: HammingIndex, queries: object, query_labels: object, database_labels: object,
                     n: int, convention: str = "standard") -> Tensor:
    """Tie-aware mAP@N of query codes against a :class:`~hapref.search.HammingIndex` (AutoSSVH Sec. 4.2).

    Equals :func:`map_at_n_tie_aware` on the full [Q, M] distance matrix, without building it: FAISS
    finds each query's N nearest codes, then a range search at the N-th distance brings in the whole
    tie group at the boundary (every item at that distance, relevant or not), which is all the
    expected AP@N depends on. An item is relevant to a query when they share a label.

    Args:
        index: the database codes (an exact index gives the exact metric; an IVF index approximates it).
        queries: [Q, bytes] packed uint8 or [Q, bits] ±1 / 0-1 query codes.
        query_labels, database_labels: [Q] and [M] integer class ids, or [Q, C] and [M, C] multi-hot
            (bool or 0/1) labels (relevant = at least one label in common).
        n: cut-off N ≥ 1 (N larger than the database scores the whole list).
        convention: "standard" or "autossvh" (see :func:`hapref.metrics.map_at_n`).

    Returns:
        0-d float64 tensor. Queries with no relevant item in the database are skipped.

    Examples:
        >>> import torch
        >>> from hapref.search import HammingIndex
        >>> db = torch.tensor([[1] * 8, [1] * 7 + [-1], [1] * 6 + [-1, -1], [-1] * 8])
        >>> index = HammingIndex(db)
        >>> hamming_map_at_n(index, db[:1], torch.tensor([0]), torch.tensor([0, 1, 0, 1]), n=2)
        tensor(1., dtype=torch.float64)
    """
    if not isinstance(n, Integral) or isinstance(n, bool):
        raise ValueError(f"n must be a positive int, got {n!r}")
    return hamming_map_at_ns(index, queries, query_labels, database_labels, [n], convention)[0]


def hamming_map_at_ns(index: HammingIndex, queries: object, query_labels: object, database_labels: object,
                      ns: Sequence[int], convention: str = "standard") -> Tensor:
    """Tie-aware mAP@N for several cut-offs from one search: a [len(ns)] float64 tensor.

    AutoSSVH Sec. 4.2 reports N ∈ {5, 20, 40, 60, 80, 100} (and GMAP, Eq. 21, from them). One top-max(N)
    search and one range search at the largest N's boundary cover every smaller N. Arguments as in
    :func:`hamming_map_at_n`.

    Examples:
        >>> import torch
        >>> from hapref.search import HammingIndex
        >>> db = torch.tensor([[1] * 8, [1] * 7 + [-1], [1] * 6 + [-1, -1], [-1] * 8])
        >>> labels = torch.tensor([0, 1, 0, 1])
        >>> hamming_map_at_ns(HammingIndex(db), db[:1], labels[:1], labels, ns=[1, 3], convention="autossvh")
        tensor([1.0000, 0.5556], dtype=torch.float64)
    """
    if not isinstance(index, HammingIndex):
        raise TypeError(f"index must be a hapref.search.HammingIndex, got {type(index).__name__}")
    if isinstance(ns, (str, bytes)) or not isinstance(ns, Sequence) or len(ns) == 0:
        raise ValueError(f"ns must be a non-empty sequence of positive ints, got {ns!r}")
    ns = [_check_n_convention(n, convention) for n in ns]
    q_labels, db_labels = _labels(query_labels, "query_labels"), _labels(database_labels, "database_labels")
    if q_labels.ndim != db_labels.ndim or (q_labels.ndim == 2 and q_labels.shape[1] != db_labels.shape[1]):
        raise ValueError(f"query_labels {tuple(q_labels.shape)} and database_labels {tuple(db_labels.shape)} "
                         "must both be class ids or both multi-hot with the same number of classes")
    if db_labels.shape[0] != len(index):
        raise ValueError(f"database_labels must have one row per indexed code ({len(index)}), "
                         f"got {db_labels.shape[0]}")
    if getattr(index, "has_ids", False):
        raise ValueError("index maps ids (built with ids=); mAP@N needs row positions: build it without ids")
    packed = as_packed(queries, "queries", index.bits // 8, packed=getattr(index, "packed", False))
    top = min(max(ns), len(index))
    distances, _ = index.search(packed, top, packed=True)
    if distances.shape[0] != q_labels.shape[0]:
        raise ValueError(f"query_labels must have one row per query ({distances.shape[0]}), got {q_labels.shape[0]}")
    if q_labels.ndim == 1:
        has_relevant = torch.isin(q_labels, db_labels)
    else:
        has_relevant = (q_labels & db_labels.any(0)).any(1)
    radius = distances[:, -1]
    aps = []
    for value in radius.unique().tolist():                       # one range search per distinct boundary distance
        rows = torch.nonzero((radius == value) & has_relevant).flatten()
        if rows.numel() == 0:
            continue
        offsets, dist, ids = index.range_search(packed[rows], int(value), packed=True)
        for i, q in enumerate(rows.tolist()):
            sl = slice(int(offsets[i]), int(offsets[i + 1]))
            cand = db_labels[ids[sl]]
            rel = (cand == q_labels[q] if q_labels.ndim == 1 else (cand & q_labels[q]).any(1)).numpy()
            d = dist[sl].numpy()
            aps.append([expected_ap_at_n(d, rel, n, convention) for n in ns])
    if not aps:
        raise ValueError("no query has a relevant item in the database: mAP@N is undefined")
    return torch.tensor(aps, dtype=torch.float64).mean(0)
