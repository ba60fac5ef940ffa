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

Ties. EVVE, CC_WEB_VIDEO and SVD's mAP define their order: EVVE and CC_WEB_VIDEO sort with Python's stable
``sorted``, so tied targets keep the order of the query's similarity dict (the database order for a
tensor), which :func:`evaluate` reproduces; scikit-learn groups tied scores. FIVR, VCDB and every μAP sort
with numpy's default (unstable) ``argsort``, so their value under ties depends on the machine. hapref's
policy there: **the expected value over all orders of the tied items**, each order equally likely. For a
group of :math:`L` equal scores at 0-based positions :math:`f, \dots, f+L-1` holding :math:`m` relevant
items, preceded by :math:`h` relevant items, a relevant item is equally likely at every position
:math:`i` of the group and then has on average :math:`(i-f)\frac{m-1}{L-1}` of the other relevant items
before it, so the group adds

.. math:: \frac{1}{G}\,\frac{m}{L}\sum_{i=f}^{f+L-1}\frac{h + 1 + (i-f)\frac{m-1}{L-1}}{i+1}.

This is deterministic, independent of the stored order, and equal to the released value whenever that
value is defined: on tie-free scores, and when every tied group is all relevant or all irrelevant (then
every order gives the same AP). (:mod:`hapref.metrics` and scikit-learn instead give every relevant item of
a group the precision at its end, which differs from every order's AP when a group holds several relevant
items.)
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


def annotation_root(root: str | os.PathLike | None = None) -> Path:
    """Where the annotation files are: ``root``, else ``$HAPREF_ANNOTATIONS``, else ``~/.cache/hapref``.

    Files sit at ``<root>/annotations/<name>/<file>``. This root is only read; it is kept apart from
    ``$HAPREF_DATA`` (hapref's writable cache of generated data).

    Examples:
        >>> annotation_root("/data/real").as_posix()
        '/data/real'
    """
    if root is None:
        root = os.environ.get("HAPREF_ANNOTATIONS") or Path.home() / ".cache" / "hapref"
    return Path(root).expanduser()


def _file(root: Path, name: str, filename: str) -> Path:
    path = root / "annotations" / name / filename
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: pass root= (or set $HAPREF_ANNOTATIONS) to the folder that "
                                f"holds annotations/{name}/, e.g. after `python data_scripts/download.py "
                                f"annotations {name} --root DIR`")
    return path


# ----------------------------------------------------------------------------------------------- AP primitive
def ranked_ap(scores: np.ndarray, relevant: np.ndarray, gt_len: int) -> float:
    r"""Non-interpolated AP of one list against ``gt_len`` relevant videos; ties: expected value over orders.

    :math:`\mathrm{AP} = \frac{1}{G}\sum_k P@k\,\mathrm{rel}_k` over the list sorted by descending score
    (FIVR/VCDB/μAP of the released evaluators, HAP-VR Sec. 4.1); tied scores count with the expected value
    over all their orders (the module's tie policy).

    Args:
        scores: float ``[M]``.
        relevant: bool ``[M]``.
        gt_len: number of relevant videos in the ground truth (at least the relevant items in the list).

    Returns:
        AP as a Python float.

    Examples:
        >>> round(ranked_ap(np.array([0.9, 0.8, 0.1]), np.array([True, False, True]), gt_len=3), 6)  # (1+2/3)/3
        0.555556
        >>> ranked_ap(np.array([0.5, 0.5]), np.array([True, False]), gt_len=1)  # orders give 1 or 1/2
        0.75
    """
    scores, relevant = np.asarray(scores, dtype=np.float64), np.asarray(relevant, dtype=bool)
    if scores.shape != relevant.shape or scores.ndim != 1:
        raise ValueError(f"scores and relevant must be 1-D of equal length, got {scores.shape}, {relevant.shape}")
    if np.isnan(scores).any():
        raise ValueError("scores must not contain NaN")
    n_relevant = int(relevant.sum())
    if gt_len < n_relevant or gt_len <= 0:
        raise ValueError(f"gt_len must be positive and at least the {n_relevant} relevant items, got {gt_len}")
    order = np.argsort(-scores, kind="stable")
    return _sorted_ap(scores[order], relevant[order], gt_len)


