r"""The published evaluation protocols of FIVR, EVVE, SVD, CC_WEB_VIDEO and VCDB, reproduced exactly and fast.

:func:`evaluate` returns the numbers the released evaluators print (S2VS, https://github.com/gkordo/s2vs,
``datasets/*.py``; HAP-VR, https://github.com/yafeng19/HAP-VR, ``datasets/svd.py``) for the same
similarities, with the same keys. The definitions:

* **AP with a ground-truth length** (FIVR, VCDB, every μAP): sort the list by descending score, then
  :math:`\mathrm{AP} = \frac{1}{G}\sum_k P@k\,\mathrm{rel}_k` where :math:`G` counts *every* relevant
  available video, retrieved or not (a relevant video missing from the list contributes 0). mAP averages
  it over queries; μAP pools all (query, target) pairs of all queries into one list with
  :math:`G = \sum_q G_q`.
* **EVVE** integrates the precision-recall curve with the trapezoidal rule: the :math:`n`-th positive
  (0-based) at rank :math:`r` adds :math:`\frac{1}{2G}\big(\frac{n}{r} + \frac{n+1}{r+1}\big)` (the first
  term is 1 at :math:`r = 0`).
* **CC_WEB_VIDEO** walks each list counting only annotated videos (``mAP``) or all (``mAP_star``), with the
  near-duplicates marked *excluded* removed (``mAP_c``, ``mAP_c_star``); the query matches itself and that
  match counts.
* **SVD** mAP is scikit-learn's ``average_precision_score`` over each query's labelled pairs.

Coverage. A similarities dict is scored against the protocol's whole database, as the released dataset
classes count it by default (``FIVR('5k').evaluate(sims)``): a video the dict lacks for a query is never
retrieved (a relevant one is a miss), a query it lacks is left out (the released classes skip it with a
warning). Ids outside the annotation that the dict scores count as distractors, as the released
evaluation loop's ``all_db`` holds them. ``available=`` declares a deliberate subset instead (the videos
whose features exist: the ``all_db`` of S2VS's ``evaluation.py``). Every result carries its
:class:`Coverage` (queries scored / in the protocol, database videos scored / in the protocol, pairs), and
:func:`evaluate` warns (:class:`CoverageWarning`) when it is incomplete.

Ties: one policy per call, ``ties=``:

* ``"expected"`` (the default; order-independent): every AP is **the expected value over all orders of the
  tied items**, each order equally likely, whatever order the file stores them in. For a group of
  :math:`L` equal scores at 0-based positions :math:`f, \dots, f+L-1` holding :math:`m` relevant items,
  preceded by :math:`h` relevant items, a relevant item is equally likely at every position :math:`i` of
  the group and then has on average :math:`(i-f)\frac{m-1}{L-1}` of the other relevant items before it, so
  the group adds

  .. math:: \frac{1}{G}\,\frac{m}{L}\sum_{i=f}^{f+L-1}\frac{h + 1 + (i-f)\frac{m-1}{L-1}}{i+1}

  to the ranked AP (EVVE's trapezoid and CC_WEB_VIDEO's walk take the same expectation of their own terms;
  SVD's mAP takes the ranked AP's).
* ``"released"``: the order the released evaluators use, which reproduces their numbers on tied scores:
  FIVR, VCDB and every μAP build the list in the order of the similarities dict (μAP: FIVR the dict's
  query order, EVVE and VCDB the annotation's) and rank it with ``numpy.argsort(scores)[::-1]`` (numpy's
  default, unstable sort: the same numbers as the released code on the same machine and numpy); EVVE's and
  CC_WEB_VIDEO's mAP use Python's stable ``sorted(..., reverse=True)`` (tied targets keep the dict's
  order); SVD's mAP is scikit-learn's ``average_precision_score`` (tied scores grouped). A tensor stands
  for the dict of its rows over :func:`dataset_ids`' database order.

Both agree whenever the released value does not depend on the order: on tie-free scores, and when every
tied group is all relevant or all irrelevant. :attr:`Results.tied` counts the groups where they can
differ (tied scores mixing relevant and irrelevant videos). (:mod:`hapref.metrics` takes the same
``ties=``.)
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hapref.data import loaders
from hapref.data.cache import annotation_root  # noqa: F401  (re-exported: hapref.evaluation.annotation_root)
from hapref.data.registry import ANNOTATIONS

#: Dataset names accepted by :func:`evaluate`, with the annotation folder each reads.
DATASETS = {"fivr-5k": "fivr", "fivr-200k": "fivr", "evve": "evve", "svd": "svd", "cc_web_video": "cc_web_video",
            "vcdb": "vcdb"}
#: Result keys per dataset, in the order the released evaluators print them.
RESULT_KEYS = {
    "fivr-5k": ("DSVR", "CSVR", "ISVR", "DSVD", "CSVD", "ISVD",
                "DSVR_h", "CSVR_h", "ISVR_h", "DSVD_h", "CSVD_h", "ISVD_h"),
    "evve": ("EVVE_mAP", "EVVE_uAP"),
    "svd": ("mAP", "uAP"),
    "cc_web_video": ("mAP", "mAP_star", "mAP_c", "mAP_c_star"),
    "vcdb": ("VCDB_mAP", "VCDB_uAP"),
}
RESULT_KEYS["fivr-200k"] = RESULT_KEYS["fivr-5k"]
FIVR_TASKS = {"DSVR": frozenset({"ND", "DS"}), "CSVR": frozenset({"ND", "DS", "CS"}),
              "ISVR": frozenset({"ND", "DS", "CS", "IS"})}
#: CC_WEB_VIDEO's positive labels, tested with ``label in CC_WEB_POSITIVE`` as the released code does.
CC_WEB_POSITIVE = "ESLMV"


def _file(root: Path, name: str, filename: str) -> Path:
    path = root / "annotations" / name / filename
    if not path.is_file() and (root / name / filename).is_file():   # root is the annotations folder itself
        return root / name / filename
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: the annotation root (--root DIR on the command line, root= "
                                f"in Python, else $HAPREF_ANNOTATIONS) must hold annotations/{name}/ (or be the "
                                f"annotations folder), e.g. after `python -m hapref.data.download annotations "
                                f"{name} --root DIR`")
    return path


#: Tie policies of :func:`evaluate` and :func:`ranked_ap` (see the module docstring); the first is the default.
TIES = ("expected", "released")


class CoverageWarning(UserWarning):
    """An evaluation scored fewer queries, database videos or pairs than its protocol holds.

    Examples:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as caught:
        ...     warnings.simplefilter("always")
        ...     warnings.warn("incomplete evaluation: ...", CoverageWarning)
        >>> caught[0].category.__name__
        'CoverageWarning'
    """


@dataclass(frozen=True)
class Coverage:
    """What an evaluation scored, against what its protocol holds.

    ``queries`` of ``queries_total`` protocol queries had a list; ``database`` of ``database_total``
    protocol database videos had at least one score; ``counted`` of them took part (all, or the declared
    ``available`` ones); ``pairs`` of ``pairs_total`` (query, counted video) pairs of every protocol query (a
    query never counts as its own target) had a score. ``missing_query_pairs`` of the ``pairs_total`` belong to
    queries without a list: those queries are not scored at all (left out of mAP and μAP). The other missing
    pairs, of scored queries, count as never retrieved. ``basis``: ``"protocol"`` (the whole database) or
    ``"available"`` (a declared subset).

    Examples:
        >>> c = Coverage(queries=50, queries_total=50, database=100, database_total=5000, counted=5000, pairs=5000,
        ...              pairs_total=249951)
        >>> c.complete, c.basis
        (False, 'protocol')
    """

    queries: int
    queries_total: int
    database: int
    database_total: int
    counted: int
    pairs: int
    pairs_total: int
    basis: str = "protocol"
    missing_query_pairs: int = 0

    @property
    def complete(self) -> bool:
        """True when every protocol query and database video was scored against every other.

        Examples:
            >>> Coverage(2, 2, 3, 3, 3, 6, 6).complete, Coverage(2, 2, 3, 3, 3, 5, 6).complete
            (True, False)
        """
        return (self.queries == self.queries_total and self.counted == self.database_total
                and self.pairs == self.pairs_total)

    def describe(self) -> str:
        """One line: ``queries 50/50, database 100/5000 (counted: all 5000), pairs 5000/250000``.

        Examples:
            >>> Coverage(50, 50, 100, 5000, 5000, 5000, 249951).describe()
            'queries 50/50, database videos 100/5000 (counted: the whole database), pairs 5000/249951'
        """
        counted = ("the whole database" if self.basis == "protocol" and self.counted == self.database_total
                   else f"{self.counted} declared available")
        return (f"queries {self.queries}/{self.queries_total}, database videos {self.database}/"
                f"{self.database_total} (counted: {counted}), pairs {self.pairs}/{self.pairs_total}")

    def warning(self) -> str | None:
        """A warning for an incomplete evaluation (None when complete).

        Examples:
            >>> Coverage(2, 2, 3, 3, 3, 6, 6).warning() is None
            True
            >>> Coverage(2, 2, 3, 3, 3, 5, 6).warning()[:59]
            'incomplete evaluation: 1 of 6 (query, database video) pairs'
            >>> print(Coverage(1, 2, 3, 3, 3, 2, 6, missing_query_pairs=3).warning())  # doctest: +NORMALIZE_WHITESPACE
            incomplete evaluation: 1 of 2 queries have no scores: not scored, left out of mAP and μAP (with their
            3 pairs); 1 of 3 (query, database video) pairs of the scored queries have no score and count as never
            retrieved [queries 1/2, database videos 3/3 (counted: the whole database), pairs 2/6]
        """
        if self.complete:
            return None
        parts = []
        if self.queries < self.queries_total:
            parts.append(f"{self.queries_total - self.queries} of {self.queries_total} queries have no scores: "
                         f"not scored, left out of mAP and μAP (with their {self.missing_query_pairs} pairs)")
        if self.counted < self.database_total:
            parts.append(f"only {self.counted} of {self.database_total} database videos are counted "
                         "(a declared subset: not comparable with published numbers)")
        scored_total = self.pairs_total - self.missing_query_pairs   # the pairs of the scored queries
        if self.pairs < scored_total:
            parts.append(f"{scored_total - self.pairs} of {scored_total} (query, database video) pairs "
                         + ("of the scored queries " if self.missing_query_pairs else "")
                         + "have no score and count as never retrieved")
        return "incomplete evaluation: " + "; ".join(parts) + f" [{self.describe()}]"


class Results(dict):
    """``{key: value}`` of :func:`evaluate` (a plain dict of floats) with what produced it.

    What produced it: ``coverage``, the :class:`Coverage`; ``ties``, the tie policy used (``"expected"`` or
    ``"released"``); ``tied``, the groups of tied scores, over every ranked list, that mix relevant and
    irrelevant videos (the ones whose order can change a value; 0: both policies give the same numbers);
    ``details``, extra breakdowns: EVVE ``{"per_event": {event: mAP}}`` (the released per-event lines).

    Examples:
        >>> r = Results({"mAP": 0.5})
        >>> r.coverage = Coverage(1, 1, 2, 2, 2, 2, 2)
        >>> dict(r), r.coverage.complete, r.ties
        ({'mAP': 0.5}, True, 'expected')
    """

    coverage: Coverage
    ties: str = "expected"
    tied: int = 0
    details: dict

    def __reduce__(self):  # pickles as a plain dict
        return dict, (dict(self),)


class _Ties:
    """The policy of one evaluation and its count of mixed tie groups."""

    def __init__(self, policy: str) -> None:
        if policy not in TIES:
            raise ValueError(f"ties must be one of {TIES}, got {policy!r}")
        self.policy = policy
        self.mixed = 0


# ----------------------------------------------------------------------------------------------- AP primitive
def ranked_ap(scores: np.ndarray, relevant: np.ndarray, gt_len: int, ties: str = "expected") -> float:
    r"""Non-interpolated AP of one list against ``gt_len`` relevant videos.

    :math:`\mathrm{AP} = \frac{1}{G}\sum_k P@k\,\mathrm{rel}_k` over the list sorted by descending score
    (FIVR/VCDB/μAP of the released evaluators, HAP-VR Sec. 4.1). Ties: ``"expected"`` (default,
    order-independent): the expected value over all orders of the tied items; ``"released"``: the released
    evaluators' order, ``numpy.argsort(scores)[::-1]`` of the list as given (module docstring).

    Args:
        scores: float ``[M]``.
        relevant: bool ``[M]``.
        gt_len: number of relevant videos in the ground truth (at least the relevant items in the list).
        ties: ``"expected"`` or ``"released"``.

    Returns:
        AP as a Python float.

    Examples:
        >>> round(ranked_ap(np.array([0.9, 0.8, 0.1]), np.array([True, False, True]), gt_len=3), 6)  # (1+2/3)/3
        0.555556
        >>> ranked_ap(np.array([0.5, 0.5]), np.array([True, False]), gt_len=1)  # orders give 1 or 1/2
        0.75
    """
    policy = _Ties(ties)
    scores, relevant = np.asarray(scores, dtype=np.float64), np.asarray(relevant, dtype=bool)
    if scores.shape != relevant.shape or scores.ndim != 1:
        raise ValueError(f"scores and relevant must be 1-D of equal length, got {scores.shape}, {relevant.shape}")
    if np.isnan(scores).any():
        raise ValueError("scores must not contain NaN")
    n_relevant = int(relevant.sum())
    if gt_len < n_relevant or gt_len <= 0:
        raise ValueError(f"gt_len must be positive and at least the {n_relevant} relevant items, got {gt_len}")
    return _Ranking(scores, policy).ap(relevant, gt_len)


def _group_starts(s: np.ndarray) -> np.ndarray:
    """0-based start of every group of equal scores in ``s`` (sorted by descending score)."""
    is_first = np.ones(s.size, dtype=bool)
    is_first[1:] = s[1:] != s[:-1]
    return np.flatnonzero(is_first)


def _groups_of(first: np.ndarray, n: int, positions: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For the tie groups (starting at ``first``, list of ``n``) holding the sorted ``positions``: their start
    ``f``, size ``L``, relevant items ``m`` and relevant items ahead ``h``."""
    group = np.searchsorted(first, positions, side="right") - 1
    groups, h, m = np.unique(group, return_index=True, return_counts=True)
    f = first[groups]
    nxt = groups + 1
    size = np.where(nxt < first.size, first[np.minimum(nxt, first.size - 1)], n) - f
    return f, size, m, h


