"""The TCA training pipeline (TCA §3.4, §4.1) on the book's copy-detection benchmark.

Self-supervised copy pairs: every unlabeled training clip gives a weak view and strong views (the
edits of :func:`hapref.data.views.make_views`). A batch holds B clips; the anchor is one view, the
positive another view of the same clip. Negatives are the other clips' positives plus a FIFO memory bank
fed by a separate *distractor* set of clips that are never anchors (as VCDB's background videos feed the
released run's queue, https://github.com/xwen99/temporal_context_aggregation); keys of positives and
distractors come from the current encoder without gradients (MoCo with momentum 0). The default loss
is the paper's final one, Circle loss with γ = 256, m = 0.25 (TCA §3.4, Table 1c); InfoNCE with
τ = 1/256 is the variant. Frame descriptors (L3-iRMAC by default, iMAC as an option) come from a frozen
backbone, PCA-whitened on the training views, computed once per profile and cached. Evaluation: DSVR mAP
and μAP for TCA_c (cosine of video embeddings), TCA_f (Chamfer of frame embeddings) and TCA_sym
(symmetric Chamfer), TCA Eq. 8–10.

Drawn descriptors: a profile with ``descriptors`` (chapter 6's ``"edits"``) trains and evaluates on frame descriptors
drawn by :mod:`hapref.data.descriptors` instead of the pixel benchmark (no backbone; whitened the same way).

Real data: ``features`` (``--features FILE.hdf5``, DnS/S2VS layout) trains on pre-extracted frame features,
self-supervised on temporal views or, with ``vcdb`` (``--vcdb vcdb.pickle``), on VCDB's copy pairs with its
distractors in the bank as the released run does; evaluation is copy retrieval of held-out videos.
"""

from __future__ import annotations

import math
import sys
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from hapref.data.benchmark import build_copy_benchmark
from hapref.data.cache import config_key, data_root, load_cached, source_digest
from hapref.features import PCAWhitening, load_backbone, pool_layers
from hapref.features import backbones as backbones_module, pooling as pooling_module
from hapref.files import atomic_torch_save
from hapref.losses.memory_bank import MemoryBank, contrastive_loss, contrastive_similarities
from hapref.models.aggregators import AGGREGATORS, build_aggregator
from hapref.models.momentum import MomentumEncoder
from hapref.models.tca import TemporalContextAggregator, clip_mean_share, mean_share_regression
from hapref.similarity.chamfer import chamfer_similarity, mean_pooled_similarity, pair_valid, symmetric_chamfer
from hapref.similarity.network import pad_videos
from hapref.data import views as views_module
from hapref.data.feature_views import held_out_copies, read_feature_videos, temporal_view
from hapref.data.views import FrameClips, make_padded_views, make_views
from hapref.metrics import map_and_micro_ap
from hapref.train.distributed_step import enqueue_all_ranks, global_contrastive_similarities, rank_batch, rank_stream
from hapref.train.loop import TrainConfig
from hapref.train.settings import named_profile, override_all
from hapref.utils import at_least_float32, cache_per_dtype, get_device
from hapref.validation import check_float_tensor, renamed_keywords

LOSSES: tuple[str, ...] = ("infonce", "circle", "triplet")
#: What the loss compares (:class:`Variant` ``objective``). ``"pooled"`` (the default, TCA §3.4): the cosine of the
#: L2-normalised mean-pooled video descriptors (TCA_c). ``"frame"`` (this book's departure from the paper,
#: :func:`frame_contrastive_similarities`): the Chamfer similarity of the refined frames (TCA_f, the score the
#: encoder is judged by), with a memory bank of frame-level keys.
OBJECTIVES: tuple[str, ...] = ("pooled", "frame")
#: The paper's final method (TCA §3.4: Circle loss on the memory-bank similarities).
DEFAULT_LOSS = "circle"
POOLINGS: tuple[str, ...] = ("l3irmac", "imac")
MEASURES: tuple[str, ...] = ("cosine", "chamfer", "symmetric_chamfer")
BANK_INITS: tuple[str, ...] = ("empty", "random")
DATA_VERSION = 4
DATA_FIELDS = ("benchmark", "train_clips", "distractor_clips", "frames", "stride", "eval_stride", "strong_views",
               "whiten_dim", "backbone", "frames_dir", "pad_views", "benchmark_seed", "region_windows")


@dataclass(frozen=True)
class TCAProfile:
    """Sizes of one run: data, views, model, memory bank and schedule.

    Examples:
        >>> from dataclasses import replace
        >>> p = PROFILES["smoke"]
        >>> p.whiten_dim, p.bank_size, replace(p, steps=2).steps
        (32, 16, 2)
    """

    benchmark: str          # hapref.data benchmark profile
    train_clips: int        # unlabeled clips that give copy pairs (the first ones of the split)
    distractor_clips: int   # the next clips of the split: never anchors, they feed the memory bank
    frames: int             # frames per training view (every ``stride``-th frame of a clip)
    stride: int
    eval_stride: int        # every ``eval_stride``-th frame of the benchmark videos
    strong_views: int       # precomputed strong views per clip (view 0 is the weak one)
    whiten_dim: int         # PCA-whitened descriptor size = the Transformer's d_model
    nhead: int
    dim_feedforward: int
    dropout: float
    batch_videos: int       # B clips per batch
    bank_size: int
    distractors_per_step: int   # distractor keys enqueued after every step
    steps: int
    lr: float
    warmup_steps: int
    eval_every: int = 0
    backbone: str = "efficientnet-lite0"
    weight_decay: float = 1e-4
    features: str | None = None  # HDF5 frame features (DnS/S2VS layout) to train on instead of the benchmark
    vcdb: str | None = None      # with ``features``: VCDB's vcdb.pickle, whose copy pairs become the positives
    held_out: int = 8            # with ``features``: the last videos of the file, kept out for evaluation
    frames_dir: str | None = None    # decoded frames (FramesDirectory layout): the unlabeled clips and distractors
    pad_views: bool = False      # views keep their own length up to ``frames``, zero-padded with valid flags
    benchmark_seed: int = 0      # the benchmark instance (``--data-seed``): same design, other videos and views
    # Negatives: the paper and the released code use the memory bank only; the other rows' positives
    # (in-batch negatives) are this project's extension, on with ``--set in_batch_negatives=true``.
    in_batch_negatives: bool = False
    # "random": the bank starts full of random unit vectors, as the released code's queue does; "empty": it
    # starts empty and fills with distractor keys.
    bank_init: str = "random"
    # L3-iRMAC's 3x3 windows: "even" (hapref's, :func:`hapref.features.region_windows`) or "released" (the
    # released extractor's kernel int(1.5p), stride p = int(2n/7): (0,24), (16,40), (32,56) on 56 cells).
    region_windows: str = "even"
    # Gradient-norm clipping: this project's safeguard (neither the paper nor the released code clips); None = off.
    grad_clip: float | None = 10.0
    # A hapref.data.descriptors profile: train and evaluate on drawn frame descriptors (chapter 6's edit-subspace
    # benchmark) instead of the pixel benchmark; train_clips, distractor_clips, strong_views + 1 (views) and
    # benchmark_seed replace the profile's, frames must equal its view_frames and whiten_dim its dim.
    descriptors: str | None = None


