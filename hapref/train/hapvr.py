"""The HAP-VR training pipeline (HAP-VR §3.4 Algorithm 1, §4.1) on the book's copy-detection benchmark.

Self-supervised: every unlabeled training clip gives a weak view and several strong views (temporal and
spatial edits from :mod:`hapref.data.transforms`); a batch holds the weak and one strong view of B clips,
so the N = 2B videos have S2VS labels (diagonal and weak_i <-> strong_i relevant). The backbone is frozen,
so the student's region features (L3-iMAC, PCA-whitened on the training split) and the teacher's frame
embeddings of every view are computed once per profile and cached; training then only runs the region
attention, ψ and the losses of Eq. 15. Evaluation: DSVR mAP and μAP of query × database similarities.
"""

from __future__ import annotations

import math
import sys
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from typing import Any

import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from hapref.data.benchmark import build_copy_benchmark
from hapref.data.cache import config_key, data_root, source_digest
from hapref.files import atomic_torch_save
from hapref.data.transforms import TRANSFORMS
from hapref.features import PCAWhitening, load_backbone, pool_layers
from hapref.features import backbones as backbones_module, pooling as pooling_module
from hapref.losses import HAPVRObjective, teacher_frame_similarity
from hapref.metrics import mean_average_precision, micro_average_precision
from hapref.models.hapvr import VIDEO_LOSSES, build_hapvr_network, frame_ranking_loss, video_ranking_loss
from hapref.similarity.network import VideoSimilarityNetwork, pad_videos
from hapref.train.loop import TrainConfig
from hapref.utils import get_device

LOSSES: tuple[str, ...] = VIDEO_LOSSES
DATA_VERSION = 1
DATA_FIELDS = ("benchmark", "train_clips", "frames", "stride", "strong_views", "whiten_dim")

WEAK_EDITS = ("crop_resize", "hflip")
STRONG_TEMPORAL = ("speed_change", "reverse", "pause", "frame_drop", "temporal_crop")
STRONG_SPATIAL = ("crop_resize", "hflip", "color_change", "blur", "text_overlay", "logo_overlay")


@dataclass(frozen=True)
class HAPVRProfile:
    """Sizes of one run: data, views, batch and schedule."""

    benchmark: str          # hapref.data benchmark profile
    train_clips: int        # unlabeled clips used (the first ones of the split)
    frames: int             # frames per training view (every ``stride``-th frame of a clip)
    stride: int
    strong_views: int       # precomputed strong views per clip (view 0 is the weak one)
    whiten_dim: int
    batch_videos: int       # B clips per batch -> N = 2B videos
    steps: int
    lr: float
    warmup_steps: int
    eval_every: int = 0


PROFILES: dict[str, HAPVRProfile] = {
    "smoke": HAPVRProfile("smoke", train_clips=8, frames=8, stride=1, strong_views=1, whiten_dim=32,
                          batch_videos=4, steps=10, lr=1e-3, warmup_steps=2),
    "quick": HAPVRProfile("quick", train_clips=32, frames=16, stride=1, strong_views=2, whiten_dim=128,
                          batch_videos=4, steps=30, lr=1e-3, warmup_steps=3),
    "full": HAPVRProfile("full", train_clips=2048, frames=32, stride=2, strong_views=4, whiten_dim=512,
                         batch_videos=32, steps=5000, lr=4e-5, warmup_steps=250, eval_every=500),
}


@dataclass(frozen=True)
class Variant:
    """What an ablation changes (HAP-VR Tables 2–4): the video loss, the frame-level term, the temporal rate."""

    video_loss: str = "quadlinear_ap"
    frame_ap: bool = True
    temporal_k: float = 0.5     # 16-frame clips leave 4 columns after ψ: 0.5 keeps the top 2 (0.03 would be Chamfer)
    weights: str = "released"

    def __post_init__(self) -> None:
        if self.video_loss not in VIDEO_LOSSES:
            raise ValueError(f"video_loss must be one of {VIDEO_LOSSES}, got {self.video_loss!r}")
        if not 0.0 <= self.temporal_k <= 1.0:
            raise ValueError(f"temporal_k must be a rate in [0, 1], got {self.temporal_k}")


@dataclass
class HAPVRData:
    """Precomputed tensors of one profile (all on CPU)."""

    train: Tensor            # [C, V, T, R, D] whitened student regions of every view
    teacher: Tensor          # [C, V, T, D'] teacher frame embeddings of the same views
    queries: Tensor          # [Q, Tq, R, D]
    query_valid: Tensor       # [Q, Tq]
    database: Tensor         # [M, Tm, R, D]
    database_valid: Tensor    # [M, Tm]
    relevance: Tensor        # [Q, M] bool (DSVR: near-duplicates and partial copies)


