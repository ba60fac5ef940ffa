"""The HAP-VR training pipeline (HAP-VR §3.4 Algorithm 1, §4.1) on the book's copy-detection benchmark.

Self-supervised: a batch holds B unlabeled training clips, each with a weak and a strong view drawn
with the released S2VS/HAP-VR recipe (:func:`hapref.data.views.s2vs_batch`: weak = crop of 80–100 % area
+ flip with p 0.5; strong = temporal transform, 50–100 % crop, RandAugment, overlays, blur; then
Video-in-Video), so the N = 2B videos have S2VS labels (diagonal, weak_i <-> strong_i and the clips mixed
by Video-in-Video relevant). The backbone is frozen; the student's region features (L3-iMAC, PCA-whitened)
and the teacher's frame embeddings come from one backbone pass. With ``resample`` (full, released) every
step draws fresh views and runs the backbone; the CPU profiles draw each step's batch from a cached pool
of ``view_batches`` independently augmented batches. Training runs the region attention, ψ and the
losses of Eq. 15 with the released temporal top-K rate 0.03. Evaluation: DSVR mAP and μAP of query ×
database similarities.

Real data: ``features`` (``--features FILE.hdf5``) trains on pre-extracted region features in the DnS/S2VS
layout instead, with temporal views only (:mod:`hapref.data.feature_views`; the frame teacher is the
region mean of the features) and evaluates copy retrieval of the last ``held_out`` videos of the file.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

import torch
from torch import Tensor, nn

from hapref.data.benchmark import build_copy_benchmark
from hapref.data.cache import config_key, data_root, file_lock, load_cached, parallel_map, source_digest
from hapref.data import augment as augment_module, views as views_module
from hapref.data.augment import TEMPORAL_P, check_temporal_p
from hapref.data.feature_views import feature_batch, held_out_copies, read_feature_videos
from hapref.data.views import FrameClips, s2vs_batch
from hapref.features import PCAWhitening, load_backbone, pool_layers
from hapref.features import backbones as backbones_module, pooling as pooling_module
from hapref.files import atomic_torch_save
from hapref.losses import HAPVRObjective, teacher_frame_similarity
from hapref.metrics import map_and_micro_ap
from hapref.models.hapvr import VIDEO_LOSSES, build_hapvr_network, frame_ranking_loss, video_ranking_loss
from hapref.similarity.network import VideoSimilarityNetwork, pad_videos
from hapref.train.distributed_step import (check_ap_scope, global_scope, hapvr_global_terms, pool_pick, rank_batch,
                                           rank_stream)
from hapref.train.loop import TrainConfig
from hapref.train.settings import named_profile, override_all
from hapref.utils import at_least_float32, cache_per_dtype, get_device

LOSSES: tuple[str, ...] = VIDEO_LOSSES
#: The paper's method: QuadLinear-AP at the video level (plus the frame-level AP term, HAP-VR Eq. 15).
DEFAULT_LOSS = "quadlinear_ap"
DATA_VERSION = 2
DATA_FIELDS = ("benchmark", "train_clips", "frames", "stride", "view_batches", "batch_videos", "whiten_dim",
               "frames_dir", "backbone", "teacher", "benchmark_seed", "pooling", "dino_checkpoint", "shuffle_views",
               "temporal_p")
TEACHERS = ("backbone", "dino")


@dataclass(frozen=True)
class HAPVRProfile:
    """Sizes of one run: data, views, batch and schedule.

    Examples:
        >>> from dataclasses import replace
        >>> p = PROFILES["smoke"]
        >>> p.batch_videos, p.frames, replace(p, steps=2).steps
        (4, 8, 2)
    """

    benchmark: str          # hapref.data benchmark profile
    train_clips: int        # unlabeled clips used (the first ones of the split)
    frames: int             # frames per training view (S2VS window_sz), from every ``stride``-th frame of a clip
    stride: int
    view_batches: int       # cached augmented batches (the pool of the CPU profiles; whitening is fit on them)
    whiten_dim: int
    batch_videos: int       # B clips per batch -> N = 2B videos
    steps: int
    lr: float
    warmup_steps: int
    eval_every: int = 0
    resample: bool = False  # True: fresh views and a backbone pass at every step (the released recipe)
    backbone: str = "efficientnet-lite0"
    teacher: str = "backbone"   # frame teacher of the frame-level AP: the backbone's global embedding or DINO
    weight_decay: float = 1e-2
    features: str | None = None  # HDF5 frame features (DnS/S2VS layout) to train on instead of the benchmark
    held_out: int = 8           # with ``features``: the last videos of the file, kept out for evaluation
    frames_dir: str | None = None   # decoded frames (FramesDirectory layout) as the unlabeled training clips
    benchmark_seed: int = 0     # instance of the benchmark design (``build_copy_benchmark(seed=...)``)
    dino_checkpoint: str | None = None  # teacher="dino": a local DINO ViT-S/16 file (features.load_dino_vits16)
    pooling: str = ""           # student regions: "" = auto (FrameEncoder.pooling_for), "l3imac" or "l3imac_released"
    shuffle_views: bool = True  # S2VS strong views shuffle-dropout their segments; False keeps the order (departure)
    psi_init: str = "xavier"    # ψ's initialisation: "xavier" (released) or "pooling" (hapref's, a 4x4 max-pool)
    pair_batches: bool = True   # with reshoots in the unlabeled split: batches of (clip, reshoot) pairs; False
    #                             draws the batch's clips uniformly (chapter 4's random-batch control)
    temporal_p: tuple[float, ...] = TEMPORAL_P  # strong views' weights of the temporal transforms (S2VS mix;
    #                             hapref.data.augment.TEMPORAL_EDITS): in the pool's cache key, sent to its workers

    def __post_init__(self) -> None:
        object.__setattr__(self, "temporal_p", check_temporal_p(self.temporal_p))   # a list -> a float tuple
        # ψ pools twice, so a training view needs 4 frames; every count must leave a batch to train on
        minimum = {"frames": 4, "stride": 1, "view_batches": 1, "whiten_dim": 1, "batch_videos": 1, "train_clips": 1,
                   "steps": 0, "warmup_steps": 0, "held_out": 2}
        for name, low in minimum.items():
            if getattr(self, name) < low:
                why = " (ψ pools the frame matrix twice)" if name == "frames" else ""
                raise ValueError(f"{name} must be >= {low}{why}, got {getattr(self, name)}")


PROFILES: dict[str, HAPVRProfile] = {
    "smoke": HAPVRProfile("smoke", train_clips=8, frames=8, stride=1, view_batches=4, whiten_dim=32,
                          batch_videos=4, steps=10, lr=1e-3, warmup_steps=2),
    "quick": HAPVRProfile("quick", train_clips=32, frames=16, stride=1, view_batches=12, whiten_dim=128,
                          batch_videos=4, steps=30, lr=1e-3, warmup_steps=3),
    # Chapter 4's profile on the reshoot benchmark (hapref.data.benchmark.PROFILES["reshoot"]): batches of 4 pairs
    # (a clip and its reshoot, so each batch holds the hard negatives the benchmark tests) and strong views that
    # keep the frame order (shuffle_views=False: a shuffled view of a clip would be a positive that looks like
    # its reshoot, the negative). All three are departures from the release, named in chapter 4.
    # psi_init="pooling": ψ starts as a 4x4 max-pool (Chamfer on the pooled matrix) instead of Xavier weights.
    "reshoot": HAPVRProfile("reshoot", train_clips=512, frames=16, stride=1, view_batches=16, whiten_dim=128,
                            batch_videos=8, steps=100, lr=1e-3, warmup_steps=10, shuffle_views=False,
                            psi_init="pooling"),
    "full": HAPVRProfile("full", train_clips=2048, frames=32, stride=2, view_batches=32, whiten_dim=512,
                         batch_videos=32, steps=5000, lr=4e-5, warmup_steps=250, eval_every=500, resample=True),
    # The released run (scripts/train.sh of https://github.com/yafeng19/HAP-VR): window 28, 64 pairs per GPU x 2
    # GPUs, AdamW lr 4e-5 wd 0.01, 30k iterations with 1k warm-up, 512-d PCA, evaluation every 1500 iterations;
    # ResNet-50 student regions on the released L3-iMAC windows and a DINO ViT-S/16 frame teacher. Needs local
    # weights: --set dino_checkpoint=PATH (dino_deitsmall16_pretrain.pth) and torchvision's resnet50-0676ba61.pth
    # in the torch hub cache (<hub>/checkpoints/). Deviation: batch_videos=128 in one process ranks all 256 views
    # together (global AP scope), whereas the release computes the loss on each GPU over its own 64 pairs (128
    # views); torchrun --nproc_per_node 2 with --set batch_videos=64 --set ap_scope=per_rank reproduces that.
    "released": HAPVRProfile("full", train_clips=8192, frames=28, stride=1, view_batches=64, whiten_dim=512,
                             batch_videos=128, steps=30000, lr=4e-5, warmup_steps=1000, eval_every=1500,
                             resample=True, backbone="resnet50", teacher="dino", pooling="l3imac_released"),
}


@dataclass(frozen=True)
class Variant:
    """What an ablation changes (HAP-VR Tables 2–4): the video loss, the frame-level term, the temporal rate.

    ``temporal_k`` defaults to the released rate 0.03 (``v_topk_rate`` of the released ``train.sh``); on the
    short CPU clips that keeps the single best column after ψ, i.e. Chamfer.

    Examples:
        >>> Variant().video_loss, Variant(frame_ap=False).frame_ap
        ('quadlinear_ap', False)
        >>> Variant(temporal_k=2.0)
        Traceback (most recent call last):
        ...
        ValueError: temporal_k must be a rate in [0, 1], got 2.0

    ``ap_scope`` matters under ``torchrun`` only: ``"global"`` ranks every query against the batches of all
    ranks (W ranks with batch B train as one process with batch W·B), ``"per_rank"`` against its own rank's
    batch, as the released run computes its loss on each GPU (https://github.com/yafeng19/HAP-VR).
    """

    video_loss: str = DEFAULT_LOSS
    frame_ap: bool = True
    temporal_k: float = 0.03
    weights: str = "released"
    ap_scope: str = "global"

    def __post_init__(self) -> None:
        if self.video_loss not in VIDEO_LOSSES:
            raise ValueError(f"video_loss must be one of {VIDEO_LOSSES}, got {self.video_loss!r}")
        if not 0.0 <= self.temporal_k <= 1.0:
            raise ValueError(f"temporal_k must be a rate in [0, 1], got {self.temporal_k}")
        check_ap_scope(self.ap_scope)


@dataclass
class HAPVRData:
    """Precomputed tensors of one profile (all on CPU), built by ``prepare_data``.

    Examples:
        >>> data = prepare_data("smoke")
        >>> data.train.shape, data.relevance.shape, data.relevance.dtype
        (torch.Size([4, 8, 8, 9, 32]), torch.Size([3, 21]), torch.bool)
    """

    train: Tensor            # [P, 2B, T, R, D] whitened student regions of the pool's [weak; strong] views
    teacher: Tensor          # [P, 2B, T, D'] teacher frame embeddings of the same views
    labels: Tensor           # [P, 2B, 2B] bool S2VS labels of every pool batch
    whitening: dict          # state dict of the PCAWhitening fit on the pool (applied to new videos too)
    queries: Tensor          # [Q, Tq, R, D]
    query_valid: Tensor       # [Q, Tq]
    database: Tensor         # [M, Tm, R, D]
    database_valid: Tensor    # [M, Tm]
    relevance: Tensor        # [Q, M] bool (DSVR: near-duplicates and partial copies)


def resolve_profile(profile: str | HAPVRProfile) -> tuple[str, HAPVRProfile]:
    """``(cache name, settings)`` of a profile name or of an explicit (e.g. overridden) profile.

    Examples:
        >>> from dataclasses import replace
        >>> resolve_profile("smoke")[0], resolve_profile(replace(PROFILES["smoke"], steps=3))[0]
        ('smoke', 'smoke-custom')
    """
    return named_profile(profile, PROFILES, HAPVRProfile)


class FrameEncoder:
    """The frozen student/teacher features of frames: regions ``[T, R, D]`` and teacher frame embeddings ``[T, C]``.

    Frames are uint8 ``[T, H, W, 3]`` or float ``[T, 3, H, W]`` in [0, 1]. Student: the profile's ``backbone``
    (frames resized to ``image_size``, ImageNet-normalised) pooled into regions as :meth:`pooling_for` says: the
    released S2VS / HAP-VR windows for ResNet-50 and the ``released`` profile, hapref's even windows otherwise.
    Teacher: with ``teacher="backbone"`` the backbone's last map averaged over its positions (a stand-in, ``C`` its
    channels); with ``teacher="dino"`` the CLS embedding (``C`` = 384) of DINO ViT-S/16 with the weights of the
    ``dino_checkpoint`` file (:class:`hapref.models.DinoTeacher`: frames resized to 224×224 and ImageNet-normalised,
    as DINO was trained). Frames go through the networks ``chunk`` (512, the released ``batch_sz_fe``) at a time.

    Examples:
        >>> from dataclasses import replace
        >>> encode = FrameEncoder(replace(PROFILES["smoke"], backbone="small-cnn"), image_size=32)
        >>> regions, teacher = encode(torch.rand(3, 3, 32, 32))
        >>> encode.pooling, regions.shape, teacher.shape
        ('l3imac', torch.Size([3, 9, 240]), torch.Size([3, 128]))
        >>> try:
        ...     FrameEncoder(replace(PROFILES["smoke"], teacher="dino"), image_size=32)
        ... except ValueError as err:
        ...     print(str(err)[:64])
        teacher='dino' needs dino_checkpoint, a local DINO ViT-S/16 file
    """

    chunk = 512

    def __init__(self, profile: HAPVRProfile, image_size: int) -> None:
        from pathlib import Path

        from hapref.models.hapvr import DinoTeacher

        self.check_files(profile)
        self.pooling = self.pooling_for(profile)
        self.backbone = load_backbone(profile.backbone, image_size=image_size).to(get_device())
        self.teacher = DinoTeacher(profile.dino_checkpoint).to(get_device()) if profile.teacher == "dino" else None

    @staticmethod
    def check_files(profile: HAPVRProfile) -> None:
        """Raise before any work if a weight file the profile needs is missing: the DINO teacher's
        ``dino_checkpoint`` and, for ``backbone="resnet50"``, torchvision's ImageNet weights in the torch hub cache
        (``resnet50-0676ba61.pth``). :func:`prepare_data` calls it before it generates the benchmark.

        Examples:
            >>> from dataclasses import replace
            >>> FrameEncoder.check_files(PROFILES["smoke"])       # the offline backbone needs no file
            >>> FrameEncoder.check_files(replace(PROFILES["smoke"], teacher="dino", dino_checkpoint="/nope.pth"))
            Traceback (most recent call last):
            ...
            FileNotFoundError: dino_checkpoint '/nope.pth' does not exist (teacher='dino' loads the DINO ViT-S/16 weights from it)
        """
        from pathlib import Path

        from hapref.features.resnet import RESNET50_IMAGENET1K_V1

        if profile.teacher not in TEACHERS:
            raise ValueError(f"teacher must be one of {TEACHERS}, got {profile.teacher!r}")
        if profile.teacher == "dino" and not profile.dino_checkpoint:
            raise ValueError("teacher='dino' needs dino_checkpoint, a local DINO ViT-S/16 file (--set "
                             "dino_checkpoint=PATH, e.g. dino_deitsmall16_pretrain.pth); hapref ships no DINO weights")
        if profile.teacher == "dino" and not Path(profile.dino_checkpoint).is_file():
            raise FileNotFoundError(f"dino_checkpoint {profile.dino_checkpoint!r} does not exist (teacher='dino' "
                                    "loads the DINO ViT-S/16 weights from it)")
        weights = Path(torch.hub.get_dir()) / "checkpoints" / RESNET50_IMAGENET1K_V1
        if profile.backbone == "resnet50" and not weights.is_file():
            raise FileNotFoundError(f"backbone='resnet50' needs torchvision's ImageNet weights at {weights} "
                                    "(nothing is downloaded; copy resnet50-0676ba61.pth there)")

    @staticmethod
    def pooling_for(profile: HAPVRProfile) -> str:
        """The region pooling of ``profile`` (:func:`hapref.features.pool_layers`): its ``pooling`` setting or, when
        that is ``""`` (auto), ``"l3imac_released"`` for the ResNet-50 backbone and ``"l3imac"`` for the others.

        ``"l3imac_released"`` is the released S2VS / HAP-VR extractor's pooling (ResNet-50-sized maps,
        :func:`hapref.features.released_l3imac`); ``"l3imac"`` is hapref's even windows, for any backbone and frame
        size (:func:`hapref.features.region_windows`). The ``released`` profile sets ``"l3imac_released"`` itself.

        Examples:
            >>> from dataclasses import replace
            >>> profiles = (PROFILES["smoke"], PROFILES["released"], replace(PROFILES["smoke"], backbone="resnet50"))
            >>> [FrameEncoder.pooling_for(p) for p in profiles]
            ['l3imac', 'l3imac_released', 'l3imac_released']
        """
        if profile.pooling not in ("", "l3imac", "l3imac_released"):
            raise ValueError(f"pooling must be '' (auto), 'l3imac' or 'l3imac_released', got {profile.pooling!r}")
        if profile.pooling:
            return profile.pooling
        return "l3imac_released" if profile.backbone == "resnet50" else "l3imac"

    def __call__(self, frames: Tensor) -> tuple[Tensor, Tensor]:
        """Student regions [T, R, D] and teacher embeddings [T, C] on the CPU, ``chunk`` frames at a time."""
        device = next(self.backbone.parameters()).device
        regions, teacher = [], []
        with torch.no_grad():
            for part in frames.split(self.chunk):
                part = part.to(device)
                maps = self.backbone(part)
                regions.append(pool_layers(maps, self.pooling).cpu())
                teacher.append((maps[-1].mean(dim=(-2, -1)) if self.teacher is None else self.teacher(part)).cpu())
        return torch.cat(regions), torch.cat(teacher)

    def batch(self, clips: Tensor, frames: int, generator: torch.Generator, shuffle: bool = True,
              temporal_p: tuple[float, ...] = TEMPORAL_P) -> tuple[Tensor, Tensor, Tensor]:
        """Regions ``[2B, T, R, D]``, teacher ``[2B, T, C]`` and labels ``[2B, 2B]`` of a fresh S2VS batch.

        ``clips`` uint8 ``[B, T', H, W, 3]``; rows ``0..B-1`` are the weak views, ``B..2B-1`` the strong ones
        (:func:`hapref.data.views.s2vs_batch`; ``shuffle=False`` keeps their frame order, ``temporal_p`` weighs
        their temporal transforms), all ``frames`` long.

        Examples:
            >>> from dataclasses import replace
            >>> encode = FrameEncoder(replace(PROFILES["smoke"], backbone="small-cnn"), image_size=32)
            >>> g = torch.Generator().manual_seed(0)
            >>> clips = torch.randint(0, 256, (2, 6, 32, 32, 3), dtype=torch.uint8, generator=g)
            >>> regions, teacher, labels = encode.batch(clips, 4, g)
            >>> regions.shape, teacher.shape, labels.shape
            (torch.Size([4, 4, 9, 240]), torch.Size([4, 4, 128]), torch.Size([4, 4]))
            >>> bool(labels.diagonal().all()), bool(labels[0, 2] and labels[1, 3])   # weak_i <-> strong_i relevant
            (True, True)
        """
        weak, strong, labels = s2vs_batch(clips, frames, generator, shuffle=shuffle, temporal_p=temporal_p)
        views = torch.cat([weak, strong])
        regions, teacher = self(views.flatten(0, 1))
        return regions.view(*views.shape[:2], *regions.shape[1:]), teacher.view(*views.shape[:2], -1), labels


@cache_per_dtype(maxsize=2)
def feature_videos(path: str, held_out: int) -> tuple[list[Tensor], list[Tensor]]:
    """(training, held-out) ``[T, R, D]`` videos of an HDF5 features file; the last ``held_out`` are held out.

    Examples:
        >>> import tempfile, pathlib, h5py
        >>> path = str(pathlib.Path(tempfile.mkdtemp()) / "features.hdf5")
        >>> with h5py.File(path, "w") as f:
        ...     for i in range(5):
        ...         _ = f.create_dataset(f"v{i}", data=np.ones((8, 9, 4), np.float32))
        >>> train, held = feature_videos(path, held_out=2)
        >>> len(train), len(held), tuple(held[0].shape)
        (3, 2, (8, 9, 4))
    """
    _, videos = read_feature_videos(path, min_len=8)     # HAP-VR's loader tiles videos below 8 frames
    if not 2 <= held_out <= len(videos) - 1:
        raise ValueError(f"held_out must lie in [2, {len(videos) - 1}] for the {len(videos)} videos of {path}, "
                         f"got {held_out}")
    return videos[:-held_out], videos[-held_out:]


def feature_file_batch(videos: list[Tensor], profile: HAPVRProfile, generator: torch.Generator,
                       ) -> tuple[Tensor, Tensor, Tensor]:
    """Regions ``[2B, T, R, D]``, teacher ``[2B, T, D]`` (the region mean of the input features: no pixels, no
    DINO) and S2VS labels of a batch of temporal views of pre-extracted features.

    Examples:
        >>> videos = [torch.randn(10, 4, 16) for _ in range(6)]
        >>> regions, teacher, labels = feature_file_batch(videos, PROFILES["smoke"], torch.Generator().manual_seed(0))
        >>> regions.shape, teacher.shape, labels.shape
        (torch.Size([8, 8, 4, 16]), torch.Size([8, 8, 16]), torch.Size([8, 8]))
    """
    n = min(profile.train_clips, len(videos))
    picked = torch.randperm(n, generator=generator)[:profile.batch_videos].tolist()
    regions, labels = feature_batch([videos[i] for i in picked], profile.frames, generator, profile.temporal_p)
    return regions, regions.mean(dim=2), labels


def _prepare_from_features(p: HAPVRProfile) -> HAPVRData:
    train_videos, held = feature_videos(p.features, p.held_out)
    pool = [feature_file_batch(train_videos, p, torch.Generator().manual_seed(b)) for b in range(p.view_batches)]
    train = torch.stack([r for r, _, _ in pool])
    whitening = PCAWhitening.fit(train, dim=min(p.whiten_dim, train.shape[-1]))
    queries, database, relevance = held_out_copies(held, p.frames, torch.Generator().manual_seed(12345))
    valid = torch.ones(len(held), p.frames, dtype=torch.bool)
    return HAPVRData(train=whitening(train), teacher=torch.stack([t for _, t, _ in pool]),
                     labels=torch.stack([lab for _, _, lab in pool]),
                     whitening={k: v.clone() for k, v in whitening.state_dict().items()},
                     queries=whitening(queries), query_valid=valid, database=whitening(database),
                     database_valid=valid.clone(), relevance=relevance)


@cache_per_dtype(maxsize=2)
def _frame_clips(root: str, size: int, length: int) -> FrameClips:
    return FrameClips(root, size, length)


def clip_source(bench, profile: HAPVRProfile):
    """The unlabeled training clips: the benchmark's split, or decoded frames on disk (``frames_dir``, resized to
    the benchmark's frame size and training-clip length).

    Examples:
        >>> bench = build_copy_benchmark("smoke")
        >>> source = clip_source(bench, PROFILES["smoke"])
        >>> len(source), source[0].shape, source[0].dtype
        (16, torch.Size([8, 64, 64, 3]), torch.uint8)
    """
    if profile.frames_dir is None:
        return bench.train
    return _frame_clips(profile.frames_dir, bench.config.frame_size, bench.config.train_frames)


def pick_clips(bench, n_clips: int, batch: int, generator: torch.Generator, paired: bool = True) -> Tensor:
    """Indices of ``batch`` training clips out of the first ``n_clips``: random clips, or, when the benchmark's
    unlabeled split pairs each clip with its reshoot (``train_reshoots``) and ``paired``, ``batch // 2`` random
    pairs.

    Examples:
        >>> g = torch.Generator().manual_seed(0)
        >>> sorted(pick_clips(build_copy_benchmark("smoke"), 16, 4, g).tolist())   # any 4 of the 16
        [6, 9, 10, 12]
        >>> paired = pick_clips(build_copy_benchmark("smoke", train_reshoots=True), 16, 4, g).tolist()
        >>> [paired[i + 1] - paired[i] for i in (0, 2)], all(i % 2 == 0 for i in paired[::2])  # (2k, 2k + 1)
        ([1, 1], True)
        >>> loose = pick_clips(build_copy_benchmark("smoke", train_reshoots=True), 16, 4, g, paired=False)
        >>> len(loose), len(set(loose.tolist()))   # any 4 distinct clips, pairs or not
        (4, 4)
    """
    if not paired or not getattr(bench.config, "train_reshoots", False):
        return torch.randperm(n_clips, generator=generator)[:batch]
    pairs = torch.randperm(n_clips // 2, generator=generator)[:batch // 2]
    return torch.stack([2 * pairs, 2 * pairs + 1], dim=1).flatten()


def training_clips(bench, profile: HAPVRProfile, clips: Tensor) -> Tensor:
    """uint8 ``[B, T, H, W, 3]``: the unlabeled training clips ``clips`` (:func:`clip_source`), every ``stride``-th
    frame.

    Examples:
        >>> training_clips(build_copy_benchmark("smoke"), PROFILES["smoke"], torch.tensor([0, 1])).shape
        torch.Size([2, 8, 64, 64, 3])
    """
    source = clip_source(bench, profile)
    return torch.stack([source[int(c)][::profile.stride] for c in clips])


@cache_per_dtype(maxsize=4)
def prepare_data(profile: str | HAPVRProfile, progress: bool = False) -> HAPVRData:
    """The cached pool of augmented batches and the benchmark features of ``profile``, on disk and in memory.

    Examples:
        >>> data = prepare_data("smoke")
        >>> data.queries.shape, data.query_valid.dtype
        (torch.Size([3, 8, 9, 32]), torch.bool)
    """
    profile, p = resolve_profile(profile)
    if p.features is not None:          # cheap to rebuild: no disk cache
        return _prepare_from_features(p)
    FrameEncoder.check_files(p)         # a missing weight file is reported before any data is generated
    bench = build_copy_benchmark(p.benchmark, seed=p.benchmark_seed)
    data_fields = {k: v for k, v in asdict(p).items() if k in DATA_FIELDS}
    if not p.pair_batches:              # (only then: the keys of the paired pools stay as they were)
        data_fields["pair_batches"] = False
    code = source_digest(backbones_module, pooling_module, augment_module, views_module, sys.modules[__name__])
    key = config_key({"hapvr": DATA_VERSION, "data": data_fields, "benchmark": bench.fingerprint()[:16],
                      "code": code})
    path = data_root() / "hapvr" / f"features-{profile}-{key}.pt"
    with file_lock(path):               # another process preparing the same file: wait for it, then load it
        cached = load_cached(path)      # None when absent or damaged (then regenerated)
        if cached is not None and set(cached) == {f.name for f in fields(HAPVRData)}:
            return HAPVRData(**cached)
        # Worker processes (one thread each: the same bytes for any number of workers) render the clips and,
        # with a CPU encoder, encode them too; a GPU encoder stays in this process and encodes what they render.
        cpu_encoder = get_device().type == "cpu"
        if cpu_encoder:
            views = parallel_map(_view_batch, range(p.view_batches), _encoder_state, (p,), progress=progress,
                                 desc="training views")
        else:
            rendered = parallel_map(_render_batch, range(p.view_batches), _benchmark_state, (p,),
                                    progress=progress, desc="rendering views")
            encode = FrameEncoder(p, bench.config.frame_size)
            views = [encode.batch(clips, p.frames, torch.Generator().set_state(state), shuffle=p.shuffle_views,
                                  temporal_p=p.temporal_p)
                     for clips, state in rendered]
        train = torch.stack([r for r, _, _ in views])
        whitening = PCAWhitening.fit(train, dim=min(p.whiten_dim, train.shape[-1]))
        keys = [("queries", i) for i in range(len(bench.queries.videos))] + \
               [("database", i) for i in range(len(bench.database.videos))]
        encoded = parallel_map(_eval_video, keys, _encoder_state, (p,), progress=progress, desc="eval videos",
                               workers=None if cpu_encoder else 1)
        queries, query_valid = pad_videos([whitening(x) for x in encoded[:len(bench.queries.videos)]])
        database, database_valid = pad_videos([whitening(x) for x in encoded[len(bench.queries.videos):]])
        data = HAPVRData(train=whitening(train), teacher=torch.stack([t for _, t, _ in views]),
                         labels=torch.stack([lab for _, _, lab in views]),
                         whitening={k: v.clone() for k, v in whitening.state_dict().items()}, queries=queries,
                         query_valid=query_valid, database=database, database_valid=database_valid,
                         relevance=bench.relevance("DSVR"))
        atomic_torch_save(asdict(data), path)
    return data


def _benchmark_state(p: HAPVRProfile) -> tuple:
    """What a rendering worker builds once: the profile, its benchmark (from the cache) and the clip count."""
    bench = build_copy_benchmark(p.benchmark, seed=p.benchmark_seed)
    return p, bench, None, min(p.train_clips, len(clip_source(bench, p)))


def _encoder_state(p: HAPVRProfile) -> tuple:
    """What an encoding worker builds once: :func:`_benchmark_state` with the frame encoder in its third slot."""
    p, bench, _, n_clips = _benchmark_state(p)
    return p, bench, FrameEncoder(p, bench.config.frame_size), n_clips


def _render_batch(state: tuple, b: int) -> tuple[Tensor, Tensor]:
    """The clips of view batch ``b`` (uint8) and its generator's state after picking them, for the encoder."""
    p, bench, _, n_clips = state
    g = torch.Generator().manual_seed(b)
    picked = pick_clips(bench, n_clips, p.batch_videos, g, p.pair_batches)
    return training_clips(bench, p, picked), g.get_state()


def _view_batch(state: tuple, b: int) -> tuple[Tensor, Tensor, Tensor]:
    """View batch ``b`` of the pool: regions, teacher embeddings and labels (its own generator, seeded ``b``)."""
    p, _, encode, _ = state
    clips, generator_state = _render_batch(state, b)
    g = torch.Generator().set_state(generator_state)
    return encode.batch(clips, p.frames, g, shuffle=p.shuffle_views, temporal_p=p.temporal_p)


def _eval_video(state: tuple, key: tuple[str, int]) -> Tensor:
    """The L3-iMAC regions ``[T, 9, D]`` of one evaluation video (``("queries" | "database", index)``)."""
    p, bench, encode, _ = state
    return encode(getattr(bench, key[0]).videos[key[1]][::p.stride])[0]


class HAPVRTask:
    """A :class:`hapref.train.Task` for HAP-VR: batches of view pairs, the Eq. 15 loss, DSVR evaluation.

    Examples:
        >>> task = HAPVRTask("smoke")
        >>> model = task.build_model()
        >>> batch = task.batch(0, torch.device("cpu"))
        >>> batch["features"].shape, sorted(task.loss(model, batch))
        (torch.Size([8, 8, 9, 32]), ['frame_ap', 'infonce', 'loss', 'reg', 'sshn', 'video_ap'])
        >>> sorted(task.evaluate(model))
        ['mAP', 'uAP']
    """

    def __init__(self, profile: str | HAPVRProfile = "quick", variant: Variant = Variant(), seed: int = 0,
                 progress: bool = False) -> None:
        self.profile, self.variant, self.seed = resolve_profile(profile)[1], variant, seed
        self.data = prepare_data(profile if isinstance(profile, str) else self.profile, progress)
        self._fresh: tuple | None = None      # (benchmark, encoder, whitening) of the resample path, built lazily
        self.objective = HAPVRObjective(video_ranking_loss(variant.video_loss),
                                        frame_ranking_loss() if variant.frame_ap else None, variant.weights)

    def build_model(self) -> VideoSimilarityNetwork:
        return build_hapvr_network(**self.model_spec()["kwargs"])

    def run_settings(self) -> dict[str, Any]:
        """Every resolved setting of the run (recorded in ``config.json``): profile and variant as plain dicts.

        Examples:
            >>> settings = HAPVRTask("smoke").run_settings()
            >>> settings["variant"]["video_loss"], settings["variant"]["temporal_k"], settings["profile"]["steps"]
            ('quadlinear_ap', 0.03, 10)
        """
        settings = {"profile": asdict(self.profile), "variant": asdict(self.variant)}
        if self.profile.features is not None:     # how the features file was made (hapref.features), if recorded
            from hapref.features.hdf5 import read_settings
            recorded = read_settings(self.profile.features)
            settings["feature_file"] = None if recorded is None else asdict(recorded)
        return settings

    def model_spec(self) -> dict[str, Any]:
        """The model's constructor and arguments and its inputs' preprocessing (:func:`hapref.train.load_run`).

        Examples:
            Rebuild the network from the spec alone, as :func:`hapref.train.load_run` does:

            >>> import importlib
            >>> task = HAPVRTask("smoke")
            >>> spec = task.model_spec()
            >>> spec["kwargs"], spec["preprocess"]
            ({'dims': 32, 'temporal_k': 0.03}, {'whitening': 'hapref.features.whitening:PCAWhitening'})
            >>> module, name = spec["factory"].split(":")
            >>> net = getattr(importlib.import_module(module), name)(**spec["kwargs"])
            >>> d = task.data
            >>> net.score(d.queries, d.database, d.query_valid, d.database_valid).shape
            torch.Size([3, 21])
        """
        return {"factory": "hapref.models.hapvr:build_hapvr_network",
                "kwargs": {"dims": int(self.data.train.shape[-1]), "temporal_k": self.variant.temporal_k,
                           **({"psi_init": self.profile.psi_init} if self.profile.psi_init != "xavier" else {})},
                "preprocess": {"whitening": "hapref.features.whitening:PCAWhitening"}}

    def preprocess(self) -> dict[str, nn.Module]:
        """The PCA whitening fit on the training views: apply it to L3-iMAC regions of new videos.

        ``{"whitening": PCAWhitening}`` mapping float regions ``[..., D]`` (``D`` of the backbone's L3-iMAC) to
        ``[..., whiten_dim]``, the model's input size; saved with the checkpoint and rebuilt by
        :func:`hapref.train.load_run`.

        Examples:
            >>> task = HAPVRTask("smoke")
            >>> whitening = task.preprocess()["whitening"]
            >>> regions = torch.randn(5, 9, whitening.in_dim)     # [T, R, D] regions of a new video's frames
            >>> whitening(regions).shape[-1] == whitening.out_dim == task.model_spec()["kwargs"]["dims"]
            True
        """
        return {"whitening": PCAWhitening(**self.data.whitening)}

    def batch(self, step: int, device: torch.device) -> dict[str, Tensor]:
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + step)
        if not self.profile.resample:
            k = pool_pick(g, self.data.train.shape[0])            # several ranks: a pool batch each
            return {"features": self.data.train[k].to(device), "teacher": self.data.teacher[k].to(device),
                    "relevance": self.data.labels[k].to(device)}
        if self.profile.features is not None:
            videos = feature_videos(self.profile.features, self.profile.held_out)[0]
            regions, teacher, labels = feature_file_batch(videos, self.profile, rank_stream(g))
            whitening = PCAWhitening(**self.data.whitening)
            return {"features": whitening(regions).to(device), "teacher": teacher.to(device),
                    "relevance": labels.to(device)}
        if self._fresh is None:
            bench = build_copy_benchmark(self.profile.benchmark, seed=self.profile.benchmark_seed)
            whitening = PCAWhitening(**self.data.whitening)
            self._fresh = (bench, FrameEncoder(self.profile, bench.config.frame_size), whitening)
        bench, encode, whitening = self._fresh
        n_clips = min(self.profile.train_clips, len(clip_source(bench, self.profile)))
        order = (torch.randperm(n_clips, generator=g) if not bench.config.train_reshoots
                 else pick_clips(bench, n_clips, n_clips - n_clips % 2, g, self.profile.pair_batches))
        clips = training_clips(bench, self.profile, rank_batch(order, self.profile.batch_videos))
        regions, teacher, labels = encode.batch(clips, self.profile.frames, rank_stream(g),
                                                shuffle=self.profile.shuffle_views,
                                                temporal_p=self.profile.temporal_p)
        return {"features": whitening(regions).to(device), "teacher": teacher.to(device),
                "relevance": labels.to(device)}

    def loss(self, model: nn.Module, batch: dict[str, Tensor]) -> dict[str, Tensor]:
        if global_scope(self.variant.ap_scope):                 # torchrun: rank against all ranks' videos
            return hapvr_global_terms(model, self.objective, batch["features"], batch["relevance"],
                                      batch["teacher"] if self.variant.frame_ap else None,
                                      center=self.profile.teacher == "backbone")
        video_sim, frame_sims, reg = model(batch["features"])
        # stand-in teachers (global CNN / region-mean descriptors) are centred per video (teacher_frame_similarity)
        teacher = (teacher_frame_similarity(batch["teacher"], center=self.profile.teacher == "backbone")
                   if self.variant.frame_ap else None)
        return self.objective(at_least_float32(video_sim), batch["relevance"], at_least_float32(reg),
                              at_least_float32(frame_sims), teacher)

    def scores(self, model: VideoSimilarityNetwork) -> Tensor:
        """Query × database similarities ``[Q, M]`` on the model's device (HAP-VR Eq. 3–5: region, frame and
        video levels), the scores :meth:`evaluate` ranks against the DSVR relevance ``[Q, M]``.

        Examples:
            >>> from hapref.metrics import map_and_micro_ap
            >>> task = HAPVRTask("smoke")
            >>> _ = torch.manual_seed(0)
            >>> model = task.build_model()
            >>> scores = task.scores(model)
            >>> scores.shape == task.data.relevance.shape
            True
            >>> map_and_micro_ap(scores.float(), task.data.relevance) == task.evaluate(model)
            True
        """
        device = next(model.parameters()).device
        d = self.data
        return model.score(d.queries.to(device), d.database.to(device), d.query_valid.to(device),
                           d.database_valid.to(device))

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        return map_and_micro_ap(at_least_float32(self.scores(model)).cpu(), self.data.relevance)