def _harmonic(start: np.ndarray, size: np.ndarray) -> np.ndarray:
    """``Σ_{j=start}^{start+size-1} 1/j`` per group (``start`` >= 1), exact for singletons."""
    out = 1.0 / start
    for k in np.flatnonzero(size > 1):
        out[k] = np.sum(1.0 / np.arange(start[k], start[k] + size[k]))
    return out


def _positions_ap(first: np.ndarray, n: int, positions: np.ndarray, gt_len: int, ties: _Ties | None = None,
                  trapezoid: bool = False) -> float:
    """AP from the 0-based sorted ``positions`` of the relevant items in a list of ``n`` whose groups of equal
    scores start at ``first``: each group with ``m`` of its ``L`` items relevant and ``h`` relevant items ahead
    adds ``(m/L) Σ_i (h + 1 + (i - f)(m - 1)/(L - 1)) / (i + 1)`` (the expected value over tie orders), summed in
    closed form with ``Σ_i 1/(i+1)`` over the group. O(relevant · log groups), whatever ``n``.

    ``trapezoid``: EVVE's AP instead, the mean of that term and the precision before the item, ``n_before / i``
    (1 at ``i = 0``), also in expectation. Mixed groups (some but not all relevant) are added to ``ties``."""
    if positions.size == 0:
        return 0.0
    f, size, m, h = _groups_of(first, n, positions)
    if ties is not None:
        ties.mixed += int(np.count_nonzero((size > 1) & (m < size)))
    harmonic = _harmonic(f + 1, size)  # Σ_{i=f}^{f+L-1} 1/(i+1)
    slope = np.where(size > 1, (m - 1) / np.maximum(size - 1, 1), 0.0)
    after = (h + 1) * harmonic + slope * (size - (f + 1) * harmonic)
    if trapezoid:  # Σ_i E[n_before]/i over i >= 1, plus 1 for i = 0
        at_top = f == 0
        start = np.where(at_top, 1, f)
        count = size - at_top
        h0 = np.where(count > 0, _harmonic(start, np.maximum(count, 1)), 0.0)
        before = at_top + (h - f * slope) * h0 + slope * count
        after = (after + before) / 2.0
    return float(np.sum((m / size) * after) / gt_len)


