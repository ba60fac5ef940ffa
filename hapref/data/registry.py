"""Where the real benchmarks' files come from: a table of URLs, checksums and sizes (no downloading here).

Annotation files are pinned to a repository commit, and the registry records the SHA-256 and size of each
(computed from the files at those commits): :func:`hapref.data.download.fetch` refuses any other bytes. No
checksum or exact size is published for the feature files (hundreds of GB in some cases, FIVR-200K 406 GB):
there the size the server announces must be reached, and the SHA-256 of the first complete download is
recorded (``<file>.sha256.json``, ``"source": "first-download"``) and checked on later runs.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RemoteFile:
    """One file to fetch: its URL, the name to store it under and, where published, its checksum and size.

    Examples:
        >>> RemoteFile("https://example.org/a.bin", "a.bin")
        RemoteFile(url='https://example.org/a.bin', filename='a.bin', sha256=None, size=None, approx_size='')
        >>> ANNOTATIONS["fivr"][0].filename, ANNOTATIONS["fivr"][0].size
        ('fivr.pickle', 3469558)
    """

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
    "fivr": (RemoteFile(_raw(_S2VS, _S2VS_AT, "data/fivr_audio.pickle"), "fivr.pickle",
                        "41dc5f5aa3f9d0d9dae70dbea9054fb8fd55a5199fb3ffc554cfd68078158d8c", 3469558),
             RemoteFile(_raw(_S2VS, _S2VS_AT, "data/fivr_easy_duplicates.txt"), "fivr_easy_duplicates.txt",
                        "b50b7135d68d686c9a09f16196e134cab36d16007377c53f54c49ba83bc7efdb", 58476),
             RemoteFile(_raw(_FIVR, _FIVR_AT, "dataset/annotation.json"), "annotation.json",
                        "8ca1c5aeaa1fd25464346472a251ec1ef5bae360f1f5f2325934a6df0ad7f493", 314468),
             RemoteFile(_raw(_FIVR, _FIVR_AT, "dataset/youtube_ids.txt"), "youtube_ids.txt",
                        "6fa192644eb84f4a3b88839d850de9d38ac25de90622ccb8cf4a111a75829c06", 2711520)),
    "evve": (RemoteFile(_raw(_VISIL, _VISIL_AT, "datasets/evve.pickle"), "evve.pickle",
                        "0898fafc817b9457be25cafeefa996d78d1021fb4816a9e3c1a14b7493023410", 102837),),
    "svd": (RemoteFile(_raw(_VISIL, _VISIL_SVD_AT, "datasets/test_groundtruth"), "test_groundtruth",
                       "3bd4d69b2f22f718689bd0fde29be2342800227af1b82dca4c6a747e18f9d92d", 317750),),
    "cc_web_video": (RemoteFile(_raw(_VISIL, _VISIL_AT, "datasets/cc_web_video.pickle"), "cc_web_video.pickle",
                                "6c33932cfa6ed08eb02fb47189b38bcef124c07794e99adf5c04163dcf4c52fe", 407543),),
    "vcdb": (RemoteFile(_raw(_TCA, _TCA_AT, "datasets/vcdb.pickle"), "vcdb.pickle",
                        "6cec73506f401c4dc6d0af2757b2927307cff1dcb6f1c5d9d6775e358fefe4bf", 3436828),),
    "dns_100k": (RemoteFile(_raw(_S2VS, _S2VS_AT, "data/dns_100k.txt"), "dns_100k.txt",
                            "7fe7dc4715966360521a94af88adeb3c45fd633c29fcd94f472e1ef2a227517a", 1389504),),
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