def _fit_length(frames: Tensor, length: int, generator: torch.Generator) -> Tensor:
    """A window of exactly ``length`` frames: a random window if longer, tiled if shorter (HAP-VR's loader)."""
    if frames.shape[0] < length:
        frames = frames.repeat(math.ceil(length / frames.shape[0]), 1, 1, 1)
    start = int(torch.randint(0, frames.shape[0] - length + 1, (), generator=generator))
    return frames[start:start + length]


def make_views(clip: Tensor, count: int, length: int, generator: torch.Generator) -> list[Tensor]:
    """One weak view (crop + flip) and ``count`` strong views (one temporal + two spatial edits), ``length`` frames each.

    The S2VS weak/strong views HAP-VR trains on (the released S2VS code, https://github.com/gkordo/s2vs).
    """
    def edit(frames: Tensor, names: list[str]) -> Tensor:
        for name in names:
            frames, _ = TRANSFORMS[name](frames, generator)
        return _fit_length(frames, length, generator)

    def pick(pool: tuple[str, ...], k: int) -> list[str]:
        return [pool[i] for i in torch.randperm(len(pool), generator=generator)[:k].tolist()]

    views = [edit(clip, list(WEAK_EDITS))]
    views += [edit(clip, pick(STRONG_TEMPORAL, 1) + pick(STRONG_SPATIAL, 2)) for _ in range(count)]
    return views


@lru_cache(maxsize=4)
def prepare_data(profile: str, progress: bool = False) -> HAPVRData:
    """Features of the training views and of the benchmark for ``profile``, cached on disk and in memory."""
    p = PROFILES[profile]
    bench = build_copy_benchmark(p.benchmark)
    data_fields = {k: v for k, v in asdict(p).items() if k in DATA_FIELDS}
    code = source_digest(backbones_module, pooling_module, sys.modules[__name__])  # the views and the features they give
    key = config_key({"hapvr": DATA_VERSION, "data": data_fields, "benchmark": bench.fingerprint()[:16],
                      "code": code})
    path = data_root() / "hapvr" / f"features-{profile}-{key}.pt"
    if path.is_file():
        try:
            return HAPVRData(**torch.load(path, weights_only=True))
        except (RuntimeError, EOFError, KeyError, TypeError):
            path.unlink(missing_ok=True)
    backbone = load_backbone("efficientnet-lite0", image_size=bench.config.frame_size).to(get_device())

    def encode(frames: Tensor) -> tuple[Tensor, Tensor]:
        """Student regions [T, R, D] and teacher embeddings [T, C] on the CPU, from one backbone pass."""
        with torch.no_grad():
            maps = backbone(frames)
        return pool_layers(maps, "l3imac").cpu(), maps[-1].mean(dim=(-2, -1)).cpu()

    g = torch.Generator().manual_seed(0)
    regions, teacher = [], []
    n_clips = min(p.train_clips, len(bench.train))
    for c in tqdm(range(n_clips), disable=not progress, desc="training views"):
        clip = bench.train[c][::p.stride]
        views = torch.stack(make_views(clip, p.strong_views, p.frames, g))          # [V, T, H, W, 3]
        r, t = encode(views.flatten(0, 1))
        regions.append(r.view(*views.shape[:2], *r.shape[1:]))
        teacher.append(t.view(*views.shape[:2], -1))
    train = torch.stack(regions)
    whitening = PCAWhitening.fit(train, dim=min(p.whiten_dim, train.shape[-1]))

    def eval_features(videos: list[Tensor]) -> tuple[Tensor, Tensor]:
        feats = [whitening(encode(v[::p.stride])[0]) for v in tqdm(videos, disable=not progress, desc="eval videos")]
        return pad_videos(feats)

    queries, query_valid = eval_features(bench.queries.videos)
    database, database_valid = eval_features(bench.database.videos)
    data = HAPVRData(train=whitening(train), teacher=torch.stack(teacher), queries=queries, query_valid=query_valid,
                     database=database, database_valid=database_valid, relevance=bench.relevance("DSVR"))
    atomic_torch_save(asdict(data), path)
    return data