def _released_ap(relevant_sorted: np.ndarray, gt_len: int) -> float:
    """The released ``calculate_metric`` on a list already in its order: Σ P@k · rel_k / gt_len."""
    hits = np.flatnonzero(relevant_sorted)
    return float(np.sum(np.arange(1, hits.size + 1) / (hits + 1)) / gt_len)


class _Ranking:
    """One list ranked under a tie policy; scores several relevance vectors against it."""

    def __init__(self, scores: np.ndarray, ties: _Ties, order: np.ndarray | None = None) -> None:
        self.ties = ties
        if order is not None:
            self.order = order
        elif ties.policy == "released":
            self.order = np.argsort(scores)[::-1]   # numpy's default kind, as the released calculate_metric
        else:
            self.order = np.argsort(-scores)        # any order of ties: the expected value does not depend on it
        self.scores = scores
        self.first = _group_starts(scores[self.order])
        self.n = scores.size

    def subset(self, mask: np.ndarray) -> _Ranking:
        """The ranking of ``scores[mask]``: under ``"expected"`` the sorted order restricted (no new sort);
        under ``"released"`` a new argsort of the sub-list, as the released code builds it."""
        sub = self.scores[mask]
        if self.ties.policy == "released":
            return _Ranking(sub, self.ties)
        position = np.cumsum(mask) - 1          # index of each kept item in the sub-list
        kept = self.order[mask[self.order]]
        return _Ranking(sub, self.ties, position[kept])

    def ap(self, relevant: np.ndarray, gt_len: int) -> float:
        """AP of ``relevant`` (in the list's own order) against ``gt_len`` relevant videos."""
        if not hasattr(self, "rank"):          # inverse permutation: where each item lands in the ranking
            self.rank = np.empty(self.n, dtype=np.int64)
            self.rank[self.order] = np.arange(self.n)
        positions = np.sort(self.rank[np.flatnonzero(relevant)])
        if self.ties.policy == "released":
            if positions.size:  # count the mixed groups all the same
                f, size, m, _ = _groups_of(self.first, self.n, positions)
                self.ties.mixed += int(np.count_nonzero((size > 1) & (m < size)))
            return float(np.sum(np.arange(1, positions.size + 1) / (positions + 1)) / gt_len)
        return _positions_ap(self.first, self.n, positions, gt_len, self.ties)