#: Dropout 0.5 as the paper states (the released ``train.py`` builds the model with 0.2).
PROFILES: dict[str, TCAProfile] = {
    "smoke": TCAProfile("smoke", train_clips=8, distractor_clips=8, frames=8, stride=1, eval_stride=1, strong_views=1,
                        whiten_dim=32, nhead=4, dim_feedforward=64, dropout=0.5, batch_videos=4, bank_size=16,
                        distractors_per_step=4, steps=10, lr=1e-3, warmup_steps=2),
    "quick": TCAProfile("quick", train_clips=32, distractor_clips=32, frames=8, stride=2, eval_stride=2, strong_views=2,
                        whiten_dim=128, nhead=8, dim_feedforward=256, dropout=0.5, batch_videos=16, bank_size=128,
                        distractors_per_step=16, steps=100, lr=5e-4, warmup_steps=10),
    # Chapter 6: the edit-subspace descriptor benchmark (hapref.data.descriptors "edits"): 1,024 unlabeled clips
    # with four 12-frame views each, 512 distractor clips for the bank, 64-d descriptors; the paper's model shape
    # (8 heads, feed-forward 2·d, dropout 0.5), Circle loss on bank negatives only, 300 steps.
    "edits": TCAProfile("edits", train_clips=1024, distractor_clips=512, frames=12, stride=1, eval_stride=1,
                        strong_views=3, whiten_dim=64, nhead=8, dim_feedforward=128, dropout=0.5, batch_videos=32,
                        bank_size=512, distractors_per_step=32, steps=300, lr=1e-3, warmup_steps=20,
                        descriptors="edits"),
    "edits-smoke": TCAProfile("edits-smoke", train_clips=16, distractor_clips=8, frames=6, stride=1, eval_stride=1,
                              strong_views=2, whiten_dim=16, nhead=4, dim_feedforward=32, dropout=0.5,
                              batch_videos=4, bank_size=16, distractors_per_step=4, steps=10, lr=1e-3,
                              warmup_steps=2, descriptors="smoke"),
    # Chapter 6's benchmark where context is the signal (hapref.data.descriptors "context": channel overlays in
    # directions new at test time, which a frame can only tell from its clip): the "edits" sizes and schedule.
    "context": TCAProfile("context", train_clips=1024, distractor_clips=512, frames=12, stride=1, eval_stride=1,
                          strong_views=3, whiten_dim=64, nhead=8, dim_feedforward=128, dropout=0.5, batch_videos=32,
                          bank_size=512, distractors_per_step=32, steps=300, lr=1e-3, warmup_steps=20,
                          descriptors="context"),
    "context-smoke": TCAProfile("context-smoke", train_clips=16, distractor_clips=8, frames=6, stride=1,
                                eval_stride=1, strong_views=2, whiten_dim=16, nhead=4, dim_feedforward=32,
                                dropout=0.5, batch_videos=4, bank_size=16, distractors_per_step=4, steps=10, lr=1e-3,
                                warmup_steps=2, descriptors="context-smoke"),
    # Chapter 6's pixel-level attempt: the stock benchmark (every video opens with one of four shared stock shots),
    # 16-frame views of whole clips (so every view keeps its intro), 200 steps.
    "stock": TCAProfile("stock", train_clips=96, distractor_clips=64, frames=16, stride=2, eval_stride=2,
                        strong_views=2, whiten_dim=128, nhead=8, dim_feedforward=256, dropout=0.5, batch_videos=16,
                        bank_size=128, distractors_per_step=16, steps=200, lr=5e-4, warmup_steps=10),
    "full": TCAProfile("full", train_clips=2048, distractor_clips=2048, frames=32, stride=2, eval_stride=1,
                       strong_views=4, whiten_dim=1024, nhead=8, dim_feedforward=2048, dropout=0.5, batch_videos=64,
                       bank_size=4096, distractors_per_step=64, steps=5000, lr=1e-4, warmup_steps=250,
                       eval_every=500),
    # The released run (README of https://github.com/xwen99/temporal_context_aggregation): ResNet-50 L3-iRMAC on the
    # released extractor's windows, whitened to 1024-d, one Transformer layer (8 heads, FFN 2048), batch 64 per GPU
    # x 8 GPUs = 512 items, queue of 4,096 keys of random unit vectors at the start, no in-batch negatives, no gradient clipping, Adam
    # lr 1e-5, wd 1e-4, 40 epochs; training views zero-padded (with valid flags) to the README's 300 frames.
    # Dropout 0.5 as the paper (the released train.py uses 0.2). Needs torchvision's ResNet-50 weights.
    # The README's 16 background negatives per item would enqueue 8,192 keys per step into the 4,096-key queue,
    # which the released MoCo code's assertion (queue size a multiple of the key batch) refuses; hapref refuses
    # it too (TCATask), so the profile enqueues 8 per item: 4,096 keys, the whole queue renewed every step.
    "released": TCAProfile("full", train_clips=4096, distractor_clips=4096, frames=300, stride=1, eval_stride=1,
                           strong_views=4, whiten_dim=1024, nhead=8, dim_feedforward=2048, dropout=0.5,
                           batch_videos=512, bank_size=4096, distractors_per_step=4096, steps=6000, lr=1e-5,
                           warmup_steps=0, eval_every=1000, backbone="resnet50", pad_views=True,
                           in_batch_negatives=False, bank_init="random", region_windows="released",
                           grad_clip=None),
}


@dataclass(frozen=True)
class Variant:
    """What a run changes: the loss and its parameters (TCA Table 1c), bank size (Table 1d), feature (Table 1b).

    ``objective`` says what the loss compares (:data:`OBJECTIVES`): ``"pooled"``, the paper's, or ``"frame"``, this
    book's departure (the Chamfer similarity of the refined frames, :func:`frame_contrastive_similarities`).

    Examples:
        >>> Variant().loss, Variant(loss="infonce", bank_size=0).bank_size, Variant().objective
        ('circle', 0, 'pooled')
        >>> Variant(objective="frame", aggregator="netvlad")
        Traceback (most recent call last):
        ...
        ValueError: objective='frame' needs refined frames: aggregator='netvlad' has none
        >>> Variant(loss="arcface")
        Traceback (most recent call last):
        ...
        ValueError: loss must be one of ('infonce', 'circle', 'triplet'), got 'arcface'
    """

    loss: str = "circle"
    temperature: float = 1 / 256     # InfoNCE: the scale of Circle loss's γ = 256
    m: float = 0.25
    gamma: float = 256.0
    bank_size: int | None = None      # None: the profile's
    pooling: str = "l3irmac"
    aggregator: str = "transformer"   # Table 1a: "transformer" (TCA), "netvlad", "lstm", "gru"; "mlp": control
    momentum: float = 0.0             # Table 1e: key encoder θ_k <- m θ_k + (1-m) θ_q; 0 = the current encoder
    margin: float = 0.1               # triplet loss (Table 1d baseline)
    in_batch_negatives: bool | None = None   # None: the profile's (off: the paper's memory-bank negatives only)
    # "pooled": the paper's loss on mean-pooled video descriptors; "frame": the book's departure, the same loss on
    # the Chamfer similarity of the refined frames against frame-level keys (OBJECTIVES)
    objective: str = "pooled"
    distractors_per_step: int | None = None  # None: the profile's (distractor keys enqueued after every step)

    def __post_init__(self) -> None:
        if self.loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {self.loss!r}")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {self.objective!r}")
        if self.objective == "frame" and self.aggregator == "netvlad":
            raise ValueError("objective='frame' needs refined frames: aggregator='netvlad' has none")
        if self.distractors_per_step is not None and self.distractors_per_step < 1:
            raise ValueError(f"distractors_per_step must be >= 1 (None: the profile's), got "
                             f"{self.distractors_per_step}")
        if self.pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {self.pooling!r}")
        if self.temperature <= 0 or self.gamma <= 0 or not 0 <= self.m < 1:
            raise ValueError(f"temperature and gamma must be > 0 and m in [0, 1), got temperature={self.temperature}, "
                             f"gamma={self.gamma}, m={self.m}")
        if self.aggregator not in AGGREGATORS:
            raise ValueError(f"aggregator must be one of {AGGREGATORS}, got {self.aggregator!r}")
        if not 0.0 <= self.momentum < 1.0 or self.margin < 0:
            raise ValueError(f"momentum must lie in [0, 1) and margin be >= 0, got momentum={self.momentum}, "
                             f"margin={self.margin}")
        if self.bank_size is not None and self.bank_size < 0:
            raise ValueError(f"bank_size must be >= 0 (0 = in-batch negatives only), got {self.bank_size}")

    def loss_hyperparameters(self) -> dict[str, float]:
        """The keywords of this variant's loss class (:func:`hapref.losses.contrastive_loss`).

        The fields keep the run keys of the stored sweeps (``m``, ``gamma``); the loss classes call them
        ``margin`` and ``scale``.

        Examples:
            >>> Variant().loss_hyperparameters()
            {'margin': 0.25, 'scale': 256.0}
            >>> Variant(loss="infonce", temperature=0.07).loss_hyperparameters()
            {'temperature': 0.07}
        """
        return {"infonce": {"temperature": self.temperature}, "circle": {"margin": self.m, "scale": self.gamma},
                "triplet": {"margin": self.margin}}[self.loss]


