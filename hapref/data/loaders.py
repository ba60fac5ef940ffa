"""Readers for the real benchmarks' annotation files and for their features / frames on local disk.

Annotation layouts follow the S2VS evaluation code, https://github.com/gkordo/s2vs (the files shipped with S2VS / HAP-VR / TCA and the official
sites); nothing here downloads (see ``data_scripts/``). Every loader returns :class:`RetrievalAnnotations`,
which offers the same ``relevance(task)`` as the generated :class:`~hapref.data.benchmark.CopyBenchmark`.

================  ==========================================  ===============================================
dataset           file                                        tasks (labels counted relevant)
================  ==========================================  ===============================================
FIVR-5K / 200K    ``fivr.pickle`` / ``annotation.json``       DSVR (ND, DS), CSVR (+CS), ISVR (+IS), DAVR (DA)
EVVE              ``evve.pickle``                             EVVE (the event's positives)
SVD               ``test_groundtruth`` (+ unlabeled id list)  SVD (label 1)
CC_WEB_VIDEO      ``cc_web_video.pickle``                     CC_WEB (E, S, L, M, V)
VCDB              ``vcdb.pickle`` (S2VS or TCA layout)        VCDB (copy pairs)
================  ==========================================  ===============================================
"""

from __future__ import annotations

import json
import os
import pickle
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import Tensor
from torch.utils.data import Dataset

FIVR_TASKS = {"DSVR": frozenset({"ND", "DS"}), "CSVR": frozenset({"ND", "DS", "CS"}),
              "ISVR": frozenset({"ND", "DS", "CS", "IS"}), "DAVR": frozenset({"DA"})}
CC_WEB_POSITIVE = frozenset("ESLMV")


@dataclass
class RetrievalAnnotations:
    """Queries, database and per-query labels ``{query: {video: label}}`` of a retrieval benchmark."""

    name: str
    queries: list[str]
    database: list[str]
    labels: dict[str, dict[str, str]]
    tasks: dict[str, frozenset[str]]
    excluded: dict[str, frozenset[str]] = field(default_factory=dict)

    def relevance(self, task: str | None = None) -> Tensor:
        """Bool ``[Q, N]``: video n carries one of ``task``'s labels for query q (default: the first task)."""
        task = task or next(iter(self.tasks))
        if task not in self.tasks:
            raise ValueError(f"task must be one of {sorted(self.tasks)} for {self.name}, got {task!r}")
        return self._matrix(lambda label: label in self.tasks[task])

    def annotated(self) -> Tensor:
        """Bool ``[Q, N]``: video n has any label for query q (CC_WEB_VIDEO's and SVD's labelled subsets)."""
        return self._matrix(lambda label: True)

    def _matrix(self, keep) -> Tensor:
        column = {vid: j for j, vid in enumerate(self.database)}
        out = torch.zeros(len(self.queries), len(self.database), dtype=torch.bool)
        for i, q in enumerate(self.queries):
            for vid, label in self.labels.get(q, {}).items():
                if vid in column and vid != q and keep(label):
                    out[i, column[vid]] = True
        return out

    def without(self, ids: Iterable[str]) -> RetrievalAnnotations:
        """Drop ``ids`` from the database (FIVR's "hard" setting removes ``fivr_easy_duplicates.txt``)."""
        drop = set(ids)
        return RetrievalAnnotations(self.name, self.queries, [v for v in self.database if v not in drop],
                                    self.labels, self.tasks, self.excluded)

    def restrict(self, available: Iterable[str]) -> RetrievalAnnotations:
        """Keep only videos in ``available`` (e.g. those whose features exist, FIVR-200K issue #2)."""
        keep = set(available)
        return RetrievalAnnotations(self.name, [q for q in self.queries if q in keep],
                                    [v for v in self.database if v in keep], self.labels, self.tasks, self.excluded)


def _ordered(ids: Iterable[str]) -> list[str]:
    """Lists keep their order; sets (whose order changes with Python's hash seed) are sorted."""
    return list(ids) if isinstance(ids, (list, tuple)) else sorted(ids)


def _read_pickle(path: str | os.PathLike) -> dict:
    with open(path, "rb") as f:
        return pickle.load(f)  # the official annotation files are pickles; only open files you trust


def load_fivr(path: str | os.PathLike, version: str = "5k", database_ids: Sequence[str] | None = None,
              ) -> RetrievalAnnotations:
    """FIVR-5K/200K: S2VS's pickle (keys ``5k``, ``200k``, ``annotation``) or the official ``annotation.json``.

    With the JSON file the queries are its keys and the database is ``database_ids`` (e.g. the lines of
    ``youtube_ids.txt``) or, if not given, every annotated video.
    """
    if version not in ("5k", "200k"):
        raise ValueError(f"version must be '5k' or '200k', got {version!r}")
    path = Path(path)
    if path.suffix == ".json":
        annotation = json.loads(path.read_text())
        queries = sorted(annotation)
        database = list(database_ids) if database_ids is not None else sorted(
            {v for q in annotation.values() for ids in q.values() for v in ids} | set(queries))
    else:
        data = _read_pickle(path)
        annotation, queries = data["annotation"], _ordered(data[version]["queries"])
        database = list(database_ids) if database_ids is not None else _ordered(data[version]["database"])
    labels = {q: {v: label for label, ids in annotation.get(q, {}).items() for v in ids} for q in queries}
    return RetrievalAnnotations(f"FIVR-{version.upper()}", queries, database, labels, dict(FIVR_TASKS))


