"""A frame-descriptor copy benchmark in which a trained encoder has something to learn (chapter 6).

The pixel benchmark (:mod:`hapref.data.benchmark`) renders videos and edits them; its descriptors come from a
frozen backbone. With a few hundred training clips and three fixed views each, a trained aggregator memorises
its clips there (chapter 6 reports it). This generator draws the *descriptors* themselves from a stated model,
so that the training data can be as large as the mechanism needs and the mechanism is known:

* **Content.** A video is ``shots`` shots of ``frames_per_shot`` frames; a shot is a random direction plus a
  small per-frame drift. ``stock_shots`` of the shots come from a pool of ``stock_pool`` stock shots (intros,
  logos) shared by unrelated videos, so a frame alone does not say which video it is from.
* **Edits.** Every view of a video (a copy, a training view) is a window of ``view_frames`` consecutive frames
  whose descriptors an edit has moved inside a fixed ``edit_rank``-dimensional subspace: part of the move is
  the same for the whole view (a crop, a logo, a colour grade), part changes from frame to frame (flicker,
  compression). Original content uses that subspace only weakly (``content_in_edits`` of its per-direction
  energy), and the edits fill it up to the same energy as the content elsewhere, so the descriptors of all
  views together have (nearly) the same variance in every direction: PCA whitening cannot single the edit
  subspace out, and cosine or Chamfer on the descriptors count the edit as evidence. Pairs of views of one
  clip reveal it: the directions in which two views of the same clip differ. That is what contrastive
  training on copy pairs can learn and a training-free similarity cannot (PCA against a discriminant).
* **Split.** Unlabeled training clips (``views`` views each), distractor clips (one view each, for a memory
  bank) and the evaluation set — ``queries`` edited videos, ``copies_per_query`` other views of each, and
  ``distractors`` unrelated videos — are disjoint draws; only the stock pool and the edit subspace (the design)
  are shared. ``seed`` draws another instance of the same design.
* **Channel overlays** (``overlay`` > 0; the ``"context"`` profile, where context is the signal). Every view is
  an upload by a *channel* whose overlay (a logo, a border, a colour grade: one vector per channel, in a random
  direction) is added, with norm ``overlay``, to each of its frames with probability ``overlay_frames``. The
  training split draws its channels from a pool of ``channels``; every evaluation query and copy is uploaded by a
  channel of its own, never seen in training, and the ``distractors`` are uploads by the queries' channels
  (distractor ``j`` by query ``j mod queries``'s). A frame alone is then ambiguous: an overlaid query frame is
  closer to an unrelated frame of its own channel than to the same content under another channel's overlay, and
  since the overlay's direction is new at test time, no per-frame map (linear or not) can take it out. The
  clip can: the overlay is what most of a view's frames share, which a frame can read off its neighbours (the
  set, not their order).

Everything is drawn in float64 from one ``torch.Generator`` (the same numbers on every CPU), then cast.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
from torch import Tensor


@dataclass(frozen=True)
class DescriptorBenchmarkConfig:
    """Sizes and strengths of the descriptor benchmark (see the module docstring for the model).

    Examples:
        >>> config = DescriptorBenchmarkConfig(dim=16, edit_rank=8, train_clips=4, distractor_clips=2, queries=2,
        ...                                    distractors=3)
        >>> config.frames, config.view_frames
        (16, 12)
        >>> DescriptorBenchmarkConfig(edit_rank=64)
        Traceback (most recent call last):
        ...
        ValueError: edit_rank must lie in [1, dim=64), got 64
    """

    dim: int = 64                # descriptor size D
    edit_rank: int = 48          # r: directions edits move frames along
    content_in_edits: float = 0.1   # content energy per edit direction, relative to the other directions
    view_share: float = 0.5      # share of an edit's energy that is the same for every frame of the view
    noise: float = 0.5           # isotropic per-frame noise (norm, relative to a shot's content)
    drift: float = 0.3           # per-frame drift within a shot (norm, relative to a shot's content)
    shots: int = 4
    frames_per_shot: int = 4
    view_frames: int = 12        # frames of a view: a window of consecutive frames
    stock_pool: int = 8          # shared stock shots (the design, same for training and evaluation)
    stock_shots: int = 2         # of each video's shots, drawn from the stock pool
    train_clips: int = 1024
    views: int = 4               # views per training clip
    distractor_clips: int = 512  # clips with one view each, fed to a memory bank
    queries: int = 50
    copies_per_query: int = 4
    distractors: int = 400
    seed: int = 0                # the instance: other videos, views and edit subspace from the same design
    overlay: float = 0.0         # norm of a channel's overlay (relative to a shot's content); 0 = no channels
    overlay_frames: float = 1.0  # probability that a frame of a view carries its channel's overlay
    channels: int = 1            # channels of the training split (evaluation channels are new)

    def __post_init__(self) -> None:
        if not 1 <= self.edit_rank < self.dim:
            raise ValueError(f"edit_rank must lie in [1, dim={self.dim}), got {self.edit_rank}")
        if not 0 <= self.content_in_edits <= 1 or not 0 <= self.view_share <= 1:
            raise ValueError(f"content_in_edits and view_share must lie in [0, 1], got {self.content_in_edits}, "
                             f"{self.view_share}")
        if self.overlay < 0 or not 0 < self.overlay_frames <= 1 or self.channels < 1:
            raise ValueError(f"overlay must be >= 0, overlay_frames in (0, 1] and channels >= 1, got "
                             f"{self.overlay}, {self.overlay_frames}, {self.channels}")
        if self.noise < 0 or self.drift < 0:
            raise ValueError(f"noise and drift must be >= 0, got {self.noise}, {self.drift}")
        if not 0 <= self.stock_shots <= self.shots or (self.stock_shots and self.stock_pool < 1):
            raise ValueError(f"stock_shots must lie in [0, shots={self.shots}] with stock_pool >= 1, got "
                             f"stock_shots={self.stock_shots}, stock_pool={self.stock_pool}")
        if not 1 <= self.view_frames <= self.frames:
            raise ValueError(f"view_frames must lie in [1, frames={self.frames}], got {self.view_frames}")
        counts = {k: getattr(self, k) for k in ("shots", "frames_per_shot", "train_clips", "distractor_clips",
                                                "queries", "copies_per_query", "distractors")}
        if min(counts.values()) < 1 or self.views < 2:
            raise ValueError(f"counts must be >= 1 and views >= 2, got {counts}, views={self.views}")

    @property
    def frames(self) -> int:
        """Frames of a whole video (``shots · frames_per_shot``).

        Examples:
            >>> DescriptorBenchmarkConfig(shots=3, frames_per_shot=5, view_frames=10).frames
            15
        """
        return self.shots * self.frames_per_shot


#: Named configurations: "smoke" for tests, "edits" for chapter 6, "context" (channel overlays, no edit
#: subspace: ``content_in_edits=1``) for chapter 6's benchmark where the clip's context is the signal.
PROFILES: dict[str, DescriptorBenchmarkConfig] = {
    "smoke": DescriptorBenchmarkConfig(dim=16, edit_rank=12, shots=2, frames_per_shot=4, view_frames=6,
                                       stock_pool=2, stock_shots=1, train_clips=16, views=3, distractor_clips=8,
                                       queries=4, copies_per_query=2, distractors=12),
    "edits": DescriptorBenchmarkConfig(),
    "context": DescriptorBenchmarkConfig(content_in_edits=1.0, overlay=1.5, overlay_frames=0.75, channels=1024),
    "context-smoke": DescriptorBenchmarkConfig(dim=16, edit_rank=12, content_in_edits=1.0, shots=2,
                                               frames_per_shot=4, view_frames=6, stock_pool=2, stock_shots=1,
                                               train_clips=16, views=3, distractor_clips=8, queries=4,
                                               copies_per_query=2, distractors=12, overlay=1.5,
                                               overlay_frames=0.75, channels=8),
}


@dataclass
class DescriptorBenchmark:
    """The drawn benchmark: unit-norm frame descriptors, all views ``view_frames`` long.

    ``train [C, V, T, D]`` views of the unlabeled clips; ``distractor_views [Cd, T, D]``; ``queries [Q, T, D]``;
    ``database [M, T, D]`` (the copies first, query by query, then the distractors); ``relevance [Q, M]`` bool;
    ``edit_basis [D, r]`` (orthonormal: the design's edit subspace, for analysis only). With channel overlays:
    ``query_channels [Q]`` and ``database_channels [M]`` (long; the evaluation's channel of every view, for
    analysis), else None.

    Examples:
        >>> bench = generate_descriptor_benchmark("smoke")
        >>> bench.train.shape, bench.queries.shape, bench.database.shape, bench.relevance.sum(1).tolist()
        (torch.Size([16, 3, 6, 16]), torch.Size([4, 6, 16]), torch.Size([20, 6, 16]), [2, 2, 2, 2])
    """

    config: DescriptorBenchmarkConfig
    train: Tensor
    distractor_views: Tensor
    queries: Tensor
    database: Tensor
    relevance: Tensor
    edit_basis: Tensor
    query_channels: Tensor | None = None
    database_channels: Tensor | None = None


def generate_descriptor_benchmark(config: str | DescriptorBenchmarkConfig = "edits", seed: int | None = None,
                                  dtype: torch.dtype = torch.float32) -> DescriptorBenchmark:
    """Draw the benchmark of ``config`` (a name of :data:`PROFILES` or a config); ``seed`` replaces its seed.

    Examples:
        Views of one clip agree outside the edit subspace and differ inside it:

        >>> bench = generate_descriptor_benchmark("edits", dtype=torch.float64)
        >>> inside = bench.edit_basis @ bench.edit_basis.T
        >>> a, b = bench.train[:, 0], bench.train[:, 1]              # two views of every clip
        >>> same = lambda x, y: torch.nn.functional.cosine_similarity(x, y, dim=-1).mean().item()
        >>> outside = lambda x: x - x @ inside
        >>> same(a @ inside, b @ inside) < 0.3 < same(outside(a), outside(b))
        True
    """
    if isinstance(config, str):
        if config not in PROFILES:
            raise ValueError(f"config must be one of {sorted(PROFILES)} or a DescriptorBenchmarkConfig, "
                             f"got {config!r}")
        config = PROFILES[config]
    if seed is not None:
        config = replace(config, seed=seed)
    c = config
    g = torch.Generator().manual_seed(1_000_003 * c.seed + 17)
    f64 = torch.float64

    def randn(*shape: int) -> Tensor:
        return torch.randn(*shape, generator=g, dtype=f64)

    basis = torch.linalg.qr(randn(c.dim, c.edit_rank))[0]                 # [D, r] orthonormal
    inside = basis @ basis.T                                              # projector onto the edit subspace
    # Per-direction energies: content 1 outside, content_in_edits inside; edits add the rest inside, so every
    # direction of an edited frame carries (1 + noise^2 / ...) the same energy.
    content_scale = torch.eye(c.dim, dtype=f64) - (1 - math.sqrt(c.content_in_edits)) * inside
    edit_energy = 1.0 - c.content_in_edits

    def shot_vectors(n: int) -> Tensor:                                   # [n, D], E|x|^2 ~ 1
        return randn(n, c.dim) @ content_scale / math.sqrt(c.dim)

    stock = shot_vectors(c.stock_pool) if c.stock_shots else None

    def videos(n: int) -> Tensor:                                         # [n, frames, D] originals
        shots = shot_vectors(n * c.shots).view(n, c.shots, c.dim)
        if c.stock_shots:
            slots = torch.rand(n, c.shots, generator=g, dtype=f64).argsort(dim=1)[:, :c.stock_shots]
            picks = torch.randint(0, c.stock_pool, (n, c.stock_shots), generator=g)
            shots[torch.arange(n)[:, None], slots] = stock[picks]
        frames = shots.repeat_interleave(c.frames_per_shot, dim=1)
        return frames + c.drift / math.sqrt(c.dim) * randn(n, c.frames, c.dim)

    def view(x: Tensor, overlays: Tensor | None = None) -> Tensor:       # [n, frames, D] -> [n, view_frames, D]
        n = x.shape[0]
        start = torch.randint(0, c.frames - c.view_frames + 1, (n,), generator=g)
        x = x[torch.arange(n)[:, None], start[:, None] + torch.arange(c.view_frames)]
        shared = randn(n, 1, c.dim).expand(-1, c.view_frames, -1)
        varying = randn(n, c.view_frames, c.dim)
        edit = (math.sqrt(c.view_share) * shared + math.sqrt(1 - c.view_share) * varying) @ inside
        edit = edit * math.sqrt(edit_energy / c.dim)
        noise = c.noise / math.sqrt(c.dim) * randn(n, c.view_frames, c.dim)
        if overlays is not None:                                          # [n, D] unit: the views' channels
            on = torch.rand(n, c.view_frames, 1, generator=g, dtype=f64) < c.overlay_frames
            noise = noise + c.overlay * on * overlays[:, None]
        return torch.nn.functional.normalize(x + edit + noise, dim=-1)

    def unit(n: int) -> Tensor:                                           # [n, D] random unit directions
        return torch.nn.functional.normalize(randn(n, c.dim), dim=-1)

    if c.overlay > 0:
        return _with_channels(c, videos, view, unit, g, basis, dtype)

    clips = videos(c.train_clips)
    train = torch.stack([view(clips) for _ in range(c.views)], dim=1)
    distractor_views = view(videos(c.distractor_clips))
    originals = videos(c.queries)
    queries = view(originals)
    copies = torch.stack([view(originals) for _ in range(c.copies_per_query)], dim=1).flatten(0, 1)
    database = torch.cat([copies, view(videos(c.distractors))])
    relevance = torch.zeros(c.queries, len(database), dtype=torch.bool)
    relevance[:, :len(copies)] = torch.eye(c.queries, dtype=torch.bool).repeat_interleave(c.copies_per_query, 1)
    return DescriptorBenchmark(c, train.to(dtype), distractor_views.to(dtype), queries.to(dtype),
                               database.to(dtype), relevance, basis.to(dtype))


def _with_channels(c: DescriptorBenchmarkConfig, videos, view, unit, g: torch.Generator, basis: Tensor,
                   dtype: torch.dtype) -> DescriptorBenchmark:
    """The split of :func:`generate_descriptor_benchmark` with channel overlays (see the module docstring)."""
    pool = unit(c.channels)                                               # the training split's channels

    def drawn(n: int) -> Tensor:
        return pool[torch.randint(0, c.channels, (n,), generator=g)]

    clips = videos(c.train_clips)
    train = torch.stack([view(clips, drawn(c.train_clips)) for _ in range(c.views)], dim=1)
    distractor_views = view(videos(c.distractor_clips), drawn(c.distractor_clips))
    originals = videos(c.queries)
    channels = unit(c.queries + c.queries * c.copies_per_query)          # new: one per query and per copy
    queries = view(originals, channels[:c.queries])
    copy_channels = channels[c.queries:].view(c.queries, c.copies_per_query, c.dim)
    copies = torch.stack([view(originals, copy_channels[:, k]) for k in range(c.copies_per_query)], dim=1)
    owner = torch.arange(c.distractors) % c.queries                       # distractor j: query j mod Q's channel
    database = torch.cat([copies.flatten(0, 1), view(videos(c.distractors), channels[owner])])
    n_copies = c.queries * c.copies_per_query
    relevance = torch.zeros(c.queries, len(database), dtype=torch.bool)
    relevance[:, :n_copies] = torch.eye(c.queries, dtype=torch.bool).repeat_interleave(c.copies_per_query, 1)
    query_channels = torch.arange(c.queries)
    database_channels = torch.cat([c.queries + torch.arange(n_copies), owner])
    return DescriptorBenchmark(c, train.to(dtype), distractor_views.to(dtype), queries.to(dtype), database.to(dtype),
                               relevance, basis.to(dtype), query_channels, database_channels)