@dataclass
class TCAData:
    """Precomputed, PCA-whitened frame descriptors of one profile (all on CPU), built by ``prepare_data``.

    Examples:
        >>> data = prepare_data("smoke")
        >>> data.train.shape, data.distractors.shape, data.relevance.shape
        (torch.Size([8, 2, 8, 32]), torch.Size([8, 8, 32]), torch.Size([3, 21]))
    """

    train: Tensor            # [C, V, T, D] every view of every training clip
    train_valid: Tensor      # [C, V, T] bool: real frames (False = padding, with ``pad_views``)
    distractors: Tensor      # [Cd, T, D] weak view of every distractor clip (bank negatives)
    distractors_valid: Tensor    # [Cd, T] bool
    whitening: dict          # state dict of the PCAWhitening fit on the training views
    queries: Tensor          # [Q, Tq, D]
    query_valid: Tensor       # [Q, Tq]
    database: Tensor         # [M, Tm, D]
    database_valid: Tensor    # [M, Tm]
    relevance: Tensor        # [Q, M] bool (DSVR)


@cache_per_dtype(maxsize=4)
def prepare_data(profile: str | TCAProfile, pooling: str = "l3irmac", progress: bool = False) -> TCAData:
    """Frame descriptors (``pooling`` of TCA Eq. 1) of the training views and of the benchmark, cached on disk.

    Examples:
        >>> data = prepare_data("smoke")
        >>> data.queries.shape, data.database.shape
        (torch.Size([3, 8, 32]), torch.Size([21, 14, 32]))
    """
    profile, p = resolve_profile(profile)
    if pooling not in POOLINGS:
        raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
    if p.features is not None:          # cheap to rebuild: no disk cache
        return _prepare_from_features(p)
    if p.descriptors is not None:       # drawn in well under a second: no disk cache
        return _prepare_from_descriptors(p)
    bench = build_copy_benchmark(p.benchmark, seed=p.benchmark_seed)
    data_fields = {k: v for k, v in asdict(p).items() if k in DATA_FIELDS}
    code = source_digest(backbones_module, pooling_module, views_module, sys.modules[__name__])
    key = config_key({"tca": DATA_VERSION, "data": data_fields, "pooling": pooling,
                      "benchmark": bench.fingerprint()[:16], "code": code})
    path = data_root() / "tca" / f"features-{profile}-{pooling}-{key}.pt"
    cached = load_cached(path)          # None when absent or damaged (then regenerated)
    if cached is not None and set(cached) == {f.name for f in fields(TCAData)}:
        return TCAData(**cached)
    backbone = load_backbone(p.backbone, image_size=bench.config.frame_size).to(get_device())

    if p.region_windows not in ("even", "released"):
        raise ValueError(f"region_windows must be 'even' or 'released', got {p.region_windows!r}")
    pool = "l3irmac_released" if pooling == "l3irmac" and p.region_windows == "released" else pooling

    def encode(frames: Tensor) -> Tensor:
        with torch.no_grad():
            return pool_layers(backbone(frames), pool).cpu()

    g = torch.Generator().manual_seed(p.benchmark_seed)
    train, distractors, train_valid, distractors_valid = [], [], [], []
    source = bench.train if p.frames_dir is None else FrameClips(p.frames_dir, bench.config.frame_size,
                                                                  bench.config.train_frames)
    n_pairs = min(p.train_clips, len(source) // 2)
    n_distractors = min(p.distractor_clips, len(source) - n_pairs)
    for c in tqdm(range(n_pairs + n_distractors), disable=not progress, desc="training views"):
        count = p.strong_views if c < n_pairs else 0
        if p.pad_views:
            fitted, valid = make_padded_views(source[c][::p.stride], count, p.frames, g)
        else:
            fitted = make_views(source[c][::p.stride], count, p.frames, g)
            valid = [torch.ones(p.frames, dtype=torch.bool)] * len(fitted)
        views = torch.stack(fitted)                                                  # [V, T, H, W, 3]
        (train if c < n_pairs else distractors).append(encode(views.flatten(0, 1)).view(*views.shape[:2], -1))
        (train_valid if c < n_pairs else distractors_valid).append(torch.stack(valid))
    raw, raw_valid = torch.stack(train), torch.stack(train_valid)
    whitening = PCAWhitening.fit(raw[raw_valid], dim=min(p.whiten_dim, raw.shape[-1]))   # real frames only

    def eval_features(videos: list[Tensor]) -> tuple[Tensor, Tensor]:
        videos = tqdm(videos, disable=not progress, desc="eval videos")
        return pad_videos([whitening(encode(v[::p.eval_stride])) for v in videos])

    queries, query_valid = eval_features(bench.queries.videos)
    database, database_valid = eval_features(bench.database.videos)
    data = TCAData(train=whitening(raw), train_valid=raw_valid, distractors=whitening(torch.stack(distractors)[:, 0]),
                   distractors_valid=torch.stack(distractors_valid)[:, 0],
                   whitening={k: v.clone() for k, v in whitening.state_dict().items()}, queries=queries,
                   query_valid=query_valid, database=database,
                   database_valid=database_valid, relevance=bench.relevance("DSVR"))
    atomic_torch_save(asdict(data), path)
    return data


def _prepare_from_features(p: TCAProfile) -> TCAData:
    """TCAData from an HDF5 features file: regions summed and L2-normalised into frame descriptors [T, D].

    Without ``vcdb`` the copy pairs are temporal views of one video (:mod:`hapref.data.feature_views`) and the
    next ``distractor_clips`` videos feed the bank; with it, every VCDB copy pair whose two videos are in the
    file is a clip with two views (one window of each video) and VCDB's distractors feed the bank (TCA §4.1).
    The last ``held_out`` videos are kept out for a copy-retrieval check.
    """
    from hapref.data.loaders import read_vcdb

    ids, videos = read_feature_videos(p.features, min_len=p.frames)
    if not 2 <= p.held_out <= len(videos) - 2:
        raise ValueError(f"held_out must lie in [2, {len(videos) - 2}] for the {len(videos)} videos of {p.features}, "
                         f"got {p.held_out}")
    frames = [torch.nn.functional.normalize(v.sum(dim=1), dim=-1) for v in videos]
    g = torch.Generator().manual_seed(0)
    held, rest = frames[-p.held_out:], dict(zip(ids[:-p.held_out], frames[:-p.held_out]))
    if p.vcdb is None:
        order = list(rest)
        pairs = order[:min(p.train_clips, len(order) - 1)]
        clips = [[temporal_view(rest[v], p.frames, k > 0, g) for k in range(p.strong_views + 1)] for v in pairs]
        negatives = [v for v in order[len(pairs):]][:p.distractor_clips]
    else:
        _, positives, negs = read_vcdb(p.vcdb)
        copy_pairs = sorted({tuple(sorted((a, b))) for a, bs in positives.items() for b in bs
                             if a != b and a in rest and b in rest})[:p.train_clips]
        if not copy_pairs:
            raise ValueError(f"no copy pair of {p.vcdb} has both videos in {p.features}")
        clips = [[temporal_view(rest[a], p.frames, False, g), temporal_view(rest[b], p.frames, False, g)]
                 for a, b in copy_pairs]
        used = {v for pair in copy_pairs for v in pair}
        negatives = [v for v in dict.fromkeys(negs) if v in rest and v not in used][:p.distractor_clips]
    if not negatives:
        raise ValueError(f"{p.features} leaves no distractor videos for the memory bank")
    raw = torch.stack([torch.stack(views) for views in clips])
    whitening = PCAWhitening.fit(raw, dim=min(p.whiten_dim, raw.shape[-1]))
    bank = torch.stack([temporal_view(rest[v], p.frames, False, g) for v in negatives])
    queries, database, relevance = held_out_copies(held, p.frames, torch.Generator().manual_seed(12345))
    valid = torch.ones(len(held), p.frames, dtype=torch.bool)
    return TCAData(train=whitening(raw), train_valid=torch.ones(raw.shape[:3], dtype=torch.bool),
                   distractors=whitening(bank), distractors_valid=torch.ones(bank.shape[:2], dtype=torch.bool),
                   whitening={k: v.clone() for k, v in whitening.state_dict().items()}, queries=whitening(queries),
                   query_valid=valid, database=whitening(database), database_valid=valid.clone(), relevance=relevance)


def _prepare_from_descriptors(p: TCAProfile) -> TCAData:
    """TCAData of the drawn descriptor benchmark ``p.descriptors`` (:mod:`hapref.data.descriptors`), PCA-whitened
    on the training views as the pixel path is; the profile's clip counts, views and instance replace the config's.
    """
    from hapref.data.descriptors import PROFILES as DESCRIPTOR_PROFILES, generate_descriptor_benchmark

    if p.descriptors not in DESCRIPTOR_PROFILES:
        raise ValueError(f"descriptors must be one of {sorted(DESCRIPTOR_PROFILES)}, got {p.descriptors!r}")
    config = replace(DESCRIPTOR_PROFILES[p.descriptors], train_clips=p.train_clips,
                     distractor_clips=p.distractor_clips, views=p.strong_views + 1, seed=p.benchmark_seed)
    if p.frames != config.view_frames or p.whiten_dim != config.dim:
        raise ValueError(f"descriptors={p.descriptors!r} gives {config.view_frames}-frame views of {config.dim}-d "
                         f"descriptors: frames and whiten_dim must match, got {p.frames} and {p.whiten_dim}")
    bench = generate_descriptor_benchmark(config, dtype=torch.get_default_dtype())
    whitening = PCAWhitening.fit(bench.train, dim=p.whiten_dim)

    def ones(x: Tensor) -> Tensor:
        return torch.ones(x.shape[:-1], dtype=torch.bool)

    return TCAData(train=whitening(bench.train), train_valid=ones(bench.train),
                   distractors=whitening(bench.distractor_views), distractors_valid=ones(bench.distractor_views),
                   whitening={k: v.clone() for k, v in whitening.state_dict().items()},
                   queries=whitening(bench.queries), query_valid=ones(bench.queries),
                   database=whitening(bench.database), database_valid=ones(bench.database),
                   relevance=bench.relevance)


def resolve_profile(profile: str | TCAProfile) -> tuple[str, TCAProfile]:
    """``(cache name, settings)`` of a profile name or of an explicit (e.g. overridden) profile.

    Examples:
        >>> from dataclasses import replace
        >>> resolve_profile("smoke")[0], resolve_profile(replace(PROFILES["smoke"], steps=3))[0]
        ('smoke', 'smoke-custom')
    """
    return named_profile(profile, PROFILES, TCAProfile)


def frame_scores(x: Tensor, y: Tensor, x_valid: Tensor, y_valid: Tensor, measure: str) -> Tensor:
    """Video × video scores ``[Q, M]`` from frame descriptors ``[Q, Tq, D]``, ``[M, Tm, D]`` (TCA Eq. 8–10).

    ``cosine``: cosine of the mean-pooled frames; ``chamfer``: mean over query frames of the best target frame;
    ``symmetric_chamfer``: the average of both directions.

    Examples:
        >>> x, y = torch.randn(2, 5, 8), torch.randn(3, 6, 8)
        >>> x_valid, y_valid = torch.ones(2, 5, dtype=torch.bool), torch.ones(3, 6, dtype=torch.bool)
        >>> frame_scores(x, y, x_valid, y_valid, "chamfer").shape
        torch.Size([2, 3])
    """
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {MEASURES}, got {measure!r}")
    if measure == "cosine":
        return mean_pooled_similarity(x.unsqueeze(1), y.unsqueeze(0), x_valid.unsqueeze(1), y_valid.unsqueeze(0),
                                      normalize=True)
    sim = torch.einsum("qtd,msd->qmts", x, y)
    valid = pair_valid(x_valid.unsqueeze(1), y_valid.unsqueeze(0))
    return chamfer_similarity(sim, valid) if measure == "chamfer" else symmetric_chamfer(sim, valid)


class _ChamferToKeys(torch.autograd.Function):
    """``[B, M]`` Chamfer similarities ``Σ_t w_bt max_s q_bt·k_ms`` of queries ``[B, T, D]`` with detached keys
    ``[M, S, D]`` (``keys_valid [M, S]`` or None), the gradient reaching the queries only. The same numbers and
    gradient as autograd through ``amax`` (tests), at about half its time and memory: backward scatters the
    incoming gradient onto the chosen key frames only."""

    @staticmethod
    def forward(ctx, query: Tensor, keys: Tensor, keys_valid: Tensor | None, weights: Tensor) -> Tensor:
        (b, t, d), (m, s) = query.shape, keys.shape[:2]
        sim = (query.reshape(b * t, d) @ keys.reshape(m * s, d).T).view(b, t, m, s)
        if keys_valid is not None:
            sim = sim.masked_fill(~keys_valid.bool()[None, None], -math.inf)
        best, chosen = sim.max(-1)                                          # [B, T, M]
        ctx.save_for_backward(chosen, keys, weights)
        return torch.einsum("btm,bt->bm", best.masked_fill(best == -math.inf, 0.0), weights)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None, None, None]:
        chosen, keys, weights = ctx.saved_tensors
        (b, t, m), s, d = chosen.shape, keys.shape[1], keys.shape[2]
        onto = torch.zeros(b, t, m, s, dtype=grad.dtype, device=grad.device)
        onto.scatter_(-1, chosen.unsqueeze(-1), (grad[:, None, :] * weights[:, :, None]).unsqueeze(-1))
        return (onto.view(b * t, m * s) @ keys.reshape(m * s, d)).view(b, t, d), None, None, None


