"""Where the real benchmarks' files come from (the released HAP-VR code, https://github.com/yafeng19/HAP-VR) and how to fetch them.

Annotation files are pinned to a repository commit, so their bytes cannot change under a recorded
checksum. No official SHA-256 or exact size is published for any of them, nor for the feature files: the
first download records its SHA-256 (``<file>.sha256.json``, ``"source": "first-download"``) and later runs
verify against it. Feature files are hundreds of GB in some cases (FIVR-200K 406 GB).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from hapref.data.download import download


@dataclass(frozen=True)
class RemoteFile:
    """One file to fetch: its URL, the name to store it under and, where published, its checksum and size."""

    url: str
    filename: str
    sha256: str | None = None
    size: int | None = None
    approx_size: str = ""


def _raw(repo: str, commit: str, path: str) -> str:
    return f"https://raw.githubusercontent.com/{repo}/{commit}/{path}"


_S2VS, _S2VS_AT = "gkordo/s2vs", "52ddd565d557c407324615decda28a71c5c77a63"
_VISIL, _VISIL_AT = "MKLab-ITI/visil", "8571f6ffc856d79ff11ed962f04f0dd594b35e74"
_VISIL_SVD_AT = "0b383bfa711a0d294604e9a28c20cc5c2263f97b"
_FIVR, _FIVR_AT = "MKLab-ITI/FIVR-200K", "748ec73f65ce1de6bbdff1abf724e9c7e814986c"
_TCA, _TCA_AT = "xwen99/temporal_context_aggregation", "fb76558c5157956ab1c2e9c520fc89318dc83952"

#: Annotation files per dataset (loaders in :mod:`hapref.data.loaders`).
ANNOTATIONS: dict[str, tuple[RemoteFile, ...]] = {
    "fivr": (RemoteFile(_raw(_S2VS, _S2VS_AT, "data/fivr_audio.pickle"), "fivr.pickle"),
             RemoteFile(_raw(_S2VS, _S2VS_AT, "data/fivr_easy_duplicates.txt"), "fivr_easy_duplicates.txt"),
             RemoteFile(_raw(_FIVR, _FIVR_AT, "dataset/annotation.json"), "annotation.json"),
             RemoteFile(_raw(_FIVR, _FIVR_AT, "dataset/youtube_ids.txt"), "youtube_ids.txt")),
    "evve": (RemoteFile(_raw(_VISIL, _VISIL_AT, "datasets/evve.pickle"), "evve.pickle"),),
    "svd": (RemoteFile(_raw(_VISIL, _VISIL_SVD_AT, "datasets/test_groundtruth"), "test_groundtruth"),),
    "cc_web_video": (RemoteFile(_raw(_VISIL, _VISIL_AT, "datasets/cc_web_video.pickle"), "cc_web_video.pickle"),),
    "vcdb": (RemoteFile(_raw(_TCA, _TCA_AT, "datasets/vcdb.pickle"), "vcdb.pickle"),),
    "dns_100k": (RemoteFile(_raw(_S2VS, _S2VS_AT, "data/dns_100k.txt"), "dns_100k.txt"),),
}

_DNS = "https://mever.iti.gr/distill-and-select/features/{}.hdf5"
_S2VS_FEATURES = "https://mever.iti.gr/s2vs/features/{}.hdf5"
#: Frame-feature HDF5 files (one dataset per video id, ``[T, R, 512]``), by source and dataset.
FEATURES: dict[str, dict[str, RemoteFile]] = {
    "dns": {name: RemoteFile(_DNS.format(name), f"{name}.hdf5", approx_size=approx) for name, approx in
            (("evve", "9 GB"), ("svd", "150 GB"), ("fivr_5k", "8.7 GB"), ("fivr_200k", "406 GB"))},
    "s2vs": {name: RemoteFile(_S2VS_FEATURES.format(name), f"{name}.hdf5") for name in
             ("fivr_5k", "fivr_200k", "vcdb", "evve")},
}

#: Datasets whose videos can only be obtained by hand (forms, licences, YouTube): where to go.
VIDEO_SOURCES: dict[str, str] = {
    "fivr": "https://github.com/MKLab-ITI/FIVR-200K (download_dataset.py with dataset/youtube_ids.txt, yt-dlp)",
    "vcdb": "https://fvl.fudan.edu.cn/dataset/vcdb/list.htm (core + ~100K background videos, ~1.1 TB)",
    "evve": "http://pascal.inrialpes.fr/data/evve/",
    "cc_web_video": "http://vireo.cs.cityu.edu.hk/webvideo/",
}


def fetch(files: tuple[RemoteFile, ...] | list[RemoteFile], folder: str | os.PathLike, progress: bool = True,
          ) -> list[Path]:
    """Download (resuming, verifying) each file into ``folder``; returns their paths."""
    return [download(f.url, Path(folder) / f.filename, sha256=f.sha256, size=f.size, progress=progress)
            for f in files]