def untrained_scores(profile: str, measure: str = "chamfer", k: float = 0.0) -> Tensor:
    """Training-free scores on the same features: two-level (TopK-)Chamfer without ψ (the chapter 3 baseline).

    HAP-VR Eq. 3 and Eq. 5 without ψ.

    Examples:
        >>> untrained_scores("smoke").shape
        torch.Size([3, 21])
    """
    d = prepare_data(profile)
    net = VideoSimilarityNetwork(spatial_k=0.1, temporal_k=1.0 if measure == "mean" else k, comparator=False)
    with torch.no_grad():
        return net.score(d.queries, d.database, d.query_valid, d.database_valid)


def config_for(profile: str | HAPVRProfile, seed: int = 0, **overrides: Any) -> TrainConfig:
    """The :class:`TrainConfig` of ``profile`` (AdamW, warm-up + cosine, wd 0.01 as HAP-VR §4.1).

    Examples:
        >>> config_for("smoke").steps, config_for("smoke", steps=2).steps, config_for("smoke").weight_decay
        (10, 2, 0.01)
    """
    p = resolve_profile(profile)[1]
    # Deviation: grad_clip=10.0 (gradient-norm clipping) is hapref's; the released HAP-VR train.py clips nothing
    # (--set grad_clip=1e30 makes the clip a no-op: clip_grad_norm_ then scales every gradient by exactly 1).
    return replace(TrainConfig(steps=p.steps, lr=p.lr, weight_decay=p.weight_decay, warmup_steps=p.warmup_steps,
                               eval_every=p.eval_every, seed=seed, grad_clip=10.0), **overrides)