def frame_contrastive_similarities(query: Tensor, positive: Tensor, bank: MemoryBank | None = None,
                                   clip_ids: Tensor | None = None, in_batch: bool = True,
                                   query_valid: Tensor | None = None, positive_valid: Tensor | None = None,
                                   ) -> tuple[Tensor, Tensor]:
    """Chamfer similarities ``[B, 1 + M]`` of refined query frames with their positive's and the negatives' frames.

    The frame-level objective, this book's departure from TCA §3.4 (whose loss compares mean-pooled descriptors):
    entry ``(b, j)`` is the Chamfer similarity (TCA Eq. 8) of anchor b's frames ``query [B, T, D]`` with candidate
    j's frames, ``CS(q, k) = (1/T) Σ_t max_s q_t·k_s`` over real frames, the score TCA_f retrieves with. Candidates:
    the positive ``positive [B, S, D]`` in column 0, then (``in_batch``, one process's rows) the other rows'
    positives, then the frame keys ``[M, S, D]`` of a frame bank (``MemoryBank(..., frames=S)``). The layout and
    the returned ``valid [B, M]`` (False = a negative of the anchor's own clip) are those of
    :func:`hapref.losses.contrastive_similarities`, so any memory-bank loss takes them.

    Examples:
        >>> q = torch.nn.functional.normalize(torch.randn(3, 4, 8), dim=-1)
        >>> sims, valid = frame_contrastive_similarities(q, q)
        >>> sims.shape, torch.allclose(sims[:, 0], torch.ones(3)), valid.shape     # a view matches itself
        (torch.Size([3, 3]), True, torch.Size([3, 2]))
        >>> bank = MemoryBank(size=5, dim=8, frames=4)
        >>> bank.enqueue(q[:2], torch.tensor([-1, 2]))
        >>> sims, valid = frame_contrastive_similarities(q, q, bank, in_batch=False)
        >>> sims.shape, valid[2].tolist()          # the bank's key of clip 2 is no negative of anchor 2
        (torch.Size([3, 3]), [True, False])
    """
    check_float_tensor(query, "query", ndim=3)
    check_float_tensor(positive, "positive", ndim=3)
    if query.shape[0] != positive.shape[0] or query.shape[2] != positive.shape[2]:
        raise ValueError(f"query [B, T, D] and positive [B, S, D] must agree in B and D, got "
                         f"{tuple(query.shape)}, {tuple(positive.shape)}")
    if bank is not None and bank.frames is None:
        raise ValueError("bank must be a frame bank (MemoryBank(..., frames=S)) for frame-level similarities")
    b = query.shape[0]

    weights = (torch.ones(query.shape[:2], dtype=query.dtype, device=query.device) if query_valid is None
               else query_valid.to(query.dtype))
    weights = weights / weights.sum(1, keepdim=True).clamp_min(1)          # the mean over real query frames

    def chamfer(keys: Tensor, keys_valid: Tensor | None) -> Tensor:      # [B, M]
        return _ChamferToKeys.apply(query, keys.detach().to(query.dtype), keys_valid, weights)

    ids = torch.arange(b, device=query.device) if clip_ids is None else clip_ids.to(query.device)
    batch_sims = chamfer(positive, positive_valid)                          # [B, B]: positive j of anchor b
    neg, neg_ids = [], []
    if in_batch and b > 1:
        off = ~torch.eye(b, dtype=torch.bool, device=query.device)
        neg.append(batch_sims[off].view(b, b - 1))
        neg_ids.append(ids.expand(b, b)[off].view(b, b - 1))
    if bank is not None and int(bank.count) > 0:
        keys, key_ids = bank.filled()
        keys_valid = bank.filled_valid()
        neg.append(chamfer(keys, None if bool(keys_valid.all()) else keys_valid))
        neg_ids.append(key_ids.expand(b, -1))
    pos = batch_sims.diagonal().unsqueeze(1)
    if not neg:
        return pos, torch.zeros(b, 0, dtype=torch.bool, device=query.device)
    neg_ids_all = torch.cat(neg_ids, dim=1)
    valid = (neg_ids_all != ids.unsqueeze(1)) | (neg_ids_all < 0)
    return torch.cat([pos, torch.cat(neg, dim=1)], dim=1), valid


