"""Small annotation files in the exact layouts of the released ones, for tests and the book.

Each ``write_*`` function writes one dataset under ``<root>/annotations/<name>/<registry file name>`` (the layout
``python -m hapref.data.download annotations`` produces) with the same Python types, pickle protocol and quirks as
the real file, so :func:`hapref.evaluation.evaluate` runs on them unchanged:

* FIVR (``fivr.pickle`` + ``fivr_easy_duplicates.txt``): ``queries`` an unsorted list, ``database`` a set,
  videos listed under several labels of one query (DS+DA, ND+DA, CS+DA, two visual labels), a query that is
  also a database video, a query whose only near-duplicates are easy duplicates (empty ground truth in the
  hard setting).
* EVVE: ``{event: (query_set, positive_set, empty null_set)}``; queries are not database videos.
* SVD: ``test_groundtruth`` lines ``q.mp4 c.mp4 0|1``.
* CC_WEB_VIDEO: every query in ``index`` and labelled ``E`` for itself, a lowercase ``x`` label, a positive id
  missing from ``index``, ``excluded`` sets.
* VCDB (TCA layout): ``video_pairs`` with float overlaps, ``index`` = core videos first then repeated and
  unlabeled ids, ``negs`` with repeats.

:func:`fixture_similarities` draws released-format similarities ``{query: {target: score}}`` that rank
relevant videos higher on average.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np

from hapref.data.loaders import VCDB_CORE
from hapref.data.registry import ANNOTATIONS

#: Pickle protocol of the released files.
PROTOCOL = 3


def annotation_path(root: str | os.PathLike, name: str, filename: str | None = None) -> Path:
    """``<root>/annotations/<name>/<file>``; ``filename`` defaults to the registry's first file of ``name``.

    Examples:
        >>> annotation_path("/data", "evve").as_posix()
        '/data/annotations/evve/evve.pickle'
    """
    if name not in ANNOTATIONS:
        raise ValueError(f"name must be one of {sorted(ANNOTATIONS)}, got {name!r}")
    return Path(root) / "annotations" / name / (filename or ANNOTATIONS[name][0].filename)


def _dump(path: Path, obj: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(pickle.dumps(obj, protocol=PROTOCOL))
    return path


def _ids(rng: np.random.Generator, n: int, length: int = 11) -> list[str]:
    """``n`` distinct YouTube-like ids."""
    alphabet = np.array(list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"))
    out: dict[str, None] = {}
    while len(out) < n:
        out["".join(rng.choice(alphabet, length))] = None
    return list(out)


def write_fivr(root: str | os.PathLike, n_queries: int = 6, n_database: int = 80, seed: int = 0) -> Path:
    """Write ``fivr.pickle`` and ``fivr_easy_duplicates.txt`` in S2VS's layout; returns the pickle's path.

    FIVR-5K is the first ``n_queries`` queries with ``n_database`` videos; FIVR-200K adds two queries and
    half as many videos again. Query 0 is also a database video; query 1's ND, DS and CS videos are all easy duplicates.

    Examples:
        >>> import tempfile
        >>> path = write_fivr(tempfile.mkdtemp(), seed=0)
        >>> path.name, (path.parent / "fivr_easy_duplicates.txt").exists()
        ('fivr.pickle', True)
    """
    if n_queries < 2 or n_database < 4 * n_queries:
        raise ValueError(f"n_queries must be >= 2 and n_database >= 4 * n_queries, got {n_queries}, {n_database}")
    rng = np.random.default_rng(seed)
    ids = _ids(rng, n_queries + 2 + n_database + n_database // 2)
    queries_5k, extra_queries = ids[:n_queries], ids[n_queries:n_queries + 2]
    db_5k = ids[n_queries + 2:n_queries + 2 + n_database] + [queries_5k[0]]
    db_200k = db_5k + ids[n_queries + 2 + n_database:]
    annotation: dict[str, dict[str, list[str]]] = {}
    easy: list[str] = []
    for qi, q in enumerate(queries_5k + extra_queries):
        pool = db_200k if qi >= n_queries else db_5k[:-1]
        chosen = list(rng.choice(len(pool), size=min(len(pool), 14), replace=False))
        per_label: dict[str, list[str]] = {label: [] for label in ("ND", "DS", "CS", "IS", "DA")}
        for k, j in enumerate(chosen):
            v = pool[j]
            visual = ("ND", "DS", "CS", "IS")[k % 4] if k < 12 else None
            if visual:
                per_label[visual].append(v)
            if k % 3 == 0 or visual is None:  # DS+DA, ND+DA, CS+DA ... and audio-only videos
                per_label["DA"].append(v)
            if k == 5:  # a video under two visual labels of the same query
                per_label["CS"].append(v)
        if qi == 1:
            easy += per_label["ND"] + per_label["DS"] + per_label["CS"]
        elif qi != 0:
            easy.append(per_label["ND"][0])
        if qi == 2 and n_queries > 2:
            per_label["ND"].append(queries_5k[0])  # the query that is also a database video
        annotation[q] = {label: ids for label, ids in per_label.items() if ids}
    data = {"5k": {"queries": list(reversed(queries_5k)), "database": set(db_5k)},
            "200k": {"queries": list(reversed(queries_5k + extra_queries)), "database": set(db_200k)},
            "annotation": annotation}
    path = _dump(annotation_path(root, "fivr"), data)
    (path.parent / "fivr_easy_duplicates.txt").write_text("".join(f"{v}\n" for v in sorted(set(easy))))
    return path


def write_evve(root: str | os.PathLike, n_events: int = 3, queries_per_event: int = 2, n_database: int = 60,
               seed: int = 0) -> Path:
    """Write ``evve.pickle`` (``annotation {event: (queries, positives, set())}``, ``queries``, ``database``).

    Examples:
        >>> import tempfile
        >>> write_evve(tempfile.mkdtemp(), seed=0).name
        'evve.pickle'
    """
    rng = np.random.default_rng(seed)
    ids = _ids(rng, n_events * queries_per_event + n_database)
    queries, database = ids[:n_events * queries_per_event], ids[n_events * queries_per_event:]
    per_event = n_database // (2 * n_events)
    annotation = {f"event_{e:02d}": (set(queries[e * queries_per_event:(e + 1) * queries_per_event]),
                                     set(database[e * per_event:(e + 1) * per_event]), set())
                  for e in range(n_events)}
    return _dump(annotation_path(root, "evve"), {"annotation": annotation, "database": database,
                                                 "queries": queries})


def write_svd(root: str | os.PathLike, n_queries: int = 6, per_query: int = 8, seed: int = 0) -> Path:
    """Write SVD's ``test_groundtruth`` (``q.mp4 c.mp4 label`` lines; candidates shared between queries).

    Examples:
        >>> import tempfile
        >>> write_svd(tempfile.mkdtemp(), seed=0).read_text().splitlines()[0].count(".mp4")
        2
    """
    rng = np.random.default_rng(seed)
    numbers = rng.choice(10 ** 18, size=n_queries + n_queries * per_query, replace=False) + 6 * 10 ** 18
    queries, candidates = numbers[:n_queries], numbers[n_queries:]
    lines = []
    for qi, q in enumerate(queries):
        picked = rng.choice(len(candidates), size=per_query, replace=False)
        for k, c in enumerate(picked):
            lines.append(f"{q}.mp4 {candidates[c]}.mp4 {int(k < 2 + qi % 3)}\n")
    path = annotation_path(root, "svd")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines))
    return path


def write_cc_web_video(root: str | os.PathLike, n_sets: int = 4, per_set: int = 12, seed: int = 0) -> Path:
    """Write ``cc_web_video.pickle`` (``index``, ``queries``, ``ground_truth``, ``excluded``).

    Examples:
        >>> import tempfile
        >>> write_cc_web_video(tempfile.mkdtemp(), seed=0).name
        'cc_web_video.pickle'
    """
    rng = np.random.default_rng(seed)
    index: dict[str, int] = {}
    queries, ground_truth, excluded = [], [], []
    for s in range(1, n_sets + 1):
        names = [f"{s}/{s}_{k}_{'YG'[k % 2]}" for k in range(1, per_set + 1)]
        for name in names:
            index[name] = len(index) + 1
        queries.append(names[0])
        labels = {index[names[0]]: "E"}
        for name in names[1:]:
            labels[index[name]] = str(rng.choice(list("ESLMVX")))
        if s == 1:
            labels[index[names[3]]] = "x"  # the lowercase label of the real file
            labels[10 ** 5 + s] = "S"  # a positive whose video is missing from the index
        ground_truth.append(labels)
        excluded.append({index[n] for n in names[1:] if rng.random() < 0.15})
    return _dump(annotation_path(root, "cc_web_video"), {"index": index, "ground_truth": ground_truth,
                                                         "excluded": excluded, "queries": queries})


def write_vcdb(root: str | os.PathLike, n_negs: int = 40, seed: int = 0) -> Path:
    """Write TCA's ``vcdb.pickle`` (``video_pairs`` with float ``overlap``, ``index``, ``negs``).

    The index lists the 528 core videos first (every one in at least one copy pair), then the distractors
    with a repeated id and a few ids that are neither core nor in ``negs``.

    Examples:
        >>> import tempfile
        >>> write_vcdb(tempfile.mkdtemp(), seed=0).name
        'vcdb.pickle'
    """
    rng = np.random.default_rng(seed)
    n_core = VCDB_CORE
    core = ["".join(rng.choice(list("0123456789abcdef"), 40)) for _ in range(n_core)]
    negs = _ids(rng, n_negs)
    others = _ids(rng, 3)
    pairs = []
    for i in range(0, n_core - 1, 2):
        partners = [i + 1] + list(rng.choice(n_core, size=int(rng.integers(0, 3)), replace=False))
        for j in partners:
            if j != i:
                pairs.append({"overlap": [float(rng.random()), float(rng.random())], "videos": [core[i], core[j]]})
    if n_core % 2:
        pairs.append({"overlap": [0.5, 0.5], "videos": [core[-1], core[0]]})
    index = core + negs[:-1] + [negs[0]] + others + [negs[-1]]
    return _dump(annotation_path(root, "vcdb"), {"video_pairs": pairs, "index": index,
                                                 "negs": negs + [negs[1]]})


def write_fixtures(root: str | os.PathLike, seed: int = 0) -> Path:
    """Write every dataset above under ``root``; returns ``root``.

    Examples:
        >>> import tempfile
        >>> root = write_fixtures(tempfile.mkdtemp())
        >>> sorted(p.name for p in (root / "annotations").iterdir())
        ['cc_web_video', 'evve', 'fivr', 'svd', 'vcdb']
    """
    root = Path(root)
    write_fivr(root, seed=seed)
    write_evve(root, seed=seed)
    write_svd(root, seed=seed)
    write_cc_web_video(root, seed=seed)
    write_vcdb(root, seed=seed)
    return root


def fixture_similarities(queries: list[str], database: list[str], relevant: np.ndarray, seed: int = 0,
                         separation: float = 1.0, decimals: int | None = None) -> dict[str, dict[str, float]]:
    """Released-format similarities: N(separation · relevant, 1) scores, ``{query: {target: float}}``.

    Args:
        queries, database: ids (rows / columns of ``relevant``).
        relevant: bool ``[Q, N]``.
        seed: random seed.
        separation: mean gap between relevant and other scores (0: chance).
        decimals: round scores to this many decimals (creates ties), or keep them tie-free.

    Examples:
        >>> import numpy as np
        >>> sims = fixture_similarities(["q"], ["a", "b"], np.array([[True, False]]), seed=0)
        >>> list(sims["q"])
        ['a', 'b']
    """
    relevant = np.asarray(relevant, dtype=bool)
    if relevant.shape != (len(queries), len(database)):
        raise ValueError(f"relevant must have shape ({len(queries)}, {len(database)}), got {relevant.shape}")
    scores = np.random.default_rng(seed).normal(size=relevant.shape) + separation * relevant
    if decimals is not None:
        scores = scores.round(decimals)
    return {q: dict(zip(database, map(float, row))) for q, row in zip(queries, scores)}


def write_features(path: str | os.PathLike, dataset: str, root: str | os.PathLike, dims: int = 32, regions: int = 9,
                   frames: tuple[int, int] = (3, 40), seed: int = 0, leave_out: int = 1) -> Path:
    """Region features of a fixture dataset in the DnS / S2VS HDF5 layout: one float32 ``[T, R, D]`` per video id.

    Every video relevant to a query (its first task, e.g. DSVR) repeats a stretch of that query's frames
    with noise, the others are random, so a similarity network ranks relevant videos first. Frame counts
    are drawn from ``frames`` (inclusive; the default includes videos shorter than the released loaders'
    minimum length); SVD ids keep the ``.mp4`` suffix as in the released files; the last ``leave_out``
    database videos are not written (a video whose features are missing). Needs ``h5py``.

    Examples:
        >>> import tempfile, h5py
        >>> root = write_fixtures(tempfile.mkdtemp())
        >>> path = write_features(root / "evve.hdf5", "evve", root, dims=8)
        >>> with h5py.File(path, "r") as f:
        ...     shape = f[sorted(f)[0]].shape
        >>> shape[1:]
        (9, 8)
    """
    import h5py

    from hapref.evaluation.protocols import _annotations, annotation_root

    ann = _annotations(dataset, annotation_root(root))
    relevant = ann.relevance().numpy()
    rng = np.random.default_rng(seed)

    def unit(x: np.ndarray) -> np.ndarray:
        return (x / np.linalg.norm(x, axis=-1, keepdims=True)).astype(np.float32)

    def video() -> np.ndarray:
        return unit(rng.normal(size=(int(rng.integers(frames[0], frames[1] + 1)), regions, dims)))

    features = {q: video() for q in ann.queries}
    database = [v for v in ann.database if v not in features]
    for column, vid in enumerate(ann.database):
        if vid in features:
            continue
        sources = np.flatnonzero(relevant[:, column])
        if len(sources) == 0:
            features[vid] = video()
            continue
        query = features[ann.queries[int(rng.choice(sources))]]
        length = int(rng.integers(frames[0], frames[1] + 1))
        start = int(rng.integers(0, len(query)))
        copied = np.resize(np.roll(query, -start, axis=0), (length, regions, dims))
        features[vid] = unit(copied + 0.4 * rng.normal(size=copied.shape))
    dropped = set(database[len(database) - leave_out:]) if leave_out else set()
    suffix = ".mp4" if dataset == "svd" else ""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(path, "w") as f:
        for vid, x in features.items():
            if vid not in dropped:
                f.create_dataset(vid + suffix, data=x, fletcher32=True)  # HDF5 verifies it on read
    return path