def _group_starts(s: np.ndarray) -> np.ndarray:
    """0-based start of every group of equal scores in ``s`` (sorted by descending score)."""
    is_first = np.ones(s.size, dtype=bool)
    is_first[1:] = s[1:] != s[:-1]
    return np.flatnonzero(is_first)


def _positions_ap(first: np.ndarray, n: int, positions: np.ndarray, gt_len: int) -> float:
    """AP from the 0-based sorted ``positions`` of the relevant items in a list of ``n`` whose groups of equal
    scores start at ``first``: each group with ``m`` of its ``L`` items relevant and ``h`` relevant items ahead
    adds ``(m/L) Σ_i (h + 1 + (i - f)(m - 1)/(L - 1)) / (i + 1)`` (the expected value over tie orders), summed in
    closed form with ``Σ_i 1/(i+1)`` over the group. O(relevant · log groups), whatever ``n``."""
    if positions.size == 0:
        return 0.0
    group = np.searchsorted(first, positions, side="right") - 1
    groups, h, m = np.unique(group, return_index=True, return_counts=True)
    f = first[groups]
    nxt = groups + 1
    size = np.where(nxt < first.size, first[np.minimum(nxt, first.size - 1)], n) - f
    harmonic = 1.0 / (f + 1)  # Σ_{i=f}^{f+L-1} 1/(i+1), exact for the usual singleton groups
    tied = np.flatnonzero(size > 1)
    if tied.size:
        for k in tied:
            harmonic[k] = np.sum(1.0 / np.arange(f[k] + 1, f[k] + size[k] + 1))
    slope = np.where(size > 1, (m - 1) / np.maximum(size - 1, 1), 0.0)
    total = (m / size) * ((h + 1) * harmonic + slope * (size - (f + 1) * harmonic))
    return float(np.sum(total) / gt_len)


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
            try:
                values = np.fromiter(row.values(), dtype=np.float64, count=len(row))
            except (TypeError, ValueError):
                raise TypeError(f"similarities[{q!r}] must map target ids to real numbers") from None
            sim_queries.append(q)
            targets.append(found)
            scores.append(values)
        present = np.zeros(len(names), dtype=bool)  # the ids in similarities: the default available set
        for q, t in zip(sim_queries, targets):
            present[codes[q]] = True
            present[t] = True
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
def _fivr(lists: _Lists, fivr: loaders.FIVRFile, version: str, easy: set[str]) -> dict[str, float]:
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
        t, s = targets[keep], scores[keep]
        order = np.argsort(-s)  # any order of ties: the tie policy does not depend on it
        t, s = t[order], s[order]
        hard = ~easy_mask[t]
        s_hard = s[hard]
        first, first_hard = _group_starts(s), _group_starts(s_hard)
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
            for ext, db, fst, r in (("", settings[""], first, rel), ("_h", settings["_h"], first_hard, rel[hard])):
                gt = int(db[codes].sum())
                gt_total[task + ext] += gt
                if gt:
                    maps[task + ext].append(_positions_ap(fst, r.size, np.flatnonzero(r), gt))
    results: dict[str, float] = {}
    if not pooled_s:
        raise ValueError(f"similarities contain no FIVR-{version.upper()} query")
    s = np.concatenate(pooled_s)
    order = np.argsort(-s)
    s = s[order]
    hard = np.concatenate(pooled_hard)[order]
    s_hard = s[hard]
    first, first_hard = _group_starts(s), _group_starts(s_hard)
    for task in FIVR_TASKS:
        rel = np.concatenate(pooled_rel[task])[order]
        for ext, fst, n, r in (("", first, s.size, rel), ("_h", first_hard, s_hard.size, rel[hard])):
            values = maps[task + ext]
            if not values:
                raise ValueError(f"no query of FIVR-{version.upper()} has a {task}{ext} relevant video among "
                                 "the available ones: mAP is undefined")
            results[task + ext] = float(np.mean(values))
            key = task[:-1] + "D" + ext
            if gt_total[task + ext] == 0:
                raise ValueError(f"{key}: no relevant video among the available ones, μAP is undefined")
            results[key] = _positions_ap(fst, n, np.flatnonzero(r), gt_total[task + ext])
    return {key: results[key] for key in RESULT_KEYS["fivr-5k"]}