def _sorted_ap(s: np.ndarray, rel: np.ndarray, gt_len: int) -> float:
    """AP of a list sorted by descending score ``s``, each tie group at its expected value over orders."""
    return _positions_ap(_group_starts(s), s.size, np.flatnonzero(rel), gt_len)


# ------------------------------------------------------------------------------------ similarities as arrays
@dataclass
class _Lists:
    """Similarities as code arrays: ``names[code]`` ids, per query (dict order) target codes and scores."""

    codes: dict[str, int]
    names: list[str]
    queries: list[str]
    targets: list[np.ndarray]
    scores: list[np.ndarray]
    available: np.ndarray  # bool [len(names)]

    def mask(self, ids: Iterable[str]) -> np.ndarray:
        out = np.zeros(len(self.names), dtype=bool)
        codes = [self.codes[v] for v in ids if v in self.codes]
        out[codes] = True
        return out


def _strip(v: str, strip_mp4: bool) -> str:
    return v.removesuffix(".mp4") if strip_mp4 else v


def _as_lists(similarities: object, queries: list[str], database: list[str], available: Iterable[str] | None,
              strip_mp4: bool = False) -> _Lists:
    names = list(dict.fromkeys([*queries, *database]))
    codes = {v: i for i, v in enumerate(names)}
    if isinstance(similarities, Mapping):
        sim_queries, targets, scores, seen = [], [], [], set()
        previous_keys: list | None = None
        previous_codes = np.zeros(0, dtype=np.int64)
        for q, row in similarities.items():
            if not isinstance(q, str) or not isinstance(row, Mapping):
                raise TypeError("similarities must be {query_id: {target_id: score}} with string ids, got "
                                f"{type(q).__name__} -> {type(row).__name__}")
            q = _strip(q, strip_mp4)
            if q in seen:
                raise ValueError(f"similarities lists query {q!r} twice (with and without '.mp4')")
            seen.add(q)
            row_keys = list(row)
            if row_keys == previous_keys:  # the released loop fills every query's dict in the same order
                found = previous_codes
            else:
                keys = [_strip(t, strip_mp4) for t in row_keys] if strip_mp4 else row_keys
                if strip_mp4 and len(set(keys)) < len(keys):
                    twice = next(t for t in keys if keys.count(t) > 1)
                    raise ValueError(f"similarities[{q!r}] scores target {twice!r} twice (with and without "
                                     f"'.mp4'); keep one")
                found = list(map(codes.get, keys))
                if None in found:  # targets outside the annotation: new codes
                    for k, t in enumerate(keys):
                        if found[k] is None:
                            if not isinstance(t, str):
                                raise TypeError(f"similarities[{q!r}] must have string target ids, got {t!r}")
                            found[k] = codes.setdefault(t, len(names))
                            if found[k] == len(names):
                                names.append(t)
                found = np.asarray(found, dtype=np.int64)
                previous_keys, previous_codes = row_keys, found
            codes.setdefault(q, len(names))
            if codes[q] == len(names):
                names.append(q)
            kinds = set(map(type, row.values()))
            if any(issubclass(k, (str, bytes, bool, np.bool_)) for k in kinds):
                bad = next(k for k in kinds if issubclass(k, (str, bytes, bool, np.bool_)))
                raise TypeError(f"similarities[{q!r}] must map target ids to real-number scores, got "
                                f"{bad.__name__} values (parse strings and booleans before scoring)")
            try:
                values = np.fromiter(row.values(), dtype=np.float64, count=len(row))
            except (TypeError, ValueError):
                raise TypeError(f"similarities[{q!r}] must map target ids to real numbers") from None
            sim_queries.append(q)
            targets.append(found)
            scores.append(values)
        present = np.ones(len(names), dtype=bool)  # default: the protocol's ids and any other id scored
    else:
        matrix = _matrix(similarities, (len(queries), len(database)))
        sim_queries = list(queries)
        columns = np.array([codes[v] for v in database], dtype=np.int64)
        targets, scores = [columns] * len(queries), list(matrix)
        present = np.ones(len(names), dtype=bool)
    for q, s in zip(sim_queries, scores):
        if np.isnan(s).any():
            raise ValueError(f"similarities of query {q!r} contain NaN")
    lists = _Lists(codes, names, sim_queries, targets, scores, present)
    if available is not None:
        if isinstance(available, str):
            raise TypeError("available must be an iterable of ids, got a single string")
        lists.available = lists.mask({_strip(v, strip_mp4) for v in available})
    if not isinstance(similarities, Mapping):  # the released array path keeps only available targets
        lists.targets = [t[lists.available[t]] for t in lists.targets]
        lists.scores = [s[lists.available[columns]] for s in lists.scores]
    return lists


def _normalize_lists(lists: _Lists, queries: list[str], normalize: str | None, background: object, k: int,
                     strip_mp4: bool = False) -> None:
    """Each query's scored row of ``lists`` normalised in place (:func:`hapref.similarity.normalize_scores`)."""
    import torch

    from hapref.similarity.score_normalization import SCORE_NORMALIZATIONS, normalize_scores

    if normalize not in SCORE_NORMALIZATIONS:
        raise ValueError(f"normalize must be one of {SCORE_NORMALIZATIONS}, got {normalize!r}")
    if normalize is None:
        if background is not None:
            raise ValueError("background is only used with normalize='background'")
        return
    if normalize == "background":
        if background is None:
            raise ValueError("normalize='background' needs background: {query_id: scores against the background "
                             "set} or a float [Q, B] array aligned with the dataset's queries")
        if isinstance(background, Mapping):
            rows = {_strip(q, strip_mp4): (list(r.values()) if isinstance(r, Mapping) else list(r))
                    for q, r in background.items()}
        else:
            matrix = np.asarray(background.detach().cpu() if isinstance(background, torch.Tensor) else background)
            if matrix.ndim != 2 or matrix.shape[0] != len(queries):
                raise ValueError(f"background must be [Q, B] with Q = {len(queries)} (the dataset's queries), got "
                                 f"shape {matrix.shape}")
            rows = dict(zip(queries, matrix))
    for i, (q, row) in enumerate(zip(lists.queries, lists.scores)):
        if len(row) == 0:
            continue
        bg = None
        if normalize == "background":
            if q not in rows:
                raise ValueError(f"background has no scores for query {q!r}")
            bg = torch.as_tensor(np.asarray(rows[q], dtype=np.float64))[None]
        lists.scores[i] = normalize_scores(torch.from_numpy(np.asarray(row, dtype=np.float64))[None], normalize,
                                           bg, k)[0].numpy()