def build(profile: str, loss: str, seed: int, progress: bool = True,
          overrides: dict[str, str] | None = None) -> tuple[HAPVRTask, TrainConfig]:
    """The HAP-VR task and training config for ``python -m hapref.train hapvr``; ``overrides`` (``--set``) may
    change any field of the profile, of :class:`Variant` or of the :class:`TrainConfig`.

    Examples:
        >>> task, config = build("smoke", "quadlinear_ap", seed=0, progress=False, overrides={"grad_clip": "1.0"})
        >>> type(task).__name__, task.variant.video_loss, config.grad_clip
        ('HAPVRTask', 'quadlinear_ap', 1.0)
    """
    p = resolve_profile(profile)[1]
    config, p, variant = override_all([config_for(p, seed), p, Variant(video_loss=loss)], overrides or {})
    return HAPVRTask(p, variant, seed, progress=progress), config


def summary_line(metrics: dict[str, float]) -> str:
    """The last line the CLI prints.

    Examples:
        >>> summary_line({"mAP": 0.5, "uAP": 0.25})
        'eval: mAP=0.5000 uAP=0.2500'
    """
    return f"eval: mAP={metrics['mAP']:.4f} uAP={metrics['uAP']:.4f}"


def pool_clip_count(profile: str | HAPVRProfile) -> int:
    """How many distinct unlabeled clips the cached pool of ``profile`` draws (``view_batches`` batches of
    ``batch_videos`` clips out of the first ``train_clips``, as :func:`prepare_data` picks them).

    The pool, not ``train_clips``, bounds what a CPU profile sees: ``view_batches`` x ``batch_videos`` draws.

    Examples:
        >>> from dataclasses import replace
        >>> pool_clip_count("smoke"), pool_clip_count(replace(PROFILES["smoke"], train_clips=4))  # of 16, of 4
        (7, 4)
    """
    _, p = resolve_profile(profile)
    bench = build_copy_benchmark(p.benchmark, seed=p.benchmark_seed)
    n_clips = min(p.train_clips, len(clip_source(bench, p)))
    picked: set[int] = set()
    for b in range(p.view_batches):
        picked.update(pick_clips(bench, n_clips, p.batch_videos, torch.Generator().manual_seed(b),
                                 p.pair_batches).tolist())
    return len(picked)


