"""Readers for the real benchmarks' annotation files and for their features / frames on local disk.

Annotation layouts are those of the files the official repositories ship (S2VS, ViSiL, TCA, FIVR-200K); nothing
here downloads (see ``data_scripts/``). Pickles are read with :func:`hapref.data.unpickle.load_pickle`
(built-in values and sets only: a crafted file cannot run code), and every malformed file is refused with a
ValueError naming it. Every loader returns :class:`RetrievalAnnotations`, which offers the same
``relevance(task)`` as the generated :class:`~hapref.data.benchmark.CopyBenchmark`; the ``read_*`` functions
return the checked raw content that :mod:`hapref.evaluation` needs to reproduce the released evaluators.

================  ==========================================  ===============================================
dataset           file                                        tasks (labels counted relevant)
================  ==========================================  ===============================================
FIVR-5K / 200K    ``fivr.pickle`` / ``annotation.json``       DSVR (ND, DS), CSVR (+CS), ISVR (+IS), DAVR (DA)
EVVE              ``evve.pickle``                             EVVE (the event's positives)
SVD               ``test_groundtruth`` (+ unlabeled id list)  SVD (label 1)
CC_WEB_VIDEO      ``cc_web_video.pickle``                     CC_WEB (E, S, L, M, V)
VCDB              ``vcdb.pickle`` (S2VS or TCA layout)        VCDB (copy pairs)
================  ==========================================  ===============================================

A FIVR video can carry several labels for one query (e.g. DS and DA): ``labels[q][v]`` is the *set* of its
labels and a video is relevant to a task when any of them belongs to the task.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import Dataset

from hapref.files import CorruptFileError
from hapref.data.unpickle import load_pickle

FIVR_TASKS = {"DSVR": frozenset({"ND", "DS"}), "CSVR": frozenset({"ND", "DS", "CS"}),
              "ISVR": frozenset({"ND", "DS", "CS", "IS"}), "DAVR": frozenset({"DA"})}
CC_WEB_POSITIVE = frozenset("ESLMV")
#: Videos of VCDB's core set in TCA's ``vcdb.pickle``: the first entries of its ``index``.
VCDB_CORE = 528


@dataclass
class RetrievalAnnotations:
    """Queries, database and per-query label sets ``{query: {video: frozenset(labels)}}`` of a benchmark.

    Examples:
        >>> ann = RetrievalAnnotations("toy", ["q"], ["a", "b"], {"q": {"a": frozenset({"DS", "DA"})}},
        ...                            {"DSVR": frozenset({"ND", "DS"}), "DAVR": frozenset({"DA"})})
        >>> ann.relevance("DSVR").tolist(), ann.relevance("DAVR").tolist()
        ([[True, False]], [[True, False]])
    """

    name: str
    queries: list[str]
    database: list[str]
    labels: dict[str, dict[str, frozenset[str]]]
    tasks: dict[str, frozenset[str]]
    excluded: dict[str, frozenset[str]] = field(default_factory=dict)

    def relevance(self, task: str | None = None) -> Tensor:
        """Bool ``[Q, N]``: video n carries at least one of ``task``'s labels for query q (default: first task).

        Examples:
            >>> ann = RetrievalAnnotations("toy", ["q"], ["q", "a"], {"q": {"q": frozenset("E"),
            ...                            "a": frozenset("S")}}, {"CC_WEB": frozenset("ESLMV")})
            >>> ann.relevance().tolist()  # the query itself is never its own relevant item here
            [[False, True]]
        """
        task = task or next(iter(self.tasks))
        if task not in self.tasks:
            raise ValueError(f"task must be one of {sorted(self.tasks)} for {self.name}, got {task!r}")
        wanted = self.tasks[task]
        return self._matrix(lambda labels: not wanted.isdisjoint(labels))

    def annotated(self) -> Tensor:
        """Bool ``[Q, N]``: video n has any label for query q (CC_WEB_VIDEO's and SVD's labelled subsets).

        Examples:
            >>> ann = RetrievalAnnotations("toy", ["q"], ["a", "b"], {"q": {"b": frozenset("0")}},
            ...                            {"SVD": frozenset("1")})
            >>> ann.annotated().tolist()
            [[False, True]]
        """
        return self._matrix(lambda labels: True)

    def _matrix(self, keep: Callable[[frozenset[str]], bool]) -> Tensor:
        column = {vid: j for j, vid in enumerate(self.database)}
        out = torch.zeros(len(self.queries), len(self.database), dtype=torch.bool)
        for i, q in enumerate(self.queries):
            for vid, labels in self.labels.get(q, {}).items():
                if vid in column and vid != q and keep(labels):
                    out[i, column[vid]] = True
        return out

    def without(self, ids: Iterable[str]) -> RetrievalAnnotations:
        """Drop ``ids`` from the database (FIVR's "hard" setting removes ``fivr_easy_duplicates.txt``).

        Examples:
            >>> ann = RetrievalAnnotations("toy", ["q"], ["a", "b"], {}, {"T": frozenset("x")})
            >>> ann.without(["a"]).database
            ['b']
        """
        drop = set(ids)
        return RetrievalAnnotations(self.name, self.queries, [v for v in self.database if v not in drop],
                                    self.labels, self.tasks, self.excluded)

    def restrict(self, available: Iterable[str]) -> RetrievalAnnotations:
        """Keep only videos in ``available`` (e.g. those whose features exist, FIVR-200K issue #2).

        Examples:
            >>> ann = RetrievalAnnotations("toy", ["q", "r"], ["a", "b"], {}, {"T": frozenset("x")})
            >>> kept = ann.restrict(["q", "b"])
            >>> kept.queries, kept.database
            (['q'], ['b'])
        """
        keep = set(available)
        return RetrievalAnnotations(self.name, [q for q in self.queries if q in keep],
                                    [v for v in self.database if v in keep], self.labels, self.tasks, self.excluded)


def _fail(path: Path, what: str) -> ValueError:
    return ValueError(f"{path} is not a valid annotation file: {what}")


def _strings(value: object, path: Path, what: str) -> list[str]:
    """A list/tuple (order kept) or set (sorted) of strings, else ValueError naming the file."""
    if isinstance(value, (set, frozenset)):
        value = sorted(value, key=str)
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise _fail(path, f"{what} must be a list or set of string ids, got {type(value).__name__}")
    return list(value)


def _mapping(value: object, path: Path, what: str) -> dict:
    if not isinstance(value, dict):
        raise _fail(path, f"{what} must be a dict, got {type(value).__name__}")
    return value


def _pickled_dict(path: str | os.PathLike, keys: Sequence[str]) -> tuple[Path, dict]:
    path = Path(path)
    data = load_pickle(path)
    if not isinstance(data, dict) or any(k not in data for k in keys):
        found = sorted(map(str, data)) if isinstance(data, dict) else type(data).__name__
        raise _fail(path, f"expected a dict with keys {list(keys)}, found {found}")
    return path, data


@dataclass(frozen=True)
class FIVRFile:
    """Checked content of FIVR's ``fivr.pickle``: sorted queries / database per version, label sets per query.

    Examples:
        >>> f = FIVRFile({"5k": ["q"]}, {"5k": ["a"]}, {"q": {"a": frozenset({"DS", "DA"})}})
        >>> sorted(f.labels["q"]["a"])
        ['DA', 'DS']
    """

    queries: dict[str, list[str]]
    database: dict[str, list[str]]
    labels: dict[str, dict[str, frozenset[str]]]


def read_fivr(path: str | os.PathLike) -> FIVRFile:
    """Read S2VS's ``fivr.pickle`` (``5k`` / ``200k`` with ``queries`` and ``database``; ``annotation``).

    ``annotation {query: {label: [ids]}}`` may list a video under several labels of one query; all are kept.

    Examples:
        >>> import tempfile, pathlib
        >>> from hapref.evaluation.fixtures import write_fivr
        >>> f = read_fivr(write_fivr(pathlib.Path(tempfile.mkdtemp()), n_queries=2, n_database=8, seed=0))
        >>> sorted(f.queries), len(f.database["5k"]) > 0
        (['200k', '5k'], True)
    """
    path, data = _pickled_dict(path, ("5k", "200k", "annotation"))
    queries, database = {}, {}
    for version in ("5k", "200k"):
        part = _mapping(data[version], path, f"[{version!r}]")
        if "queries" not in part or "database" not in part:
            raise _fail(path, f"[{version!r}] must have 'queries' and 'database'")
        queries[version] = sorted(_strings(part["queries"], path, f"[{version!r}]['queries']"))
        database[version] = sorted(_strings(part["database"], path, f"[{version!r}]['database']"))
    labels: dict[str, dict[str, frozenset[str]]] = {}
    for q, per_label in _mapping(data["annotation"], path, "['annotation']").items():
        collected: dict[str, set[str]] = {}
        for label, ids in _mapping(per_label, path, f"['annotation'][{q!r}]").items():
            for v in _strings(ids, path, f"['annotation'][{q!r}][{label!r}]"):
                collected.setdefault(v, set()).add(label)
        labels[q] = {v: frozenset(ls) for v, ls in collected.items()}
    return FIVRFile(queries, database, labels)


def read_id_list(path: str | os.PathLike) -> list[str]:
    """Whitespace-separated ids of a text file (``fivr_easy_duplicates.txt``, ``youtube_ids.txt``), in order.

    Examples:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "ids.txt"
        >>> _ = path.write_text("a\\nb\\n\\n")
        >>> read_id_list(path)
        ['a', 'b']
    """
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8").split()
    except UnicodeDecodeError as err:
        raise _fail(path, f"not UTF-8 text ({err})") from None


def load_fivr(path: str | os.PathLike, version: str = "5k", database_ids: Sequence[str] | None = None,
              ) -> RetrievalAnnotations:
    """FIVR-5K/200K: S2VS's pickle (keys ``5k``, ``200k``, ``annotation``) or the official ``annotation.json``.

    Queries and database are sorted (the order the released evaluator uses). Every label of a video is kept.
    With the JSON file (not the same data as the pickle; the published S2VS / HAP-VR numbers use the pickle)
    the queries are its keys and the database is ``database_ids`` (e.g. ``youtube_ids.txt``) or, if not given,
    every annotated video.

    Examples:
        >>> import tempfile, pathlib
        >>> from hapref.evaluation.fixtures import write_fivr
        >>> ann = load_fivr(write_fivr(pathlib.Path(tempfile.mkdtemp()), n_queries=2, n_database=8, seed=0))
        >>> ann.relevance("DSVR").shape == (len(ann.queries), len(ann.database))
        True
    """
    if version not in ("5k", "200k"):
        raise ValueError(f"version must be '5k' or '200k', got {version!r}")
    path = Path(path)
    if path.suffix == ".json":
        try:
            annotation = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise _fail(path, f"not JSON ({err})") from None
        labels: dict[str, dict[str, frozenset[str]]] = {}
        for q, per_label in _mapping(annotation, path, "the top level").items():
            collected: dict[str, set[str]] = {}
            for label, ids in _mapping(per_label, path, f"[{q!r}]").items():
                for v in _strings(ids, path, f"[{q!r}][{label!r}]"):
                    collected.setdefault(v, set()).add(label)
            labels[q] = {v: frozenset(ls) for v, ls in collected.items()}
        queries = sorted(labels)
        database = list(database_ids) if database_ids is not None else sorted(
            {v for q in labels.values() for v in q} | set(queries))
    else:
        fivr = read_fivr(path)
        queries, labels = fivr.queries[version], fivr.labels
        database = list(database_ids) if database_ids is not None else fivr.database[version]
    labels = {q: labels.get(q, {}) for q in queries}
    return RetrievalAnnotations(f"FIVR-{version.upper()}", queries, database, labels, dict(FIVR_TASKS))


def read_evve(path: str | os.PathLike) -> tuple[list[str], list[str], dict[str, tuple[set, set, set]]]:
    """EVVE's ``evve.pickle``: sorted ``queries``, sorted ``database`` and ``{event: (queries, positives, null)}``.

    Examples:
        >>> import tempfile, pathlib
        >>> from hapref.evaluation.fixtures import write_evve
        >>> queries, database, events = read_evve(write_evve(pathlib.Path(tempfile.mkdtemp()), seed=0))
        >>> all(len(e) == 3 for e in events.values())
        True
    """
    path, data = _pickled_dict(path, ("annotation", "queries", "database"))
    events = {}
    for event, entry in _mapping(data["annotation"], path, "['annotation']").items():
        if not isinstance(entry, tuple) or len(entry) != 3 or not all(isinstance(s, (set, frozenset)) for s in entry):
            raise _fail(path, f"['annotation'][{event!r}] must be a tuple (query_set, positive_set, null_set)")
        for part in entry:
            _strings(part, path, f"['annotation'][{event!r}]")
        events[event] = tuple(set(s) for s in entry)
    return (sorted(_strings(data["queries"], path, "['queries']")),
            sorted(_strings(data["database"], path, "['database']")), events)


def load_evve(path: str | os.PathLike) -> RetrievalAnnotations:
    """EVVE: ``annotation {event: (query_set, positive_set, null_set)}``, ``queries``, ``database`` (sorted).

    Examples:
        >>> import tempfile, pathlib
        >>> from hapref.evaluation.fixtures import write_evve
        >>> ann = load_evve(write_evve(pathlib.Path(tempfile.mkdtemp()), seed=0))
        >>> ann.relevance("EVVE").any(1).all().item()
        True
    """
    queries, database, events = read_evve(path)
    labels: dict[str, dict[str, frozenset[str]]] = {}
    for event, (query_set, positives, _null) in events.items():
        for q in query_set:
            labels[q] = {v: frozenset({event}) for v in positives}
    return RetrievalAnnotations("EVVE", queries, database, labels, {"EVVE": frozenset(events)})


def read_svd(path: str | os.PathLike) -> dict[str, dict[str, int]]:
    """SVD's ``test_groundtruth``: lines ``qid.mp4 cid.mp4 label`` -> ``{qid: {cid: 0 or 1}}`` (``.mp4`` removed).

    Examples:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "test_groundtruth"
        >>> _ = path.write_text("1.mp4 2.mp4 1\\n1.mp4 3.mp4 0\\n")
        >>> read_svd(path)
        {'1': {'2': 1, '3': 0}}
    """
    path = Path(path)
    pairs: dict[str, dict[str, int]] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as err:
        raise _fail(path, f"not UTF-8 text ({err})") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        fields = line.split()
        if len(fields) != 3 or fields[2] not in ("0", "1"):
            raise _fail(path, f"line {number} must be 'query.mp4 candidate.mp4 0|1', got {line!r}")
        pairs.setdefault(fields[0].removesuffix(".mp4"), {})[fields[1].removesuffix(".mp4")] = int(fields[2])
    if not pairs:  # an empty (or truncated-to-nothing) download would otherwise give empty annotations
        raise _fail(path, "holds no 'query.mp4 candidate.mp4 0|1' line (empty file)")
    return pairs


def load_svd(path: str | os.PathLike, unlabeled: str | os.PathLike | None = None) -> RetrievalAnnotations:
    """SVD: ``test_groundtruth`` lines ``qid.mp4 cid.mp4 label``; ``unlabeled`` ids (one a line) join the database.

    Ids lose their ``.mp4`` suffix; queries and database are sorted (the released evaluator's order).

    Examples:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "test_groundtruth"
        >>> _ = path.write_text("1.mp4 3.mp4 1\\n1.mp4 2.mp4 0\\n")
        >>> ann = load_svd(path)
        >>> ann.database, ann.relevance().tolist(), ann.annotated().tolist()
        (['2', '3'], [[False, True]], [[True, True]])
    """
    pairs = read_svd(path)
    labels = {q: {c: frozenset({str(label)}) for c, label in targets.items()} for q, targets in pairs.items()}
    database = {c for targets in pairs.values() for c in targets}
    if unlabeled is not None:
        database.update(v.removesuffix(".mp4") for v in read_id_list(unlabeled))
    return RetrievalAnnotations("SVD", sorted(labels), sorted(database), labels, {"SVD": frozenset({"1"})})


@dataclass(frozen=True)
class CCWebFile:
    """Checked content of ``cc_web_video.pickle``: ``index {name: int}``, queries, ground truth and exclusions.

    Examples:
        >>> f = CCWebFile({"1/1_1_Y": 1}, ["1/1_1_Y"], [{1: "E"}], [set()])
        >>> f.ground_truth[0][f.index[f.queries[0]]]
        'E'
    """

    index: dict[str, int]
    queries: list[str]
    ground_truth: list[dict[int, str]]
    excluded: list[set[int]]


def read_cc_web_video(path: str | os.PathLike) -> CCWebFile:
    """Read ``cc_web_video.pickle`` (``index``, ``queries``, ``ground_truth`` and ``excluded`` per query).

    Examples:
        >>> import tempfile, pathlib
        >>> from hapref.evaluation.fixtures import write_cc_web_video
        >>> f = read_cc_web_video(write_cc_web_video(pathlib.Path(tempfile.mkdtemp()), seed=0))
        >>> len(f.queries) == len(f.ground_truth) == len(f.excluded)
        True
    """
    path, data = _pickled_dict(path, ("index", "queries", "ground_truth", "excluded"))
    index = _mapping(data["index"], path, "['index']")
    if not all(isinstance(k, str) and isinstance(i, int) for k, i in index.items()):
        raise _fail(path, "['index'] must map string ids to ints")
    queries = _strings(data["queries"], path, "['queries']")
    gt, excluded = data["ground_truth"], data["excluded"]
    if not isinstance(gt, list) or not isinstance(excluded, list) or not len(gt) == len(excluded) == len(queries):
        raise _fail(path, "'ground_truth' and 'excluded' must be lists with one entry per query")
    for i, (labels, ex) in enumerate(zip(gt, excluded)):
        if not isinstance(labels, dict) or not all(isinstance(k, int) and isinstance(v, str)
                                                   for k, v in labels.items()):
            raise _fail(path, f"['ground_truth'][{i}] must map int ids to string labels")
        if not isinstance(ex, (set, frozenset)) or not all(isinstance(k, int) for k in ex):
            raise _fail(path, f"['excluded'][{i}] must be a set of int ids")
    return CCWebFile(dict(index), queries, list(gt), [set(ex) for ex in excluded])


def load_cc_web_video(path: str | os.PathLike) -> RetrievalAnnotations:
    """CC_WEB_VIDEO: ``index {"set/basename": int}``, ``queries``, ``ground_truth [{int: label}]``, ``excluded``.

    The database is the sorted index keys (the released order); ground-truth ids missing from the index are
    dropped here (:func:`hapref.evaluation.evaluate` still counts them, as the released evaluator does).

    Examples:
        >>> import tempfile, pathlib
        >>> from hapref.evaluation.fixtures import write_cc_web_video
        >>> ann = load_cc_web_video(write_cc_web_video(pathlib.Path(tempfile.mkdtemp()), seed=0))
        >>> ann.database == sorted(ann.database)
        True
    """
    f = read_cc_web_video(path)
    name_of = {i: vid for vid, i in f.index.items()}
    labels = {q: {name_of[i]: frozenset({label}) for i, label in gt.items() if i in name_of}
              for q, gt in zip(f.queries, f.ground_truth)}
    excluded = {q: frozenset(name_of[i] for i in ex if i in name_of) for q, ex in zip(f.queries, f.excluded)}
    return RetrievalAnnotations("CC_WEB_VIDEO", f.queries, sorted(f.index), labels,
                                {"CC_WEB": CC_WEB_POSITIVE}, excluded)


def read_vcdb(path: str | os.PathLike) -> tuple[list[str], dict[str, set[str]], list[str]]:
    """VCDB as ``(queries, positives {q: set}, distractors)`` from S2VS's or TCA's ``vcdb.pickle``.

    TCA layout (``video_pairs``, ``index``, ``negs``): the queries are the first 528 ids of ``index`` (the core
    set), a video's positives are the videos it forms a copy pair with (both directions), the distractors are
    ``negs`` (repeated ids once).

    Examples:
        >>> import tempfile, pathlib
        >>> from hapref.evaluation.fixtures import write_vcdb
        >>> queries, positives, negs = read_vcdb(write_vcdb(pathlib.Path(tempfile.mkdtemp()), seed=0))
        >>> set(positives) <= set(queries)
        True
    """
    path = Path(path)
    data = load_pickle(path)
    if isinstance(data, dict) and "positives" in data:
        queries = _strings(data.get("queries", []), path, "['queries']")
        positives = {q: set(_strings(v, path, f"['positives'][{q!r}]"))
                     for q, v in _mapping(data["positives"], path, "['positives']").items()}
        return queries, positives, _strings(data.get("dataset", []), path, "['dataset']")
    if not isinstance(data, dict) or any(k not in data for k in ("video_pairs", "index", "negs")):
        raise _fail(path, "expected S2VS's keys (queries, positives, dataset) or TCA's (video_pairs, index, negs)")
    index = _strings(data["index"], path, "['index']")
    queries = list(dict.fromkeys(index[:VCDB_CORE]))
    positives: dict[str, set[str]] = {q: set() for q in queries}
    if not isinstance(data["video_pairs"], list):
        raise _fail(path, "['video_pairs'] must be a list")
    for i, pair in enumerate(data["video_pairs"]):
        videos = pair.get("videos") if isinstance(pair, dict) else None
        if not isinstance(videos, (list, tuple)) or len(videos) != 2 or not all(isinstance(v, str) for v in videos):
            raise _fail(path, f"['video_pairs'][{i}] must be a dict with 'videos': [id, id]")
        a, b = videos
        positives.setdefault(a, set()).add(b)
        positives.setdefault(b, set()).add(a)
    return queries, positives, list(dict.fromkeys(_strings(data["negs"], path, "['negs']")))


def load_vcdb(path: str | os.PathLike, distractors: bool = True) -> RetrievalAnnotations:
    """VCDB: S2VS layout (``queries``, ``positives {q: set}``, ``dataset``) or TCA's (``video_pairs``, ``index``).

    The database is the queries, plus the distractors (S2VS ``dataset`` / TCA ``negs``) when ``distractors``
    (S2VS's ``VCDB-DIST``); repeated ids appear once.

    Examples:
        >>> import tempfile, pathlib
        >>> from hapref.evaluation.fixtures import write_vcdb
        >>> path = write_vcdb(pathlib.Path(tempfile.mkdtemp()), seed=0)
        >>> len(load_vcdb(path, distractors=False).database) < len(load_vcdb(path).database)
        True
    """
    queries, positives, negs = read_vcdb(path)
    labels = {q: {v: frozenset({"copy"}) for v in positives.get(q, ())} for q in queries}
    database = list(dict.fromkeys([*queries, *(negs if distractors else [])]))
    return RetrievalAnnotations("VCDB", queries, database, labels, {"VCDB": frozenset({"copy"})})


def tile_to_min_len(frames: Tensor, min_len: int) -> Tensor:
    """Double a video ``[T, ...]`` until it has at least ``min_len`` frames, as the released loaders do.

    A 3-frame video becomes 6 frames for ``min_len`` 4 (the released S2VS / HAP-VR loaders; nothing is
    cut back to exactly ``min_len``).

    Examples:
        >>> tile_to_min_len(torch.arange(3.0)[:, None], 4).squeeze(1).tolist()
        [0.0, 1.0, 2.0, 0.0, 1.0, 2.0]
    """
    if frames.shape[0] < 1:
        raise ValueError(f"frames must hold at least one frame, got shape {tuple(frames.shape)}")
    while frames.shape[0] < min_len:
        frames = torch.cat([frames, frames])
    return frames


class HDF5Features(Dataset):
    """Per-video frame features from an HDF5 file with one dataset per video id (DnS / S2VS layout).

    Item: ``{"id", "index", "frames": float32 [T, R, D]}``; 2-D ``[T, D]`` arrays become ``[T, 1, D]``; a video
    shorter than ``min_len`` frames is doubled (the whole array repeated) until it has at least ``min_len``, as
    the released S2VS / HAP-VR loaders do (3 frames become 6 with ``min_len`` 4; S2VS uses 4, HAP-VR 8). Ids may
    contain ``/`` (CC_WEB_VIDEO's ``1/1_1_Y``): HDF5 stores them as nested groups, and ``ids=None`` lists every
    dataset at any depth. Ids missing from the file are listed in ``missing`` and skipped. Needs ``h5py``.

    Examples:
        >>> import tempfile, pathlib, h5py, numpy as np
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "features.hdf5"
        >>> with h5py.File(path, "w") as f:
        ...     f["1/1_1_Y"] = np.ones((3, 9, 8), dtype=np.float16)
        ...     f["q"] = np.ones((5, 8), dtype=np.float32)
        >>> data = HDF5Features(path, min_len=4)
        >>> data.ids, data[0]["frames"].shape, data[1]["frames"].shape
        (['1/1_1_Y', 'q'], torch.Size([6, 9, 8]), torch.Size([5, 1, 8]))
    """

    def __init__(self, path: str | os.PathLike, ids: Sequence[str] | None = None, min_len: int = 4) -> None:
        import h5py
        self.path, self.min_len = str(path), min_len
        if os.path.isfile(self.path) and not h5py.is_hdf5(self.path):
            raise ValueError(f"path {self.path} is not an HDF5 file (expected per-video feature datasets, e.g. "
                             f"written by python -m hapref.features)")
        with h5py.File(self.path, "r") as f:
            if ids is None:
                found: list[str] = []
                f.visititems(lambda name, obj: found.append(name) if isinstance(obj, h5py.Dataset)
                             and not name.startswith("__partial__") else None)   # an interrupted write
                wanted = sorted(found)
                present = set(found)
            else:
                wanted = list(ids)
                present = {v for v in wanted if isinstance(f.get(v), h5py.Dataset)}
        self.ids = [v for v in wanted if v in present]
        self.missing = [v for v in wanted if v not in present]
        self._file = None

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index: int) -> dict:
        if self._file is None:  # opened lazily so each DataLoader worker gets its own handle
            import h5py
            self._file = h5py.File(self.path, "r")
        try:
            x = torch.from_numpy(np.asarray(self._file[self.ids[index]], dtype=np.float32))
        except OSError as err:  # e.g. a Fletcher-32 checksum that no longer matches (a flipped bit)
            raise CorruptFileError(f"features of {self.ids[index]!r} in {self.path} cannot be read intact "
                                   f"({err})") from None
        if x.ndim == 2:
            x = x[:, None]
        if x.ndim != 3 or x.shape[0] == 0:
            raise ValueError(f"features of {self.ids[index]!r} must be [T, D] or [T, R, D] with T > 0, "
                             f"got {tuple(x.shape)}")
        if not torch.isfinite(x).all():
            raise ValueError(f"features of {self.ids[index]!r} in {self.path} hold NaN or inf values "
                             f"(frames {sorted(set((~torch.isfinite(x)).nonzero()[:, 0].tolist()))[:10]})")
        return {"id": self.ids[index], "index": index, "frames": tile_to_min_len(x, self.min_len)}

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_file": None}


class FramesDirectory(Dataset):
    """Decoded frames on disk: ``<root>/<id>.npy`` (uint8 ``[T, H, W, 3]``) or ``<root>/<id>/*.jpg|png`` (sorted).

    Item: ``{"id", "index", "frames": uint8 [T, H, W, 3]}``. Ids without frames are listed in ``missing``.

    Examples:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> np.save(root / "v1.npy", np.zeros((4, 8, 8, 3), dtype=np.uint8))
        >>> frames = FramesDirectory(root, ["v1", "v2"])
        >>> len(frames), frames.missing, frames[0]["frames"].shape
        (1, ['v2'], torch.Size([4, 8, 8, 3]))
        >>> FramesDirectory(root, ["../v1"])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: ids must be plain file names inside root (no path separators, '.' or '..'), got '../v1'
    """

    _IMAGES = (".jpg", ".jpeg", ".png")

    def __init__(self, root: str | os.PathLike, ids: Sequence[str] | None = None) -> None:
        self.root = Path(root)
        if ids is None:
            ids = sorted({p.stem if p.suffix == ".npy" else p.name for p in self.root.iterdir()
                          if p.suffix == ".npy" or p.is_dir()})
        for vid in ids:
            if not isinstance(vid, str) or not vid or vid in (".", "..") or "/" in vid or "\\" in vid \
                    or "\0" in vid:
                raise ValueError(f"ids must be plain file names inside root (no path separators, '.' or '..'), "
                                 f"got {vid!r}")
        self.ids = [v for v in ids if self._exists(v)]
        self.missing = [v for v in ids if not self._exists(v)]

    def _exists(self, vid: str) -> bool:
        return (self.root / f"{vid}.npy").exists() or (self.root / vid).is_dir()

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index: int) -> dict:
        vid = self.ids[index]
        if (self.root / f"{vid}.npy").exists():
            frames = torch.from_numpy(np.load(self.root / f"{vid}.npy", allow_pickle=False))
        else:
            from PIL import Image
            files = sorted(p for p in (self.root / vid).iterdir() if p.suffix.lower() in self._IMAGES)
            if not files:
                raise ValueError(f"folder {self.root / vid} holds no {self._IMAGES} frames")
            frames = torch.stack([torch.from_numpy(np.array(Image.open(p).convert("RGB"))) for p in files])
        if frames.dtype != torch.uint8 or frames.ndim != 4 or frames.shape[-1] != 3:
            raise ValueError(f"frames of {vid!r} must be uint8 [T, H, W, 3], got {frames.dtype} {tuple(frames.shape)}")
        return {"id": vid, "index": index, "frames": frames}