def _matrix(similarities: object, shape: tuple[int, int]) -> np.ndarray:
    try:
        import torch
        if isinstance(similarities, torch.Tensor):
            similarities = similarities.detach().cpu().double().numpy()
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    if not isinstance(similarities, np.ndarray) or similarities.ndim != 2 or similarities.dtype.kind != "f":
        raise TypeError("similarities must be {query_id: {target_id: score}} or a float [Q, N] tensor/array, got "
                        f"{type(similarities).__name__}")
    if similarities.shape != shape:
        raise ValueError(f"similarities must have shape {shape} (the dataset's queries x database as hapref's "
                         f"loader orders them), got {tuple(similarities.shape)}")
    return similarities.astype(np.float64, copy=False)


# ------------------------------------------------------------------------------------------------ protocols
def _fivr(lists: _Lists, fivr: loaders.FIVRFile, version: str, easy: set[str], ties: _Ties) -> dict[str, float]:
    queries = set(fivr.queries[version])
    all_db = lists.available & lists.mask(fivr.database[version])
    easy_mask = lists.mask(easy)
    settings = {"": all_db, "_h": all_db & ~easy_mask}
    maps: dict[str, list[float]] = {task + ext: [] for task in FIVR_TASKS for ext in settings}
    gt_total = {task + ext: 0 for task in FIVR_TASKS for ext in settings}
    pooled_s, pooled_hard, pooled_rel = [], [], {task: [] for task in FIVR_TASKS}
    for q, targets, scores in zip(lists.queries, lists.targets, lists.scores):
        if q not in queries:
            continue
        qcode = lists.codes[q]
        keep = all_db[targets] & (targets != qcode)
        t, s = targets[keep], scores[keep]      # the released list: the dict's order
        hard = ~easy_mask[t]
        full = _Ranking(s, ties)
        rankings = {"": full, "_h": full.subset(hard)}
        pooled_s.append(s)
        pooled_hard.append(hard)
        labelled = fivr.labels.get(q, {})
        for task, wanted in FIVR_TASKS.items():
            codes = np.array([lists.codes[v] for v, labels in labelled.items()
                              if v != q and v in lists.codes and not wanted.isdisjoint(labels)], dtype=np.int64)
            relevant = np.zeros(len(lists.names), dtype=bool)
            relevant[codes] = True
            rel = relevant[t]
            pooled_rel[task].append(rel)
            for ext, r in (("", rel), ("_h", rel[hard])):
                gt = int(settings[ext][codes].sum())
                gt_total[task + ext] += gt
                if gt:
                    maps[task + ext].append(rankings[ext].ap(r, gt))
    results: dict[str, float] = {}
    if not pooled_s:
        raise ValueError(f"similarities contain no FIVR-{version.upper()} query")
    s = np.concatenate(pooled_s)
    hard = np.concatenate(pooled_hard)
    full = _Ranking(s, ties)
    rankings = {"": full, "_h": full.subset(hard)}
    for task in FIVR_TASKS:
        rel = np.concatenate(pooled_rel[task])
        for ext, r in (("", rel), ("_h", rel[hard])):
            values = maps[task + ext]
            if not values:
                raise ValueError(f"no query of FIVR-{version.upper()} has a {task}{ext} relevant video among "
                                 "the available ones: mAP is undefined")
            results[task + ext] = float(np.mean(values))
            key = task[:-1] + "D" + ext
            if gt_total[task + ext] == 0:
                raise ValueError(f"{key}: no relevant video among the available ones, μAP is undefined")
            results[key] = rankings[ext].ap(r, gt_total[task + ext])
    return {key: results[key] for key in RESULT_KEYS["fivr-5k"]}


def _pooled_ap(pooled: list[tuple[np.ndarray, np.ndarray]], gt_len: int | None, key: str, ties: _Ties) -> float:
    """μAP of every query's (scores, relevance) pooled into one list in the given order (the released one),
    ranked by descending score under the tie policy; ``gt_len`` None = the relevant pairs in the list."""
    s = np.concatenate([p[0] for p in pooled])
    rel = np.concatenate([p[1] for p in pooled])
    gt_len = int(rel.sum()) if gt_len is None else gt_len
    if gt_len == 0:
        raise ValueError(f"{key}: no relevant video among the available ones, μAP is undefined")
    return _Ranking(s, ties).ap(rel, gt_len)