def long_targets(database: Tensor, database_valid: Tensor, filler: Tensor, slots: int,
                 generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """Long database videos in which only a segment is the original: each video ``i`` sits in one random slot
    of ``slots``, the other slots hold whole videos drawn from ``filler`` (never ``i`` itself).

    For TopK-Chamfer's temporal rate (HAP-VR Eq. 5, Table 4): on a target of ``T`` frames the rate ``k_t`` keeps
    ``max(1, round(k_t T))`` columns, so it only differs from Chamfer when ``k_t T`` is well above 1.

    Args:
        database: ``[M, T, R, D]`` float region features (padded).
        database_valid: ``[M, T]`` bool, True = a real frame.
        filler: ``[M]`` bool, the videos that may fill the other slots (e.g. distractors of every query).
        slots: videos per long target (>= 1); the result is ``slots * T`` frames long.
        generator: draws each video's slot and its fillers.

    Returns:
        ``([M, slots * T, R, D], [M, slots * T])``: features and valid flags (a slot keeps its video's padding).

    Examples:
        >>> db = torch.arange(3.0).view(3, 1, 1, 1).expand(3, 2, 1, 1)     # video i: two frames of value i
        >>> valid = torch.ones(3, 2, dtype=torch.bool)
        >>> long, long_valid = long_targets(db, valid, torch.tensor([False, True, True]), 3,
        ...                                 torch.Generator().manual_seed(0))
        >>> long.shape, long_valid.shape
        (torch.Size([3, 6, 1, 1]), torch.Size([3, 6]))
        >>> int((long[0] == 0.0).sum()), set(long[0][long[0] != 0.0].tolist()) <= {1.0, 2.0}  # 0 once, fillers
        (2, True)
        >>> [int((long[i] == i).sum()) >= 2 for i in (1, 2)]                   # every video keeps its frames
        [True, True]
    """
    if database.ndim != 4 or database_valid.shape != database.shape[:2]:
        raise ValueError(f"database must be [M, T, R, D] with database_valid [M, T], got "
                         f"{tuple(database.shape)} and {tuple(database_valid.shape)}")
    if filler.shape != database.shape[:1] or filler.dtype != torch.bool:
        raise ValueError(f"filler must be a bool [M] = [{database.shape[0]}] mask, got {tuple(filler.shape)} "
                         f"{filler.dtype}")
    if int(slots) < 1:
        raise ValueError(f"slots must be >= 1, got {slots}")
    pool = filler.nonzero().flatten()
    if slots > 1 and len(pool) < 2:
        raise ValueError("filler must mark at least two videos (a video never fills its own target)")
    videos, valids = [], []
    for i in range(database.shape[0]):
        candidates = pool[pool != i]
        picks = candidates[torch.randint(len(candidates), (slots,), generator=generator)]
        picks[int(torch.randint(slots, (1,), generator=generator))] = i
        videos.append(database[picks].flatten(0, 1))
        valids.append(database_valid[picks].flatten())
    return torch.stack(videos), torch.stack(valids)