def _pooled_ap(pooled: list[tuple[np.ndarray, np.ndarray]], gt_len: int | None, key: str) -> float:
    """μAP of every query's (scores, relevance) pooled into one list, ranked by descending score (stable order
    before the tie policy of :func:`_sorted_ap`); ``gt_len`` None = the relevant pairs in the list."""
    s = np.concatenate([p[0] for p in pooled])
    order = np.argsort(-s, kind="stable")
    rel = np.concatenate([p[1] for p in pooled])[order]
    gt_len = int(rel.sum()) if gt_len is None else gt_len
    if gt_len == 0:
        raise ValueError(f"{key}: no relevant video among the available ones, μAP is undefined")
    return _sorted_ap(s[order], rel, gt_len)


def _evve(lists: _Lists, queries: list[str], events: dict[str, tuple[set, set, set]]) -> dict[str, float]:
    if not lists.available.any():
        raise ValueError("available must contain at least one id")
    event_of = {q: e for e, (query_set, _, _) in events.items() for q in query_set}
    aps, pooled, gt_total = [], [], 0
    by_query = dict(zip(lists.queries, zip(lists.targets, lists.scores)))
    for q in queries:
        if q not in by_query:
            continue
        if q not in event_of:
            raise ValueError(f"EVVE query {q!r} belongs to no event of the annotation file")
        targets, scores = by_query[q]
        positives = lists.mask(events[event_of[q]][1]) & lists.available
        n_pos = int(positives.sum())
        order = np.argsort(-scores, kind="stable")  # Python's stable sorted(..., reverse=True)
        ranked = targets[order]
        ranked = ranked[lists.available[ranked]]  # ranks count only available targets
        ranks = np.flatnonzero(positives[ranked])
        if n_pos and ranks.size:
            n = np.arange(ranks.size)
            before = np.where(ranks == 0, 1.0, n / np.maximum(ranks, 1))
            aps.append(float(np.sum((before + (n + 1) / (ranks + 1)) / 2.0) / n_pos))
        else:
            aps.append(0.0)
        keep = lists.available[targets]
        pooled.append((scores[keep], positives[targets[keep]]))
        gt_total += n_pos
    if not aps:
        raise ValueError("similarities contain no EVVE query")
    return {"EVVE_mAP": float(np.mean(aps)), "EVVE_uAP": _pooled_ap(pooled, gt_total, "EVVE_uAP")}


def _cc_web(lists: _Lists, cc: loaders.CCWebFile) -> dict[str, float]:
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
        ranked = number[targets[np.argsort(-scores, kind="stable")]]
        ranked = ranked[ranked >= 0]
        annotated = np.array([i in labels for i in ranked.tolist()], dtype=bool)
        positive = np.array([i in labels and labels[i] in CC_WEB_POSITIVE for i in ranked.tolist()], dtype=bool)
        is_excluded = np.array([i in excluded for i in ranked.tolist()], dtype=bool)
        for key, all_videos, clean in (("mAP", False, False), ("mAP_star", True, False),
                                       ("mAP_c", False, True), ("mAP_c_star", True, True)):
            counted = (all_videos | annotated) & ~(clean & is_excluded)
            hits = positive[counted]
            ri = np.arange(1, hits.size + 1)
            total = sum(1 for i, label in labels.items()
                        if label in CC_WEB_POSITIVE and not (clean and i in excluded))
            if total == 0:
                raise ValueError(f"CC_WEB_VIDEO query {q!r} has no positive video: AP is undefined")
            results[key] += float(np.sum(np.cumsum(hits)[hits] / ri[hits])) / total
    n = len(set(cc.queries) & set(by_query))
    if n == 0:
        raise ValueError("similarities contain no CC_WEB_VIDEO query")
    return {key: value / n for key, value in results.items()}