def _evve(lists: _Lists, queries: list[str], events: dict[str, tuple[set, set, set]], ties: _Ties
          ) -> tuple[dict[str, float], dict[str, float]]:
    if not lists.available.any():
        raise ValueError("available must contain at least one id")
    event_of = {q: e for e, (query_set, _, _) in events.items() for q in query_set}
    aps, pooled, gt_total = [], [], 0
    per_event: dict[str, list[float]] = {e: [] for e in events}
    by_query = dict(zip(lists.queries, zip(lists.targets, lists.scores)))
    for q in queries:
        if q not in by_query:
            continue
        if q not in event_of:
            raise ValueError(f"EVVE query {q!r} belongs to no event of the annotation file")
        targets, scores = by_query[q]
        positives = lists.mask(events[event_of[q]][1]) & lists.available
        n_pos = int(positives.sum())
        keep = lists.available[targets]   # ranks count only available targets
        t, s = targets[keep], scores[keep]
        order = np.argsort(-s, kind="stable")  # Python's stable sorted(..., reverse=True)
        ranks = np.flatnonzero(positives[t[order]])
        if not n_pos or not ranks.size:
            ap = 0.0
        elif ties.policy == "released":
            first = _group_starts(s[order])
            _positions_ap(first, s.size, ranks, n_pos, ties)   # counts the mixed groups
            n = np.arange(ranks.size)
            before = np.where(ranks == 0, 1.0, n / np.maximum(ranks, 1))
            ap = float(np.sum((before + (n + 1) / (ranks + 1)) / 2.0) / n_pos)
        else:
            ap = _positions_ap(_group_starts(s[order]), s.size, ranks, n_pos, ties, trapezoid=True)
        aps.append(ap)
        per_event[event_of[q]].append(ap)
        pooled.append((s, positives[t]))
        gt_total += n_pos
    if not aps:
        raise ValueError("similarities contain no EVVE query")
    counted = {e: len([q for q in query_set if q in lists.codes and lists.available[lists.codes[q]]])
               for e, (query_set, _, _) in events.items()}
    event_map = {e: float(np.sum(per_event[e]) / counted[e]) for e in sorted(events) if counted[e]}
    return ({"EVVE_mAP": float(np.mean(aps)), "EVVE_uAP": _pooled_ap(pooled, gt_total, "EVVE_uAP", ties)},
            event_map)


def _cc_web(lists: _Lists, cc: loaders.CCWebFile, ties: _Ties) -> dict[str, float]:
    by_query = dict(zip(lists.queries, zip(lists.targets, lists.scores)))
    # index number of every code (-1: not in the index, skipped as the released walk does)
    number = np.full(len(lists.names), -1, dtype=np.int64)
    for name, i in cc.index.items():
        if name in lists.codes:
            number[lists.codes[name]] = i
    results = {"mAP": 0.0, "mAP_star": 0.0, "mAP_c": 0.0, "mAP_c_star": 0.0}
    for q, labels, excluded in zip(cc.queries, cc.ground_truth, cc.excluded):
        if q not in by_query:
            continue
        targets, scores = by_query[q]
        order = np.argsort(-scores, kind="stable")   # Python's stable sorted(..., reverse=True)
        ranked, ranked_s = number[targets[order]], scores[order]
        indexed = ranked >= 0
        ranked, ranked_s = ranked[indexed], ranked_s[indexed]
        annotated = np.array([i in labels for i in ranked.tolist()], dtype=bool)
        positive = np.array([i in labels and labels[i] in CC_WEB_POSITIVE for i in ranked.tolist()], dtype=bool)
        is_excluded = np.array([i in excluded for i in ranked.tolist()], dtype=bool)
        for key, all_videos, clean in (("mAP", False, False), ("mAP_star", True, False),
                                       ("mAP_c", False, True), ("mAP_c_star", True, True)):
            counted = (all_videos | annotated) & ~(clean & is_excluded)
            hits = positive[counted]
            total = sum(1 for i, label in labels.items()
                        if label in CC_WEB_POSITIVE and not (clean and i in excluded))
            if total == 0:
                raise ValueError(f"CC_WEB_VIDEO query {q!r} has no positive video: AP is undefined")
            first = _group_starts(ranked_s[counted])
            if ties.policy == "released":
                _positions_ap(first, hits.size, np.flatnonzero(hits), total, ties)  # counts the mixed groups
                results[key] += _released_ap(hits, total)
            else:
                results[key] += _positions_ap(first, hits.size, np.flatnonzero(hits), total, ties)
    n = len(set(cc.queries) & set(by_query))
    if n == 0:
        raise ValueError("similarities contain no CC_WEB_VIDEO query")
    return {key: value / n for key, value in results.items()}


def _svd(lists: _Lists, pairs: dict[str, dict[str, int]], unlabeled: list[str], ties: _Ties) -> dict[str, float]:
    from sklearn.metrics import average_precision_score
    by_query = dict(zip(lists.queries, zip(lists.targets, lists.scores)))
    extra = [v for v in dict.fromkeys(unlabeled) if v in lists.codes and lists.available[lists.codes[v]]]
    aps, pooled, gt_total = [], [], 0
    for q, labelled in pairs.items():
        if q not in by_query:
            continue
        targets, scores = by_query[q]
        score_of = dict(zip(targets.tolist(), scores.tolist()))
        ids = [c for c in labelled if lists.available[lists.codes[c]]] + extra
        if not ids:
            continue
        y_all = [labelled.get(c, 0) for c in ids[:len(ids) - len(extra)]] + [0] * len(extra)
        n_pos = sum(1 for v in y_all if v == 1)     # a positive without a score is never retrieved
        present = [k for k, c in enumerate(ids) if lists.codes[c] in score_of]
        y = np.array([y_all[k] for k in present], dtype=np.int64)
        s = np.array([score_of[lists.codes[ids[k]]] for k in present], dtype=np.float64)
        found = int((y == 1).sum())
        gt_total += n_pos
        ranking = _Ranking(s, ties)
        if found == 0:
            aps.append(0.0)   # scikit-learn's value without a positive (it warns)
        elif ties.policy == "released":
            ranking.ap(y == 1, n_pos)   # counts the mixed groups
            aps.append(float(average_precision_score(y, s)) * found / n_pos)
        else:
            aps.append(ranking.ap(y == 1, n_pos))
        pooled.append((s, y == 1))
    if not aps:
        raise ValueError("similarities contain no SVD query with an available labelled video")
    return {"mAP": float(np.mean(aps)), "uAP": _pooled_ap(pooled, gt_total, "SVD uAP", ties)}


def _vcdb(lists: _Lists, queries: list[str], positives: dict[str, set[str]], ties: _Ties) -> dict[str, float]:
    by_query = dict(zip(lists.queries, zip(lists.targets, lists.scores)))
    aps, pooled, gt_total = [], [], 0
    for q in queries:
        if q not in by_query:
            continue
        targets, scores = by_query[q]
        gt = lists.mask(positives.get(q, ())) & lists.available
        keep = lists.available[targets] & (targets != lists.codes[q])
        s, rel = scores[keep], gt[targets[keep]]
        n_gt = int(gt.sum())
        gt_total += n_gt
        if n_gt:
            aps.append(_Ranking(s, ties).ap(rel, n_gt))
        pooled.append((s, rel))
    if not aps:
        raise ValueError("no VCDB query in similarities has an available copy: mAP is undefined")
    return {"VCDB_mAP": float(np.mean(aps)), "VCDB_uAP": _pooled_ap(pooled, gt_total, "VCDB_uAP", ties)}