def baseline_metrics(profile: str, pooling: str = "l3irmac") -> dict[str, dict[str, float]]:
    """Training-free baselines on the same whitened features: mAP/μAP per measure of ``MEASURES``.

    Examples:
        >>> metrics = baseline_metrics("smoke")
        >>> sorted(metrics), sorted(metrics["chamfer"])
        (['chamfer', 'cosine', 'symmetric_chamfer'], ['mAP', 'uAP'])
    """
    d = prepare_data(profile, pooling)
    return {m: map_and_micro_ap(frame_scores(d.queries, d.database, d.query_valid, d.database_valid, m), d.relevance)
            for m in MEASURES}


class AggregatorWithBank(nn.Module):
    """The aggregator being trained plus its memory bank (TCA §3.4), so checkpoints and ``.to()`` carry the bank.

    Calls go to the aggregator: ``model(features, valid)`` is TCA_c, ``model.frame_embeddings`` TCA_f.
    ``key_encoder`` (optional) is a :class:`~hapref.models.MomentumEncoder` of the aggregator (MoCo, TCA
    Table 1e); without one, :meth:`keys` uses the aggregator itself (momentum 0, the memory bank).

    Examples:
        >>> model = build_model(16, 4, 32, 0.5, bank_size=8).eval()
        >>> type(model.aggregator).__name__, model(torch.randn(2, 5, 16)).shape, model.keys(torch.randn(2, 5, 16)).shape
        ('TemporalContextAggregator', torch.Size([2, 16]), torch.Size([2, 16]))
    """

    def __init__(self, aggregator: nn.Module, bank: MemoryBank | None,
                 key_encoder: MomentumEncoder | None = None) -> None:
        super().__init__()
        self.aggregator, self.bank, self.key_encoder = aggregator, bank, key_encoder

    @torch.no_grad()
    def keys(self, features: Tensor, valid: Tensor | None = None) -> Tensor:
        """Key descriptors ``[N, D]`` without gradient: the momentum encoder's if there is one.

        ``features [N, T, D]`` float with ``valid [N, T]`` bool (True = real frame); keys of positives and
        distractors fill the memory bank (TCA §3.4).

        Examples:
            >>> model = build_model(16, 4, 32, 0.5, bank_size=8).eval()     # momentum 0: the aggregator itself
            >>> x = torch.randn(2, 5, 16)
            >>> keys = model.keys(x)
            >>> keys.shape, keys.requires_grad, torch.allclose(keys, model(x))
            (torch.Size([2, 16]), False, True)
        """
        return (self.key_encoder or self.aggregator)(features, valid)

    @torch.no_grad()
    def key_frames(self, features: Tensor, valid: Tensor | None = None) -> Tensor:
        """Refined frame keys ``[N, T, D]`` without gradient (the frame-level objective's positives and bank).

        The momentum encoder's frames if there is one, else the aggregator's; padded frames are zero.

        Examples:
            >>> model = build_model(16, 4, 32, 0.5, bank_size=8, bank_frames=5).eval()
            >>> x = torch.randn(2, 5, 16)
            >>> keys = model.key_frames(x)
            >>> keys.shape, keys.requires_grad, torch.allclose(keys, model.frame_embeddings(x))
            (torch.Size([2, 5, 16]), False, True)
        """
        encoder = self.aggregator if self.key_encoder is None else self.key_encoder.encoder
        return encoder.frame_embeddings(features, valid)

    @renamed_keywords(mask="valid")
    def forward(self, features: Tensor, valid: Tensor | None = None) -> Tensor:
        """Video descriptors ``[N, D]`` of frame features ``[N, T, D]`` with ``valid [N, T]`` (TCA_c).

        Examples:
            >>> model = build_model(16, 4, 32, 0.5, bank_size=8).eval()
            >>> model(torch.randn(2, 5, 16), torch.ones(2, 5, dtype=torch.bool)).shape
            torch.Size([2, 16])
        """
        return self.aggregator(features, valid)

    @renamed_keywords(mask="valid")
    def frame_embeddings(self, features: Tensor, valid: Tensor | None = None) -> Tensor:
        """Refined, L2-normalised frame descriptors ``[N, T, D]`` of ``features [N, T, D]`` (TCA_f, the input of
        the Chamfer scores of TCA Eq. 8–9); padded frames (``valid`` False) are zero.

        Examples:
            >>> model = build_model(16, 4, 32, 0.5, bank_size=8).eval()
            >>> valid = torch.tensor([[True] * 5, [True, True, True, False, False]])
            >>> frames = model.frame_embeddings(torch.randn(2, 5, 16), valid)
            >>> frames.shape, torch.allclose(frames[0].norm(dim=-1), torch.ones(5)), bool(frames[1, 3:].eq(0).all())
            (torch.Size([2, 5, 16]), True, True)
        """
        return self.aggregator.frame_embeddings(features, valid)