def load_evve(path: str | os.PathLike) -> RetrievalAnnotations:
    """EVVE: ``annotation {event: (query_set, positive_set, null_set)}``, ``queries``, ``database``."""
    data = _read_pickle(path)
    labels: dict[str, dict[str, str]] = {}
    for event, (query_set, positives, _null) in data["annotation"].items():
        for q in query_set:
            labels[q] = {v: event for v in positives}
    return RetrievalAnnotations("EVVE", _ordered(data["queries"]), _ordered(data["database"]), labels,
                                {"EVVE": frozenset(data["annotation"])})


def load_svd(path: str | os.PathLike, unlabeled: str | os.PathLike | None = None) -> RetrievalAnnotations:
    """SVD: ``test_groundtruth`` lines ``qid.mp4 cid.mp4 label``; ``unlabeled`` ids (one a line) join the database."""
    labels: dict[str, dict[str, str]] = {}
    database: dict[str, None] = {}
    for line in Path(path).read_text().splitlines():
        if not line.strip():
            continue
        q, c, label = line.split()
        q, c = q.removesuffix(".mp4"), c.removesuffix(".mp4")
        labels.setdefault(q, {})[c] = label
        database[c] = None
    if unlabeled is not None:
        for line in Path(unlabeled).read_text().splitlines():
            if line.strip():
                database.setdefault(line.strip().removesuffix(".mp4"), None)
    return RetrievalAnnotations("SVD", sorted(labels), list(database), labels, {"SVD": frozenset({"1"})})


def load_cc_web_video(path: str | os.PathLike) -> RetrievalAnnotations:
    """CC_WEB_VIDEO: ``index {"set/basename": int}``, ``queries``, ``ground_truth [{int: label}]``, ``excluded``."""
    data = _read_pickle(path)
    name_of = {i: vid for vid, i in data["index"].items()}
    queries = list(data["queries"])
    labels = {q: {name_of[i]: label for i, label in gt.items() if i in name_of}
              for q, gt in zip(queries, data["ground_truth"])}
    excluded = {q: frozenset(name_of.get(i, i) for i in ex) for q, ex in zip(queries, data.get("excluded", []))}
    return RetrievalAnnotations("CC_WEB_VIDEO", queries, list(data["index"]), labels,
                                {"CC_WEB": CC_WEB_POSITIVE}, excluded)


def load_vcdb(path: str | os.PathLike, distractors: bool = True) -> RetrievalAnnotations:
    """VCDB: S2VS layout (``queries``, ``positives {q: set}``, ``dataset``) or TCA's (``video_pairs``, ``index``).

    Without ``distractors`` the database is the core set only (S2VS's ``VCDB``; with them ``VCDB-DIST``).
    """
    data = _read_pickle(path)
    labels: dict[str, dict[str, str]] = {}
    if "positives" in data:
        queries = _ordered(data["queries"])
        for q in queries:
            labels[q] = {v: "copy" for v in data["positives"].get(q, ())}
        database = list(dict.fromkeys([*queries, *(_ordered(data.get("dataset", [])) if distractors else [])]))
    else:
        index = list(data["index"])
        queries = index[:528]  # the core set (TCA's convention)
        for pair in data["video_pairs"]:
            a, b = pair["videos"]
            labels.setdefault(a, {})[b] = "copy"
            labels.setdefault(b, {})[a] = "copy"
        database = index if distractors else queries
    return RetrievalAnnotations("VCDB", queries, database, labels, {"VCDB": frozenset({"copy"})})


class HDF5Features(Dataset):
    """Per-video frame features from an HDF5 file with one dataset per video id (DnS / S2VS layout).

    Item: ``{"id", "index", "frames": float32 [T, R, D]}``; 2-D ``[T, D]`` arrays become ``[T, 1, D]``; videos
    shorter than ``min_len`` are tiled (S2VS uses 4, HAP-VR 8). Ids missing from the file are listed in
    ``missing`` and skipped. Needs ``h5py``.
    """

    def __init__(self, path: str | os.PathLike, ids: Sequence[str] | None = None, min_len: int = 4) -> None:
        import h5py
        self.path, self.min_len = str(path), min_len
        with h5py.File(self.path, "r") as f:
            present = set(f.keys())
        wanted = list(ids) if ids is not None else sorted(present)
        self.ids = [v for v in wanted if v in present]
        self.missing = [v for v in wanted if v not in present]
        self._file = None

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index: int) -> dict:
        if self._file is None:  # opened lazily so each DataLoader worker gets its own handle
            import h5py
            self._file = h5py.File(self.path, "r")
        x = torch.from_numpy(np.asarray(self._file[self.ids[index]], dtype=np.float32))
        if x.ndim == 2:
            x = x[:, None]
        if x.ndim != 3 or x.shape[0] == 0:
            raise ValueError(f"features of {self.ids[index]!r} must be [T, D] or [T, R, D] with T > 0, "
                             f"got {tuple(x.shape)}")
        if x.shape[0] < self.min_len:
            x = x.repeat(-(-self.min_len // x.shape[0]), 1, 1)[:self.min_len]
        return {"id": self.ids[index], "index": index, "frames": x}

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_file": None}


class FramesDirectory(Dataset):
    """Decoded frames on disk: ``<root>/<id>.npy`` (uint8 ``[T, H, W, 3]``) or ``<root>/<id>/*.jpg|png`` (sorted).

    Item: ``{"id", "index", "frames": uint8 [T, H, W, 3]}``. Ids without frames are listed in ``missing``.
    """

    _IMAGES = (".jpg", ".jpeg", ".png")

    def __init__(self, root: str | os.PathLike, ids: Sequence[str] | None = None) -> None:
        self.root = Path(root)
        if ids is None:
            ids = sorted({p.stem if p.suffix == ".npy" else p.name for p in self.root.iterdir()
                          if p.suffix == ".npy" or p.is_dir()})
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