def _coverage(lists: _Lists, queries: Iterable[str], database: Iterable[str], declared: bool,
              expected: Mapping[str, Iterable[str]] | None = None) -> Coverage:
    """Queries, database videos and pairs scored, against the protocol (``expected``: per-query targets
    where they are not the whole database, SVD)."""
    queries = list(dict.fromkeys(queries))
    db_mask = lists.mask(database)
    counted = db_mask & lists.available
    by_query = dict(zip(lists.queries, lists.targets))
    seen = np.zeros(len(lists.names), dtype=bool)
    pairs = pairs_total = missing_query_pairs = 0
    n_counted = int(counted.sum())
    for q in queries:
        qcode = lists.codes.get(q, -1)
        if expected is None:
            want, n_want = counted, n_counted - int(qcode >= 0 and counted[qcode])
        else:
            want = lists.mask(expected.get(q, ())) & lists.available
            if qcode >= 0:
                want[qcode] = False
            n_want = int(want.sum())
        pairs_total += n_want
        targets = by_query.get(q)
        if targets is None:                 # not scored: left out of every mAP and μAP
            missing_query_pairs += n_want
            continue
        hit = targets[want[targets] & (targets != qcode)]   # a dict's targets are distinct
        seen[hit] = True
        pairs += int(hit.size)
    return Coverage(queries=sum(q in by_query for q in queries), queries_total=len(queries),
                    database=int((seen & db_mask).sum()), database_total=int(db_mask.sum()),
                    counted=n_counted, pairs=pairs, pairs_total=pairs_total,
                    basis="available" if declared else "protocol", missing_query_pairs=missing_query_pairs)


# ---------------------------------------------------------------------------------------------------- public
def dataset_ids(dataset: str, root: str | os.PathLike | None = None, unlabeled: Iterable[str] | None = None,
                ) -> tuple[list[str], list[str]]:
    """The queries and database of ``dataset`` in the order a ``[Q, N]`` similarity tensor must follow.

    Args:
        dataset: a name of :data:`DATASETS`.
        root: annotation root (see :func:`annotation_root`).
        unlabeled: SVD only, the unlabeled distractor ids (they join SVD's database).

    Returns:
        ``(queries, database)``, lists of ids (SVD ids without ``.mp4``).

    Examples:
        >>> import tempfile
        >>> from hapref.evaluation.fixtures import write_fixtures
        >>> root = write_fixtures(tempfile.mkdtemp())
        >>> queries, database = dataset_ids("fivr-5k", root)
        >>> queries == sorted(queries), len(queries)
        (True, 6)
    """
    ann = _annotations(dataset, annotation_root(root), unlabeled)
    return ann.queries, ann.database


def _check_dataset(dataset: object) -> str:
    if not isinstance(dataset, str) or dataset.lower() not in DATASETS:
        raise ValueError(f"dataset must be one of {sorted(DATASETS)}, got {dataset!r}")
    return dataset.lower()


def _annotations(dataset: str, root: Path, unlabeled: Iterable[str] | None = None) -> loaders.RetrievalAnnotations:
    dataset = _check_dataset(dataset)
    folder = DATASETS[dataset]
    path = _file(root, folder, ANNOTATIONS[folder][0].filename)
    if dataset.startswith("fivr"):
        return loaders.load_fivr(path, dataset.removeprefix("fivr-"))
    if dataset == "svd":
        ann = loaders.load_svd(path)
        extra = [v.removesuffix(".mp4") for v in unlabeled or ()]
        ann.database = sorted(set(ann.database) | set(extra))
        return ann
    return {"evve": loaders.load_evve, "cc_web_video": loaders.load_cc_web_video,
            "vcdb": loaders.load_vcdb}[dataset](path)