def build_model(dim: int, nhead: int, dim_feedforward: int, dropout: float, bank_size: int,
                aggregator: str = "transformer", momentum: float = 0.0, bank_init: str = "empty",
                bank_frames: int | None = None) -> AggregatorWithBank:
    """An aggregator of ``dim``-d frame descriptors (TCA §3.2; one Transformer layer by default), its memory bank
    of ``bank_size`` keys and, with ``momentum`` > 0, a momentum key encoder (TCA Table 1e).

    ``bank_frames=T``: every bank entry is a set of T frame keys (the frame-level objective); None: one vector.

    Examples:
        >>> model = build_model(16, 4, 32, 0.5, bank_size=8)
        >>> model.eval()(torch.randn(2, 5, 16)).shape, model.bank.size
        (torch.Size([2, 16]), 8)
        >>> tuple(build_model(16, 4, 32, 0.5, bank_size=8, bank_frames=5).bank.keys.shape)
        (8, 5, 16)
    """
    net = build_aggregator(aggregator, dim, nhead, dim_feedforward, dropout)
    if bank_init not in BANK_INITS:
        raise ValueError(f"bank_init must be one of {BANK_INITS}, got {bank_init!r}")
    key_encoder = MomentumEncoder(net, momentum) if momentum > 0 else None
    bank = MemoryBank(bank_size, dim, frames=bank_frames) if bank_size > 0 else None
    if bank is not None and bank_init == "random":
        bank.fill_random()      # the global RNG, seeded by the trainer
    return AggregatorWithBank(net, bank, key_encoder)