def _svd(lists: _Lists, pairs: dict[str, dict[str, int]], unlabeled: list[str]) -> dict[str, float]:
    from sklearn.metrics import average_precision_score
    by_query = dict(zip(lists.queries, zip(lists.targets, lists.scores)))
    extra = [v for v in dict.fromkeys(unlabeled) if v in lists.codes and lists.available[lists.codes[v]]]
    aps, pooled = [], []
    for q, labelled in pairs.items():
        if q not in by_query:
            continue
        targets, scores = by_query[q]
        score_of = dict(zip(targets.tolist(), scores.tolist()))
        ids = [c for c in labelled if lists.available[lists.codes[c]]] + extra
        missing = [c for c in ids if lists.codes[c] not in score_of]
        if missing:
            raise ValueError(f"similarities[{q!r}] has no score for the available videos {missing[:3]} "
                             f"({len(missing)} in all)")
        if not ids:
            continue
        y = np.array([labelled.get(c, 0) for c in ids[:len(ids) - len(extra)]] + [0] * len(extra))
        s = np.array([score_of[lists.codes[c]] for c in ids])
        with warnings.catch_warnings():  # a query without positives has AP 0 (scikit-learn warns)
            warnings.simplefilter("ignore", UserWarning)
            aps.append(float(average_precision_score(y, s)))
        pooled.append((s, y == 1))
    if not aps:
        raise ValueError("similarities contain no SVD query with an available labelled video")
    return {"mAP": float(np.mean(aps)), "uAP": _pooled_ap(pooled, None, "SVD uAP")}