def evaluate(dataset: str, similarities: object, root: str | os.PathLike | None = None,
             available: Iterable[str] | None = None, *, unlabeled: Iterable[str] | None = None,
             ties: str = "expected", strict: bool = False, normalize: str | None = None,
             background: object = None, background_k: int = 10) -> Results:
    """Evaluate similarities with a benchmark's published protocol; returns the released evaluator's numbers.

    Implements the protocols of the module docstring (S2VS / HAP-VR evaluation code, mAP and μAP as in
    HAP-VR Sec. 4.1) on the annotation files at ``<root>/annotations/<name>/``.

    Args:
        dataset: ``"fivr-5k"``, ``"fivr-200k"``, ``"evve"``, ``"svd"``, ``"cc_web_video"`` or ``"vcdb"``, in
            any case (S2VS's ``FIVR-5K`` too) (TCA's ``vcdb.pickle``: queries = its 528 core videos, positives =
            copy pairs, database = core videos + ``negs``; S2VS's VCDB protocol on that layout).
        similarities: ``{query_id: {target_id: score}}`` (the released format; order of each inner dict =
            the released order of tied targets, see ``ties``), or a float tensor/array ``[Q, N]`` aligned with
            :func:`dataset_ids` (queries x database as hapref's loader orders them). SVD ids with or without
            ``.mp4``.
        root: the annotation root (default ``$HAPREF_ANNOTATIONS``, see :func:`annotation_root`); the folder
            holding ``annotations/`` or the ``annotations`` folder itself; only read.
        available: a deliberate subset: the ids whose features exist (S2VS ``evaluation.py``'s ``all_db``),
            filtered as each released evaluator does (FIVR intersects it with its database, CC_WEB_VIDEO
            applies it only to tensors). Default: the protocol's whole database (the released classes'
            default), plus any other id ``similarities`` scores; a video the dict lacks is never retrieved.
        unlabeled: SVD only, the unlabeled distractor ids (``unlabeled-data-id``); they join every query's
            list as negatives. Without them SVD is the labelled-pairs-only variant.
        ties: ``"expected"`` (default, order-independent: the expected value over all orders of tied
            scores) or ``"released"`` (the released evaluators' order); see the module docstring.
        strict: refuse an incomplete evaluation, a declared subset included (a ``ValueError`` carrying the
            coverage warning's text) instead of warning; ``python -m hapref.evaluation --strict`` exits with
            status 2 then. The warning for a file with gaps (queries or pairs without a score) names it.
        normalize: score normalisation of each query's row before ranking (not in the released evaluators):
            ``None`` (default), ``"zscore"`` (the per-query z-score over the videos the query scores,
            :func:`hapref.similarity.zscore_rows`) or ``"background"`` (minus the mean of the query's
            ``background_k`` highest scores against a background set, :func:`hapref.similarity.background_normalize`).
            Per-query metrics (mAP) are unchanged; pooled ones (μAP) change.
        background: with ``normalize="background"``: ``{query_id: scores}`` (a sequence or ``{video_id: score}``)
            or a float ``[Q, B]`` array aligned with :func:`dataset_ids`'s queries: each query's scores against
            ``B >= background_k`` videos unrelated to every query.

    Where the released code has no defined result, hapref chooses: a VCDB query without an available positive
    is skipped (released: NaN), an SVD query missing from ``similarities`` is skipped (released: KeyError), an
    SVD pair missing from it is never retrieved (released: KeyError), and a metric with no relevant available
    video at all raises ValueError.

    Returns:
        :class:`Results`, a dict ``{key: value}`` with the released keys: FIVR ``DSVR CSVR ISVR DSVD CSVD
        ISVD`` and each with ``_h`` (``fivr_easy_duplicates.txt`` removed); EVVE ``EVVE_mAP EVVE_uAP``;
        CC_WEB_VIDEO ``mAP mAP_star mAP_c mAP_c_star``; SVD ``mAP uAP``; VCDB ``VCDB_mAP VCDB_uAP``; with
        ``.coverage``, ``.ties``, ``.tied`` and ``.details`` (EVVE per event). Warns with
        :class:`CoverageWarning` when the coverage is incomplete (raises with ``strict=True``).

    Raises:
        ValueError: unknown dataset or tie policy, wrong tensor shape, NaN scores, a malformed annotation
            file (named), a metric without any relevant available video, or (``strict=True``) an incomplete
            coverage.
        TypeError: similarities of another form.
        FileNotFoundError: the annotation file is not under ``root``.

    Examples:
        >>> import tempfile
        >>> import numpy as np
        >>> from hapref.evaluation.fixtures import write_fixtures
        >>> root = write_fixtures(tempfile.mkdtemp())
        >>> queries, database = dataset_ids("evve", root)
        >>> perfect = evaluate("evve", np.ones((len(queries), len(database))), root)  # every score tied
        >>> sorted(perfect), perfect.coverage.complete, perfect.tied > 0
        (['EVVE_mAP', 'EVVE_uAP'], True, True)
        >>> one_query = {queries[0]: {v: 1.0 for v in database}}
        >>> evaluate("evve", one_query, root, strict=True)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: evve: incomplete evaluation: ... of ... queries have no scores: ... (strict=True refuses it)
    """
    dataset = _check_dataset(dataset)
    policy = _Ties(ties)
    root = annotation_root(root)
    folder = DATASETS[dataset]
    path = _file(root, folder, ANNOTATIONS[folder][0].filename)
    unlabeled_ids = [v.removesuffix(".mp4") for v in unlabeled or ()]
    declared = available is not None
    details: dict = {}
    if dataset.startswith("fivr"):
        version = dataset.removeprefix("fivr-")
        fivr = loaders.read_fivr(path)
        easy = set(loaders.read_id_list(_file(root, folder, "fivr_easy_duplicates.txt")))
        lists = _as_lists(similarities, fivr.queries[version], fivr.database[version], available)
        _normalize_lists(lists, fivr.queries[version], normalize, background, background_k)
        results = _fivr(lists, fivr, version, easy, policy)
        coverage = _coverage(lists, fivr.queries[version], fivr.database[version], declared)
    elif dataset == "evve":
        queries, database, events = loaders.read_evve(path)
        lists = _as_lists(similarities, queries, database, available)
        _normalize_lists(lists, queries, normalize, background, background_k)
        results, details["per_event"] = _evve(lists, queries, events, policy)
        coverage = _coverage(lists, queries, database, declared)
    elif dataset == "cc_web_video":
        cc = loaders.read_cc_web_video(path)
        lists = _as_lists(similarities, cc.queries, sorted(cc.index), available)
        _normalize_lists(lists, cc.queries, normalize, background, background_k)
        results = _cc_web(lists, cc, policy)
        coverage = _coverage(lists, cc.queries, sorted(cc.index), declared)
    elif dataset == "svd":
        pairs = loaders.read_svd(path)
        database = sorted({c for targets in pairs.values() for c in targets} | set(unlabeled_ids))
        lists = _as_lists(similarities, sorted(pairs), database, available, strip_mp4=True)
        _normalize_lists(lists, sorted(pairs), normalize, background, background_k, strip_mp4=True)
        results = _svd(lists, pairs, unlabeled_ids, policy)
        coverage = _coverage(lists, sorted(pairs), database, declared,
                             {q: [*labelled, *unlabeled_ids] for q, labelled in pairs.items()})
    else:
        queries, positives, negs = loaders.read_vcdb(path)
        database = list(dict.fromkeys([*queries, *negs]))
        lists = _as_lists(similarities, queries, database, available)
        _normalize_lists(lists, queries, normalize, background, background_k)
        results = _vcdb(lists, queries, positives, policy)
        coverage = _coverage(lists, queries, database, declared)
    if any(not math.isfinite(v) for v in results.values()):  # pragma: no cover - guarded above
        raise ValueError(f"non-finite result {results}")
    out = Results(results)
    out.coverage, out.ties, out.tied, out.details = coverage, policy.policy, policy.mixed, details
    message = coverage.warning()
    if message is not None:
        if strict:
            raise ValueError(f"{dataset}: {message} (strict=True refuses it)")
        # a file with gaps names the way to refuse it; a declared subset's warning already says what it is
        gaps = coverage.queries < coverage.queries_total or coverage.pairs < coverage.pairs_total
        hint = "; strict=True (--strict on the command line) refuses an incomplete evaluation" if gaps else ""
        warnings.warn(f"{dataset}: {message}{hint}", CoverageWarning, stacklevel=2)
    return out