class TCATask:
    """A :class:`hapref.train.Task` for TCA: view pairs, a memory-bank contrastive loss, DSVR evaluation.

    Examples:
        >>> task = TCATask("smoke")
        >>> model = task.build_model()
        >>> batch = task.batch(0, torch.device("cpu"))
        >>> batch["anchor"].shape, sorted(task.loss(model, batch))
        (torch.Size([4, 8, 32]), ['loss', 's_pos'])
        >>> sorted(task.evaluate(model))
        ['mAP', 'mAP_f', 'mAP_sym', 'mean_share', 'mean_share_trace', 'uAP', 'uAP_f', 'uAP_sym']
    """

    def __init__(self, profile: str | TCAProfile = "quick", variant: Variant = Variant(), seed: int = 0,
                 progress: bool = False) -> None:
        self.profile, self.variant, self.seed = resolve_profile(profile)[1], variant, seed
        self.bank_size = self.profile.bank_size if variant.bank_size is None else variant.bank_size
        self.distractors_per_step = (self.profile.distractors_per_step if variant.distractors_per_step is None
                                     else variant.distractors_per_step)
        if self.bank_size and self.distractors_per_step > self.bank_size:
            # the released MoCo queue asserts the same: keys of one step must fit the queue
            raise ValueError(f"distractors_per_step={self.distractors_per_step} keys per step (gathered over "
                             f"all processes) do not fit the memory bank of bank_size={self.bank_size}: the queue "
                             f"would drop keys of the same step; lower distractors_per_step or raise bank_size")
        self.data = prepare_data(profile if isinstance(profile, str) else self.profile, variant.pooling, progress)
        self.criterion = contrastive_loss(variant.loss, **variant.loss_hyperparameters())
        self.in_batch = (self.profile.in_batch_negatives if variant.in_batch_negatives is None
                         else variant.in_batch_negatives)
        if not self.in_batch and self.bank_size == 0:
            raise ValueError("a run without a memory bank (bank_size=0) needs in_batch_negatives=True: "
                             "otherwise the loss has no negatives")
        if self.profile.bank_init not in BANK_INITS:
            raise ValueError(f"bank_init must be one of {BANK_INITS}, got {self.profile.bank_init!r}")

    def build_model(self) -> AggregatorWithBank:
        return build_model(**self.model_spec()["kwargs"])

    def run_settings(self) -> dict[str, Any]:
        """Every resolved setting of the run (recorded in ``config.json``): profile, variant and the bank size used.

        Examples:
            >>> settings = TCATask("smoke", Variant(loss="infonce")).run_settings()
            >>> settings["variant"]["loss"], settings["variant"]["bank_size"], settings["bank_size"]  # None: profile's
            ('infonce', None, 16)
        """
        return {"profile": asdict(self.profile), "variant": asdict(self.variant), "bank_size": self.bank_size,
                "distractors_per_step": self.distractors_per_step, "in_batch_negatives": self.in_batch}

    def model_spec(self) -> dict[str, Any]:
        """The model's constructor and arguments and its inputs' preprocessing (:func:`hapref.train.load_run`).

        Examples:
            Rebuild the aggregator (and its memory bank) from the spec alone, as :func:`hapref.train.load_run` does:

            >>> import importlib
            >>> task = TCATask("smoke")
            >>> spec = task.model_spec()
            >>> spec["factory"], spec["kwargs"]["dim"], spec["kwargs"]["bank_size"]
            ('hapref.train.tca:build_model', 32, 16)
            >>> module, name = spec["factory"].split(":")
            >>> net = getattr(importlib.import_module(module), name)(**spec["kwargs"]).eval()
            >>> net(task.data.queries, task.data.query_valid).shape
            torch.Size([3, 32])
        """
        p, v = self.profile, self.variant
        return {"factory": "hapref.train.tca:build_model",
                "kwargs": {"dim": int(self.data.train.shape[-1]), "nhead": p.nhead,
                           "dim_feedforward": p.dim_feedforward, "dropout": p.dropout,
                           "bank_size": self.bank_size, "aggregator": v.aggregator, "momentum": v.momentum,
                           "bank_init": p.bank_init,
                           "bank_frames": int(self.data.train.shape[2]) if v.objective == "frame" else None},
                "preprocess": {"whitening": "hapref.features.whitening:PCAWhitening"}}

    def preprocess(self) -> dict[str, nn.Module]:
        """The PCA whitening fit on the training views: apply it to the frame descriptors of new videos.

        ``{"whitening": PCAWhitening}`` mapping float descriptors ``[..., D]`` (the backbone's L3-iRMAC or iMAC) to
        ``[..., whiten_dim]``, the model's input size; saved with the checkpoint and rebuilt by
        :func:`hapref.train.load_run`.

        Examples:
            >>> task = TCATask("smoke")
            >>> whitening = task.preprocess()["whitening"]
            >>> frames = torch.randn(7, whitening.in_dim)     # [T, D] descriptors of a new video
            >>> whitening(frames).shape[-1] == whitening.out_dim == task.model_spec()["kwargs"]["dim"]
            True
        """
        return {"whitening": PCAWhitening(**self.data.whitening)}

    def batch(self, step: int, device: torch.device) -> dict[str, Tensor]:
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + step)
        n_clips, n_views = self.data.train.shape[:2]
        clips = rank_batch(torch.randperm(n_clips, generator=g), self.profile.batch_videos)   # torchrun: a shard
        views = rank_stream(g)                                  # one process: g itself
        anchor = torch.randint(0, n_views, (len(clips),), generator=views)
        positive = (anchor + torch.randint(1, n_views, (len(clips),), generator=views)) % n_views  # another view
        n_distractors = len(self.data.distractors)
        distractors = rank_batch(torch.randperm(n_distractors, generator=g), self.distractors_per_step)
        d = self.data
        return {"anchor": d.train[clips, anchor].to(device), "anchor_valid": d.train_valid[clips, anchor].to(device),
                "positive": d.train[clips, positive].to(device),
                "positive_valid": d.train_valid[clips, positive].to(device), "clips": clips.to(device),
                "distractors": d.distractors[distractors].to(device),
                "distractors_valid": d.distractors_valid[distractors].to(device),
                "distractor_ids": (-1 - distractors).to(device)}     # negative ids: never the anchor's clip

    def loss(self, model: AggregatorWithBank, batch: dict[str, Tensor]) -> dict[str, Tensor]:
        if model.key_encoder is not None:                       # MoCo: θ_k <- m θ_k + (1 - m) θ_q, then the keys
            model.key_encoder.update(model.aggregator)
        def valid(name: str) -> Tensor | None:                 # None without padding: the unmasked path
            flags = batch[f"{name}_valid"]
            return None if bool(flags.all()) else flags

        if self.variant.objective == "frame":
            return self._frame_loss(model, batch, valid)
        query = at_least_float32(model(batch["anchor"], valid("anchor")))
        with torch.no_grad():                                   # key encoder = query encoder (momentum 0)
            key = at_least_float32(model.keys(batch["positive"], valid("positive")))
            negatives = (at_least_float32(model.keys(batch["distractors"], valid("distractors")))
                         if model.bank is not None else None)
        if self.in_batch:   # torchrun: every rank's keys are in-batch negatives
            sims, valid = global_contrastive_similarities(query, key, model.bank, batch["clips"])
        else:               # the paper's negatives: the bank only (every rank's distractors enter it)
            sims, valid = contrastive_similarities(query, key, model.bank, batch["clips"], in_batch=False)
        loss = self.criterion(sims, valid)
        if negatives is not None:                               # after the loss: negatives of later steps
            enqueue_all_ranks(model.bank, negatives, batch["distractor_ids"])
        return {"loss": loss, "s_pos": sims[:, 0].mean().detach()}

    @torch.no_grad()
    def objective_value(self, aggregator: nn.Module, objective: str = "pooled", batches: int = 4) -> float:
        """The training loss of a fixed ``aggregator`` (no step taken) under ``objective`` (:data:`OBJECTIVES`).

        The variant's loss (:meth:`Variant.loss_hyperparameters`) on the similarities of the first ``batches``
        batches of training (:meth:`batch`, steps 0, 1, ...), the bank filled with the keys of the first
        ``bank_size`` distractor clips encoded by ``aggregator`` itself (the bank of a run that has trained at
        this point for a while): pooled descriptors (TCA §3.4) or frame keys (the frame-level objective). Chapter
        6 evaluates it along a line of hand-set encoders to see where each objective pulls. Returns the mean over
        batches, a float; ``aggregator`` is used as it is (call ``.eval()`` for no dropout).

        Examples:
            >>> task = TCATask("context-smoke")
            >>> hand_set = TemporalContextAggregator.mean_subtracting(16, 1.0, nhead=4).eval()
            >>> [round(task.objective_value(hand_set, o), 3) > 0 for o in OBJECTIVES]
            [True, True]
        """
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
        if batches < 1:
            raise ValueError(f"batches must be >= 1, got {batches}")
        device = next(aggregator.parameters()).device
        d = self.data
        n = min(self.bank_size, len(d.distractors))
        bank = None
        if n > 0:
            x, valid = d.distractors[:n].to(device), d.distractors_valid[:n].to(device)
            frame = objective == "frame"
            keys = aggregator.frame_embeddings(x, valid) if frame else aggregator(x, valid)
            bank = MemoryBank(n, keys.shape[-1], keys.dtype, frames=x.shape[1] if frame else None).to(device)
            bank.enqueue(keys, -1 - torch.arange(n, device=device), valid if frame else None)
        total = 0.0
        for step in range(batches):
            b = self.batch(step, device)
            if objective == "frame":
                sims, keep = frame_contrastive_similarities(
                    aggregator.frame_embeddings(b["anchor"], b["anchor_valid"]),
                    aggregator.frame_embeddings(b["positive"], b["positive_valid"]), bank, b["clips"],
                    self.in_batch, b["anchor_valid"], b["positive_valid"])
            else:
                sims, keep = contrastive_similarities(aggregator(b["anchor"], b["anchor_valid"]),
                                                      aggregator(b["positive"], b["positive_valid"]), bank,
                                                      b["clips"], in_batch=self.in_batch)
            total += float(self.criterion(sims, keep))
        return total / batches

    def _frame_loss(self, model: AggregatorWithBank, batch: dict[str, Tensor], valid) -> dict[str, Tensor]:
        """The frame-level objective: the loss on Chamfer similarities of refined frames (frame keys in the bank)."""
        query = at_least_float32(model.frame_embeddings(batch["anchor"], valid("anchor")))
        with torch.no_grad():
            key = at_least_float32(model.key_frames(batch["positive"], valid("positive")))
            negatives = (at_least_float32(model.key_frames(batch["distractors"], valid("distractors")))
                         if model.bank is not None else None)
        sims, keep = frame_contrastive_similarities(query, key, model.bank, batch["clips"], self.in_batch,
                                                    valid("anchor"), valid("positive"))
        loss = self.criterion(sims, keep)
        if negatives is not None:
            enqueue_all_ranks(model.bank, negatives, batch["distractor_ids"],
                              batch["distractors_valid"])
        return {"loss": loss, "s_pos": sims[:, 0].mean().detach()}

    def scores(self, model: AggregatorWithBank | TemporalContextAggregator) -> dict[str, Tensor]:
        """Query × database scores ``[Q, M]`` of TCA_c, TCA_f and TCA_sym (on the CPU).

        TCA_f and TCA_sym only for aggregators with frame outputs (not NetVLAD). ``"c"`` is the dot product of the unit
        video descriptors (TCA Eq. 10), ``"f"`` and ``"sym"`` the Chamfer and symmetric Chamfer of the frame
        embeddings (Eq. 8 and 9).

        Examples:
            >>> task = TCATask("smoke")
            >>> _ = torch.manual_seed(0)
            >>> model = task.build_model().eval()
            >>> scores = task.scores(model)
            >>> {name: tuple(s.shape) for name, s in scores.items()}
            {'c': (3, 21), 'f': (3, 21), 'sym': (3, 21)}
            >>> d = task.data
            >>> q = model.frame_embeddings(d.queries, d.query_valid)
            >>> b = model.frame_embeddings(d.database, d.database_valid)
            >>> torch.allclose(scores["f"], frame_scores(q, b, d.query_valid, d.database_valid, "chamfer"), atol=1e-6)
            True
        """
        d = self.data
        return self._scores_of(model, d.queries, d.query_valid, d.database, d.database_valid)

    def _scores_of(self, model: nn.Module, queries: Tensor, query_valid: Tensor, database: Tensor,
                   database_valid: Tensor) -> dict[str, Tensor]:
        device = next(model.parameters()).device
        q, qm, b, bm = queries.to(device), query_valid.to(device), database.to(device), database_valid.to(device)
        out = {"c": (at_least_float32(model(q, qm)) @ at_least_float32(model(b, bm)).T).cpu()}
        if hasattr(getattr(model, "aggregator", model), "frame_embeddings"):
            qf, bf = at_least_float32(model.frame_embeddings(q, qm)), at_least_float32(model.frame_embeddings(b, bm))
            out.update({"f": frame_scores(qf, bf, qm, bm, "chamfer").cpu(),
                        "sym": frame_scores(qf, bf, qm, bm, "symmetric_chamfer").cpu()})
        return out

    def control_scores(self, model: AggregatorWithBank | TemporalContextAggregator,
                       control: str) -> dict[str, Tensor]:
        """The scores of :meth:`scores` under a control that removes part of what the aggregator sees.

        ``"context_free"``: every frame goes through the aggregator alone (a one-frame video), so a refined frame
        holds nothing of the other frames; TCA_c is then the valid-only mean of those, L2-normalised.
        ``"shuffled"``: every database video's real frames in a random order (a fixed generator), the padding
        kept at the end. TCA's Transformer has no positional encoding, so it is permutation-equivariant and this
        control changes its scores only by rounding; an LSTM or GRU aggregator reads the order.

        Examples:
            >>> task = TCATask("smoke")
            >>> _ = torch.manual_seed(0)
            >>> model = task.build_model().eval()
            >>> base, shuffled = task.scores(model), task.control_scores(model, "shuffled")
            >>> torch.allclose(base["c"], shuffled["c"], atol=1e-5), torch.allclose(base["f"], shuffled["f"], atol=1e-5)
            (True, True)
            >>> alone = task.control_scores(model, "context_free")
            >>> torch.allclose(base["c"], alone["c"], atol=1e-3)
            False
        """
        d = self.data
        if control == "shuffled":
            g = torch.Generator().manual_seed(0)
            db, db_valid = d.database.clone(), d.database_valid.clone()
            for i in range(len(db)):
                n = int(d.database_valid[i].sum())
                db[i, :n] = d.database[i, :n][torch.randperm(n, generator=g)]
            return self._scores_of(model, d.queries, d.query_valid, db, db_valid)
        if control != "context_free":
            raise ValueError(f"control must be 'context_free' or 'shuffled', got {control!r}")
        device = next(model.parameters()).device
        aggregator = getattr(model, "aggregator", model)
        if not hasattr(aggregator, "frame_embeddings"):
            raise ValueError("the context-free control needs an aggregator with frame outputs (not NetVLAD)")

        def alone(x: Tensor, valid: Tensor) -> tuple[Tensor, Tensor]:
            frames = at_least_float32(aggregator.frame_embeddings(x.to(device).reshape(-1, 1, x.shape[-1])))
            frames = frames.reshape(x.shape).cpu() * valid.unsqueeze(-1)
            video = torch.nn.functional.normalize(frames.sum(1) / valid.sum(1, keepdim=True).clamp(min=1), dim=-1)
            return frames, video

        (qf, qc), (bf, bc) = alone(d.queries, d.query_valid), alone(d.database, d.database_valid)
        return {"c": qc @ bc.T, "f": frame_scores(qf, bf, d.query_valid, d.database_valid, "chamfer"),
                "sym": frame_scores(qf, bf, d.query_valid, d.database_valid, "symmetric_chamfer")}

    def evaluate_controls(self, model: AggregatorWithBank | TemporalContextAggregator) -> dict[str, float]:
        """DSVR mAP of TCA_c and TCA_f under both controls of :meth:`control_scores`:
        ``mAP_context_free``, ``mAP_f_context_free``, ``mAP_shuffled``, ``mAP_f_shuffled``.

        Examples:
            >>> task = TCATask("smoke")
            >>> _ = torch.manual_seed(0)
            >>> sorted(task.evaluate_controls(task.build_model().eval()))
            ['mAP_context_free', 'mAP_f_context_free', 'mAP_f_shuffled', 'mAP_shuffled']
        """
        out: dict[str, float] = {}
        frames = hasattr(getattr(model, "aggregator", model), "frame_embeddings")
        for control in ("context_free", "shuffled"):
            if control == "context_free" and not frames:
                continue
            for name, scores in self.control_scores(model, control).items():
                if name == "sym":
                    continue
                suffix = "" if name == "c" else f"_{name}"
                out[f"mAP{suffix}_{control}"] = map_and_micro_ap(scores, self.data.relevance)["mAP"]
        return out

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        out: dict[str, float] = {}
        for name, scores in self.scores(model).items():
            metrics = map_and_micro_ap(scores, self.data.relevance)
            suffix = "" if name == "c" else f"_{name}"
            out.update({f"mAP{suffix}": metrics["mAP"], f"uAP{suffix}": metrics["uAP"]})
        return {**out, **self.mean_shares(model)}

    @torch.no_grad()
    def mean_shares(self, model: nn.Module) -> dict[str, float]:
        """The clip-mean diagnostic of an aggregator with frame outputs: how much of each clip's mean frame it
        subtracts. ``mean_share``: :func:`hapref.models.tca.mean_share_regression` on the benchmark's queries;
        ``mean_share_trace``: :func:`hapref.models.tca.clip_mean_share` (−trace(W_o W_v)/D), one-layer TCA only.
        ``{}`` for aggregators without frame outputs (NetVLAD).

        Examples:
            >>> task = TCATask("smoke")
            >>> hand_set = TemporalContextAggregator.mean_subtracting(32, 1.0, nhead=4).eval()
            >>> {name: round(v, 6) for name, v in task.mean_shares(hand_set).items()}
            {'mean_share': 1.0, 'mean_share_trace': 1.0}
        """
        aggregator = getattr(model, "aggregator", model)
        if not hasattr(aggregator, "frame_embeddings"):
            return {}
        device = next(model.parameters()).device
        d = self.data
        x, valid = d.queries.to(device), d.query_valid.to(device)
        out = {"mean_share": mean_share_regression(x, aggregator.frame_embeddings(x, valid), valid)}
        if isinstance(aggregator, TemporalContextAggregator) and len(aggregator.encoder.layers) == 1:
            out["mean_share_trace"] = clip_mean_share(aggregator)
        return out


