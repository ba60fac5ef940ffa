"""From videos to a features file: the DnS / S2VS HDF5 layout that the trainer and the scorer read.

One dataset per video id holding float32 region features ``[T, R, D]`` (or frame features ``[T, D]``), frames
sampled at ``fps`` per second. The file's attribute ``hapref_features`` records how it was made (JSON:
backbone, pooling, whitening, frame rate, frame size, layout, D), so that a later run with other settings is
refused instead of mixing two kinds of features, and the readers can check what they get
(:func:`check_feature_file`). Each video is written under a temporary name and renamed when complete, then
flushed: an interrupted run leaves no partial entry under a real id, and re-running resumes.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
from torch import Tensor
from tqdm.auto import tqdm

from hapref.features.extractor import FeatureExtractor, released_frames
from hapref.features.whitening import PCAWhitening

#: Attribute of the HDF5 file holding its settings (JSON).
ATTRIBUTE = "hapref_features"
#: Prefix of an entry being written; such entries are removed when a run resumes and skipped by readers.
PARTIAL = "__partial__"
LAYOUTS = ("regions", "frames")
VIDEO_SUFFIXES = (".mp4", ".avi", ".mkv", ".webm", ".mov", ".flv", ".mpg", ".mpeg", ".m4v", ".3gp", ".wmv")


@dataclass(frozen=True)
class FeatureSettings:
    """How a features file is made; two files with equal settings hold comparable features.

    ``whitening`` names the PCA whitening (``"none"`` or ``"<file name>:<sha256 prefix>"``); ``resize`` /
    ``crop``: the shorter side is resized to ``resize`` and the centre ``crop`` square kept
    (:func:`hapref.features.released_frames`; the released S2VS extractor's 256 / 224); ``layout``
    ``"regions"`` (``[T, R, D]``) or ``"frames"`` (``[T, D]``, the L2-normalised mean of the regions);
    ``weights``: ``"default"`` (the backbone's usual local file) or the file given with ``--weights`` (named
    as ``whitening`` is). ``dims`` is D: 496 for the default EfficientNet-Lite0 with L3-iMAC (24 + 40 + 112 + 320
    channels), 3840 for ResNet-50 (the ``s2vs`` preset) and 512 once whitened with the ViSiL PCA file.

    Examples:
        >>> s = FeatureSettings(backbone="small-cnn", pooling="l3imac", resize=32, crop=32)
        >>> s.layout, s.fps, sorted(s.differences(replace(s, fps=2.0)))
        ('regions', 1.0, ['fps'])
    """

    backbone: str
    pooling: str
    whitening: str = "none"
    fps: float = 1.0
    resize: int = 256
    crop: int = 224
    layout: str = "regions"
    dims: int = 0              # D of the stored features (filled in by the writer)
    weights: str = "default"   # the backbone's weights: "default" or "<file name>:<sha256 prefix>" (--weights)

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {self.layout!r}")
        if not self.fps > 0:
            raise ValueError(f"fps must be > 0 frames per second, got {self.fps}")
        if self.crop < 8 or self.resize < self.crop:
            raise ValueError(f"crop must be >= 8 and resize >= crop, got resize={self.resize}, crop={self.crop}")

    def differences(self, other: FeatureSettings) -> dict[str, tuple]:
        """``{field: (mine, other's)}`` for every setting that differs.

        Examples:
            >>> a = FeatureSettings(backbone="small-cnn", pooling="l3imac")
            >>> a.differences(replace(a, pooling="imac", fps=2.0))
            {'pooling': ('l3imac', 'imac'), 'fps': (1.0, 2.0)}
        """
        a, b = asdict(self), asdict(other)
        return {k: (a[k], b[k]) for k in a if a[k] != b[k]}


#: Named settings: ``"s2vs"`` is the released S2VS / HAP-VR extractor (ResNet-50, the released L3-iMAC
#: windows, one frame per second, shorter side 256, centre crop 224; whitening with the ViSiL PCA file
#: ``pca_resnet50_vcdb_1M.pth``, given with ``--whitening``).
PRESETS: dict[str, dict] = {
    "s2vs": dict(backbone="resnet50", pooling="l3imac_released", fps=1.0, resize=256, crop=224, layout="regions"),
}


def _file_name(path: str | os.PathLike) -> str:
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    return f"{Path(path).name}:{digest}"


def whitening_name(path: str | os.PathLike | None) -> str:
    """``"none"`` or ``"<file name>:<first 16 hex digits of its SHA-256>"`` (how a file records its whitening).

    Examples:
        >>> whitening_name(None)
        'none'
    """
    if path is None:
        return "none"
    if not Path(path).is_file():
        raise FileNotFoundError(f"whitening must be a PCA file (ViSiL's pca_resnet50_vcdb_1M.pth or a "
                                f"PCAWhitening state_dict), got {str(path)!r}, which does not exist")
    return _file_name(path)


def weights_name(path: str | os.PathLike | None) -> str:
    """``"default"`` or ``"<file name>:<first 16 hex digits of its SHA-256>"`` (how a file records ``--weights``).

    Examples:
        >>> weights_name(None)
        'default'
        >>> weights_name("/nonexistent/resnet50.pth")
        Traceback (most recent call last):
        ...
        FileNotFoundError: --weights must be a local torchvision state dict file, got '/nonexistent/resnet50.pth', which does not exist
    """
    if path is None:
        return "default"
    if not Path(path).is_file():
        raise FileNotFoundError(f"--weights must be a local torchvision state dict file, got {str(path)!r}, "
                                "which does not exist")
    return _file_name(path)


def load_whitening(path: str | os.PathLike, dim: int = 512) -> PCAWhitening:
    """A PCA whitening from a file: the released ViSiL ``.pth`` / ``.npz`` layout or a hapref ``state_dict``.

    Examples:
        >>> import tempfile
        >>> white = PCAWhitening.fit(torch.randn(40, 6, dtype=torch.float64), dim=3)
        >>> path = Path(tempfile.mkdtemp()) / "white.pt"
        >>> torch.save(white.state_dict(), path)
        >>> load_whitening(path).out_dim
        3
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"whitening must be a PCA file (ViSiL's pca_resnet50_vcdb_1M.pth or a "
                                f"PCAWhitening state_dict), got {str(path)!r}, which does not exist")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:                      # not a torch file: the ViSiL loader knows the other layouts
        state = None
    if isinstance(state, dict) and {"mean", "projection"} <= set(state):
        return PCAWhitening(**state)
    return PCAWhitening.load_visil(str(path), dim=dim)


def read_settings(path: str | os.PathLike) -> FeatureSettings | None:
    """The settings a features file records (None for a file written by other tools, e.g. the released S2VS).

    Examples:
        >>> import tempfile, h5py
        >>> path = Path(tempfile.mkdtemp()) / "f.hdf5"
        >>> with h5py.File(path, "w") as f:
        ...     _ = f.create_dataset("v", data=np.ones((2, 3), np.float32))
        >>> read_settings(path) is None
        True
    """
    import h5py

    with h5py.File(str(path), "r") as f:
        raw = f.attrs.get(ATTRIBUTE)
    if raw is None:
        return None
    return FeatureSettings(**json.loads(raw))


def check_feature_file(path: str | os.PathLike, *, dims: int | None = None, pooling: str | None = None,
                       layout: str | None = None, what: str = "the model") -> FeatureSettings | None:
    """Check that a features file holds what a reader expects; returns its recorded settings.

    ``dims`` (D per region or frame), ``pooling`` and ``layout`` are compared with the file's attributes when it
    has them (``dims`` also with the first dataset when it does not); a mismatch is a ValueError naming both
    sides, e.g. a checkpoint trained on 512-d features given a 128-d file.

    Examples:
        >>> import tempfile, h5py
        >>> path = Path(tempfile.mkdtemp()) / "f.hdf5"
        >>> with h5py.File(path, "w") as f:
        ...     _ = f.create_dataset("v", data=np.ones((2, 9, 8), np.float32))
        >>> check_feature_file(path, dims=8) is None
        True
        >>> check_feature_file(path, dims=16, what="checkpoint run/")
        Traceback (most recent call last):
        ...
        ValueError: features file ... holds 8-d features, checkpoint run/ expects 16-d
    """
    import h5py

    settings = read_settings(path)
    found = settings.dims if settings is not None else None
    if found is None or found == 0:
        with h5py.File(str(path), "r") as f:
            first: list = []
            f.visititems(lambda name, obj: first.append(obj.shape) if isinstance(obj, h5py.Dataset)
                         and not name.startswith(PARTIAL) and not first else None)
        found = int(first[0][-1]) if first else None
    if dims is not None and found is not None and found != dims:
        raise ValueError(f"features file {path} holds {found}-d features, {what} expects {dims}-d")
    if settings is not None and pooling is not None and settings.pooling != pooling:
        raise ValueError(f"features file {path} was pooled with {settings.pooling!r}, {what} expects {pooling!r}")
    if settings is not None and layout is not None and settings.layout != layout:
        raise ValueError(f"features file {path} holds {settings.layout} features, {what} expects {layout}")
    return settings


def input_id(path: str | os.PathLike) -> str:
    """The video id of an input: the file name without its suffix, or the folder name.

    Examples:
        >>> input_id("videos/abc123.mp4"), input_id("frames/abc123/"), input_id("x/v1.npy")
        ('abc123', 'abc123', 'v1')
    """
    p = Path(path)
    return p.name if p.is_dir() or str(path).endswith(("/", os.sep)) else p.stem


def read_input(path: str | os.PathLike, fps: float) -> Tensor:
    """uint8 frames ``[T, H, W, 3]`` of one input: a video file (decoded with PyAV at ``fps``), an ``.npy`` array
    of frames, or a folder of ``.jpg`` / ``.png`` frames (taken as already sampled).

    Examples:
        >>> from hapref.data.sources import clip_path
        >>> read_input(clip_path("bikes"), fps=1.0).shape[-1]
        3
    """
    from hapref.data.loaders import FramesDirectory
    from hapref.data.sources import decode_video

    p = Path(path)
    if p.is_dir():
        return FramesDirectory(p.parent, [p.name])[0]["frames"]
    if p.suffix == ".npy":
        frames = torch.from_numpy(np.load(p, allow_pickle=False))
        if frames.dtype != torch.uint8 or frames.ndim != 4 or frames.shape[-1] != 3:
            raise ValueError(f"{p} must hold uint8 frames [T, H, W, 3], got {frames.dtype} {tuple(frames.shape)}")
        return frames
    if not p.is_file():
        raise FileNotFoundError(f"{p} is neither a video file, an .npy frames file nor a frames folder")
    return decode_video(p, fps=fps)


def read_list(path: str | os.PathLike) -> list[str]:
    """Inputs named in a list file, one per line (blank lines and ``#`` comments skipped); relative entries are
    taken relative to the list file's folder.

    Examples:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp())
        >>> _ = (root / "list.txt").write_text("a.mp4\\n# skipped\\n\\nsub/b.mp4\\n")
        >>> [Path(p).relative_to(root).as_posix() for p in read_list(root / "list.txt")]
        ['a.mp4', 'sub/b.mp4']
    """
    root = Path(path).parent
    entries = []
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            entries.append(str(line if os.path.isabs(line) else root / line))
    return entries


def video_features(extractor: FeatureExtractor, frames: Tensor, settings: FeatureSettings) -> Tensor:
    """Features of one video's frames as the file stores them: float32 ``[T, R, D]`` or ``[T, D]``.

    Frames are resized and centre-cropped (:func:`hapref.features.released_frames`; the released extractor
    does this itself), then go through ``extractor``; ``layout="frames"`` takes the L2-normalised mean of the
    regions.

    Examples:
        >>> from hapref.features import SmallCNN
        >>> extractor = FeatureExtractor(SmallCNN(image_size=32))
        >>> settings = FeatureSettings(backbone="small-cnn", pooling="l3imac", resize=32, crop=32, layout="frames")
        >>> video_features(extractor, torch.zeros(3, 40, 48, 3, dtype=torch.uint8), settings).shape
        torch.Size([3, 240])
    """
    x = frames if extractor.released else released_frames(frames, settings.resize, settings.crop)
    out = extractor(x)
    if settings.layout == "frames" and out.ndim == 3:
        out = torch.nn.functional.normalize(out.mean(dim=1), dim=-1)
    return out.float().cpu()


@dataclass
class WriteReport:
    """What a run of :func:`write_features` did: ids written, ids already present (skipped), failures.

    Examples:
        >>> WriteReport(written=["v1"], failed={"v2": "ValueError: no frames"}).failed
        {'v2': 'ValueError: no frames'}
    """

    written: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


def write_features(inputs: Sequence[str | os.PathLike], out: str | os.PathLike, extractor: FeatureExtractor,
                   settings: FeatureSettings, progress: bool = True) -> WriteReport:
    """Extract every input's features into the HDF5 file ``out`` (created or resumed); returns a report.

    ``inputs``: video files, ``.npy`` frame arrays or frame folders (:func:`read_input`), each stored under its
    :func:`input_id`. Videos already in ``out`` are skipped; a file written with other settings is refused
    (ValueError naming each differing setting). An unreadable input is reported in ``failed`` and skipped; no
    partial entry is left under its id. ``settings.dims`` is filled in from the first video.

    Examples:
        >>> import tempfile, h5py
        >>> from hapref.features import SmallCNN
        >>> root = Path(tempfile.mkdtemp())
        >>> np.save(root / "v1.npy", np.zeros((3, 40, 48, 3), np.uint8))
        >>> extractor = FeatureExtractor(SmallCNN(image_size=32))
        >>> settings = FeatureSettings(backbone="small-cnn", pooling="l3imac", resize=32, crop=32)
        >>> report = write_features([root / "v1.npy", root / "nope.mp4"], root / "f.hdf5", extractor, settings,
        ...                         progress=False)
        >>> report.written, list(report.failed)
        (['v1'], ['nope'])
        >>> with h5py.File(root / "f.hdf5", "r") as f:
        ...     f["v1"].shape, json.loads(f.attrs[ATTRIBUTE])["dims"]
        ((3, 9, 240), 240)
    """
    import h5py

    ids = [input_id(p) for p in inputs]
    seen: dict[str, str] = {}
    for vid, path in zip(ids, inputs):
        if vid in seen:
            raise ValueError(f"inputs {seen[vid]!s} and {path!s} have the same video id {vid!r}")
        seen[vid] = str(path)
    report = WriteReport()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with h5py.File(str(out), "a") as f:
        stored = f.attrs.get(ATTRIBUTE)
        if stored is not None:
            previous = FeatureSettings(**json.loads(stored))
            differ = replace(previous, dims=0).differences(replace(settings, dims=0))
            if differ:
                named = ", ".join(f"{k}: file {a!r} vs now {b!r}" for k, (a, b) in differ.items())
                raise ValueError(f"{out} was written with other settings ({named}); choose another --out")
            settings = replace(settings, dims=previous.dims)
        elif len(f.keys()):
            raise ValueError(f"{out} already holds datasets but no {ATTRIBUTE} attribute (not written by "
                             f"hapref.features); choose another --out")
        for name in [k for k in f.keys() if k.startswith(PARTIAL)]:   # left by an interrupted run
            del f[name]
        for vid, path in tqdm(list(zip(ids, inputs)), disable=not progress, desc="videos", unit="video"):
            if isinstance(f.get(vid), h5py.Dataset):
                report.skipped.append(vid)
                continue
            try:
                features = video_features(extractor, read_input(path, settings.fps), settings)
            except ModuleNotFoundError:   # a missing decoder fails every video: say so once (the CLI names the extra)
                raise
            except Exception as err:  # noqa: BLE001 - reported at the end, the run goes on
                report.failed[vid] = f"{type(err).__name__}: {err}"
                continue
            if settings.dims == 0:
                settings = replace(settings, dims=int(features.shape[-1]))
                f.attrs[ATTRIBUTE] = json.dumps(asdict(settings), sort_keys=True)
            elif features.shape[-1] != settings.dims:
                report.failed[vid] = f"ValueError: {features.shape[-1]}-d features, the file holds {settings.dims}-d"
                continue
            temporary = f"{PARTIAL}{hashlib.sha256(vid.encode()).hexdigest()[:16]}"
            f.create_dataset(temporary, data=features.numpy())
            f.move(temporary, vid)
            f.flush()
            report.written.append(vid)
    return report


def build_extractor(settings: FeatureSettings, whitening: str | os.PathLike | None = None,
                    batch_size: int = 64, weights: str | os.PathLike | None = None) -> FeatureExtractor:
    """The :class:`FeatureExtractor` of ``settings`` (a whitening file is loaded and checked against its name;
    ``weights``, the backbone's state dict file for ``resnet50`` / ``alexnet``, likewise).

    Examples:
        >>> build_extractor(FeatureSettings(backbone="small-cnn", pooling="l3imac", resize=32, crop=32)).pooling
        'l3imac'
    """
    from hapref.features.backbones import load_backbone

    white = None
    if whitening is not None:
        white = load_whitening(whitening)
        if settings.whitening != whitening_name(whitening):
            raise ValueError(f"settings name whitening {settings.whitening!r}, the file is "
                             f"{whitening_name(whitening)!r}")
    kwargs = {"image_size": settings.crop} if settings.backbone in ("efficientnet-lite0", "small-cnn") else {}
    if settings.weights != weights_name(weights):
        raise ValueError(f"settings name weights {settings.weights!r}, the file is {weights_name(weights)!r}")
    if weights is not None:
        if settings.backbone not in ("resnet50", "alexnet"):
            raise ValueError(f"--weights applies to the resnet50 and alexnet backbones (their torchvision state "
                             f"dict), not {settings.backbone!r}, whose weights ship with hapref")
        kwargs["weights_path"] = weights
    return FeatureExtractor(load_backbone(settings.backbone, **kwargs), pooling=settings.pooling,
                            whitening=white, batch_size=batch_size)


__all__ = ["ATTRIBUTE", "FeatureSettings", "PRESETS", "WriteReport", "build_extractor", "check_feature_file",
           "input_id", "load_whitening", "read_input", "read_list", "read_settings", "video_features", "weights_name",
           "whitening_name", "write_features"]