def batch_relevance(clips: int) -> Tensor:
    """S2VS labels of [weak views; strong views] of ``clips`` clips: diagonal and weak_i <-> strong_i (the released S2VS code, https://github.com/gkordo/s2vs)."""
    stacked = torch.cat([torch.eye(clips), torch.eye(clips)])
    return (stacked @ stacked.T) > 0


def evaluate_scores(scores: Tensor, relevance: Tensor) -> dict[str, float]:
    """DSVR mAP (retrieval) and μAP (detection) of query × database scores (HAP-VR §4.1)."""
    return {"mAP": float(mean_average_precision(scores, relevance)),
            "uAP": float(micro_average_precision(scores, relevance))}


class HAPVRTask:
    """A :class:`hapref.train.Task` for HAP-VR: batches of view pairs, the Eq. 15 loss, DSVR evaluation."""

    def __init__(self, profile: str = "quick", variant: Variant = Variant(), seed: int = 0,
                 progress: bool = False) -> None:
        if profile not in PROFILES:
            raise ValueError(f"profile must be one of {sorted(PROFILES)}, got {profile!r}")
        self.profile, self.variant, self.seed = PROFILES[profile], variant, seed
        self.data = prepare_data(profile, progress)
        self.objective = HAPVRObjective(video_ranking_loss(variant.video_loss),
                                        frame_ranking_loss() if variant.frame_ap else None, variant.weights)

    def build_model(self) -> VideoSimilarityNetwork:
        return build_hapvr_network(self.data.train.shape[-1], temporal_k=self.variant.temporal_k)

    def batch(self, step: int, device: torch.device) -> dict[str, Tensor]:
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + step)
        n_clips, n_views = self.data.train.shape[:2]
        clips = torch.randperm(n_clips, generator=g)[:self.profile.batch_videos]
        strong = torch.randint(1, n_views, (len(clips),), generator=g)
        weak = torch.zeros_like(strong)
        pick = lambda x: torch.cat([x[clips, weak], x[clips, strong]]).to(device)  # noqa: E731
        return {"features": pick(self.data.train), "teacher": pick(self.data.teacher),
                "relevance": batch_relevance(len(clips)).to(device)}

    def loss(self, model: nn.Module, batch: dict[str, Tensor]) -> dict[str, Tensor]:
        video_sim, frame_sims, reg = model(batch["features"])
        teacher = teacher_frame_similarity(batch["teacher"]) if self.variant.frame_ap else None
        return self.objective(video_sim.float(), batch["relevance"], reg.float(), frame_sims.float(), teacher)

    def scores(self, model: VideoSimilarityNetwork) -> Tensor:
        """Query × database similarities ``[Q, M]`` on the model's device."""
        device = next(model.parameters()).device
        d = self.data
        return model.score(d.queries.to(device), d.database.to(device), d.query_valid.to(device),
                           d.database_valid.to(device))

    def evaluate(self, model: nn.Module) -> dict[str, float]:
        return evaluate_scores(self.scores(model).float().cpu(), self.data.relevance)


def untrained_scores(profile: str, measure: str = "chamfer", k: float = 0.0) -> Tensor:
    """Training-free scores on the same features: two-level (TopK-)Chamfer without ψ (the chapter 3 baseline).

    HAP-VR Eq. 3 and Eq. 5 without ψ.
    """
    d = prepare_data(profile)
    net = VideoSimilarityNetwork(spatial_k=0.1, temporal_k=1.0 if measure == "mean" else k, comparator=False)
    with torch.no_grad():
        return net.score(d.queries, d.database, d.query_valid, d.database_valid)


def config_for(profile: str, seed: int = 0, **overrides: Any) -> TrainConfig:
    """The :class:`TrainConfig` of ``profile`` (AdamW, warm-up + cosine, wd 0.01 as HAP-VR §4.1)."""
    p = PROFILES[profile]
    return replace(TrainConfig(steps=p.steps, lr=p.lr, weight_decay=1e-2, warmup_steps=p.warmup_steps,
                               eval_every=p.eval_every, seed=seed, grad_clip=10.0), **overrides)


def build(profile: str, loss: str, seed: int, progress: bool = True) -> tuple[HAPVRTask, TrainConfig]:
    """The HAP-VR task and training config for ``python -m hapref.train hapvr``."""
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {sorted(PROFILES)}, got {profile!r}")
    return HAPVRTask(profile, Variant(video_loss=loss), seed, progress=progress), config_for(profile, seed)


def summary_line(metrics: dict[str, float]) -> str:
    """The last line the CLI prints."""
    return f"eval: mAP={metrics['mAP']:.4f} uAP={metrics['uAP']:.4f}"