def _vcdb(lists: _Lists, queries: list[str], positives: dict[str, set[str]]) -> dict[str, float]:
    by_query = dict(zip(lists.queries, zip(lists.targets, lists.scores)))
    aps, pooled, gt_total = [], [], 0
    for q in queries:
        if q not in by_query:
            continue
        targets, scores = by_query[q]
        gt = lists.mask(positives.get(q, ())) & lists.available
        keep = lists.available[targets] & (targets != lists.codes[q])
        s, rel = scores[keep], gt[targets[keep]]
        order = np.argsort(-s, kind="stable")
        n_gt = int(gt.sum())
        gt_total += n_gt
        if n_gt:
            aps.append(_sorted_ap(s[order], rel[order], n_gt))
        pooled.append((s, rel))
    if not aps:
        raise ValueError("no VCDB query in similarities has an available copy: mAP is undefined")
    return {"VCDB_mAP": float(np.mean(aps)), "VCDB_uAP": _pooled_ap(pooled, gt_total, "VCDB_uAP")}


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
             ) -> dict[str, float]:
    """Evaluate similarities with a benchmark's published protocol; returns the released evaluator's numbers.

    Implements the protocols of the module docstring (S2VS / HAP-VR evaluation code, mAP and μAP as in
    HAP-VR Sec. 4.1) on the annotation files at ``<root>/annotations/<name>/``.

    Args:
        dataset: ``"fivr-5k"``, ``"fivr-200k"``, ``"evve"``, ``"svd"``, ``"cc_web_video"`` or ``"vcdb"``
            (TCA's ``vcdb.pickle``: queries = its 528 core videos, positives = copy pairs, database = core
            videos + ``negs``; S2VS's VCDB protocol on that layout).
        similarities: ``{query_id: {target_id: score}}`` (the released format; order of each inner dict =
            order of tied targets for EVVE / CC_WEB_VIDEO), or a float tensor/array ``[Q, N]`` aligned with
            :func:`dataset_ids` (queries x database as hapref's loader orders them). SVD ids with or without
            ``.mp4``.
        root: the annotation root (default ``$HAPREF_ANNOTATIONS``, see :func:`annotation_root`); only read.
        available: ids whose features exist (default: every id in ``similarities``; for a tensor, every
            query and database video), filtered as each released evaluator does: FIVR intersects it with its
            database, CC_WEB_VIDEO applies it only to tensors.
        unlabeled: SVD only, the unlabeled distractor ids (``unlabeled-data-id``); they join every query's
            list as negatives.

    Where the released code has no defined result, hapref chooses: a VCDB query without an available positive
    is skipped (released: NaN), an SVD query missing from ``similarities`` is skipped (released: KeyError), and
    a metric with no relevant available video at all raises ValueError.

    Returns:
        ``{key: value}`` with the released keys: FIVR ``DSVR CSVR ISVR DSVD CSVD ISVD`` and each with ``_h``
        (``fivr_easy_duplicates.txt`` removed); EVVE ``EVVE_mAP EVVE_uAP``; CC_WEB_VIDEO ``mAP mAP_star
        mAP_c mAP_c_star``; SVD ``mAP uAP``; VCDB ``VCDB_mAP VCDB_uAP``. Tied scores: see the module docstring.

    Raises:
        ValueError: unknown dataset, wrong tensor shape, NaN scores, a malformed annotation file (named), or
            a metric without any relevant available video.
        TypeError: similarities of another form.
        FileNotFoundError: the annotation file is not under ``root``.

    Examples:
        >>> import tempfile
        >>> import numpy as np
        >>> from hapref.evaluation.fixtures import write_fixtures
        >>> root = write_fixtures(tempfile.mkdtemp())
        >>> queries, database = dataset_ids("evve", root)
        >>> perfect = evaluate("evve", np.ones((len(queries), len(database))), root)  # every score tied
        >>> sorted(perfect)
        ['EVVE_mAP', 'EVVE_uAP']
    """
    dataset = _check_dataset(dataset)
    root = annotation_root(root)
    folder = DATASETS[dataset]
    path = _file(root, folder, ANNOTATIONS[folder][0].filename)
    unlabeled_ids = [v.removesuffix(".mp4") for v in unlabeled or ()]
    if dataset.startswith("fivr"):
        version = dataset.removeprefix("fivr-")
        fivr = loaders.read_fivr(path)
        easy = set(loaders.read_id_list(_file(root, folder, "fivr_easy_duplicates.txt")))
        lists = _as_lists(similarities, fivr.queries[version], fivr.database[version], available)
        results = _fivr(lists, fivr, version, easy)
    elif dataset == "evve":
        queries, database, events = loaders.read_evve(path)
        results = _evve(_as_lists(similarities, queries, database, available), queries, events)
    elif dataset == "cc_web_video":
        cc = loaders.read_cc_web_video(path)
        results = _cc_web(_as_lists(similarities, cc.queries, sorted(cc.index), available), cc)
    elif dataset == "svd":
        pairs = loaders.read_svd(path)
        database = sorted({c for targets in pairs.values() for c in targets} | set(unlabeled_ids))
        lists = _as_lists(similarities, sorted(pairs), database, available, strip_mp4=True)
        results = _svd(lists, pairs, unlabeled_ids)
    else:
        queries, positives, negs = loaders.read_vcdb(path)
        database = list(dict.fromkeys([*queries, *negs]))
        results = _vcdb(_as_lists(similarities, queries, database, available), queries, positives)
    if any(not math.isfinite(v) for v in results.values()):  # pragma: no cover - guarded above
        raise ValueError(f"non-finite result {results}")
    return results