def config_for(profile: str | TCAProfile, seed: int = 0, **overrides: Any) -> TrainConfig:
    """The :class:`TrainConfig` of ``profile`` (Adam-style with small weight decay, warm-up + cosine as TCA §4.1).

    Examples:
        >>> config_for("smoke").steps, config_for("smoke", steps=2).steps
        (10, 2)
    """
    p = resolve_profile(profile)[1]
    return replace(TrainConfig(steps=p.steps, lr=p.lr, weight_decay=p.weight_decay, warmup_steps=p.warmup_steps,
                               eval_every=p.eval_every, seed=seed, grad_clip=p.grad_clip), **overrides)


def build(profile: str, loss: str, seed: int, progress: bool = True,
          overrides: dict[str, str] | None = None) -> tuple[TCATask, TrainConfig]:
    """The TCA task and training config for ``python -m hapref.train tca``; ``overrides`` (``--set``) may change
    any field of the profile, of :class:`Variant` or of the :class:`TrainConfig`.

    Examples:
        >>> task, config = build("smoke", "circle", seed=0, progress=False, overrides={"grad_clip": "1.0"})
        >>> type(task).__name__, task.variant.loss, config.grad_clip
        ('TCATask', 'circle', 1.0)
    """
    p = resolve_profile(profile)[1]
    config, p, variant = override_all([config_for(p, seed), p, Variant(loss=loss)], overrides or {})
    return TCATask(p, variant, seed, progress=progress), config


def summary_line(metrics: dict[str, float]) -> str:
    """The last line the CLI prints: TCA_f and TCA_sym first, the TCA_c headline last.

    Examples:
        >>> print(summary_line({"mAP": 0.5, "uAP": 0.25, "mAP_f": 0.4, "uAP_f": 0.2}))
        mAP_f=0.4000 uAP_f=0.2000
        eval: mAP=0.5000 uAP=0.2500
    """
    extra = " ".join(f"{k}={metrics[k]:.4f}" for k in ("mAP_f", "uAP_f", "mAP_sym", "uAP_sym") if k in metrics)
    return f"{extra}\neval: mAP={metrics['mAP']:.4f} uAP={metrics['uAP']:.4f}"
