"""Bottom-up video similarity: regions -> frames (spatial TopK-Chamfer) -> ψ -> video (temporal TopK-Chamfer).

HAP-VR §3.3.1, Eq. 3–5 (after ViSiL). Videos are padded tensors ``[N, T, R, D]`` with valid-frame flags
``[N, T]`` (True = real frame); frame-level descriptors have ``R = 1``. :func:`frame_to_frame`,
:func:`video_similarity_matrix` and :meth:`VideoSimilarityNetwork.score` also take a single video
``[T, R, D]`` (or ``[T, D]``) with flags ``[T]`` and drop its axis from the result; the training
``forward`` and :meth:`VideoSimilarityNetwork.index` take batches (``[N, T, D]`` there is one region per frame).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from hapref.similarity.chamfer import pair_valid, reduce_topk_chamfer
from hapref.similarity.comparator import VideoComparator, similarity_regularization, squash
from hapref.validation import check_flags, check_float_tensor, check_rate, renamed_keywords

MEASURES = ("cosine", "mean", "chamfer", "symmetric_chamfer", "topk_chamfer")


def pad_videos(videos: list[Tensor]) -> tuple[Tensor, Tensor]:
    """Stack videos ``[T_i, ...]`` into zero-padded ``[N, T_max, ...]`` plus a valid-frame flag ``[N, T_max]`` (True = real).

    The valid flags feed the valid-only TopK-Chamfer of HAP-VR Eq. 3/5 so padding never changes a score.

    Examples:
        >>> padded, valid = pad_videos([torch.ones(2, 4, 8), torch.ones(3, 4, 8)])
        >>> padded.shape, valid
        (torch.Size([2, 3, 4, 8]), tensor([[ True,  True, False],
                [ True,  True,  True]]))
    """
    if len(videos) == 0:
        raise ValueError("videos must hold at least one video")
    lengths = torch.tensor([v.shape[0] for v in videos])
    padded = torch.nn.utils.rnn.pad_sequence(list(videos), batch_first=True)
    valid = torch.arange(padded.shape[1]) < lengths.unsqueeze(1)
    return padded, valid.to(padded.device)


def _as_regions(x: Tensor, name: str) -> Tensor:
    check_float_tensor(x, name, ndim=(3, 4))
    return x.unsqueeze(2) if x.ndim == 3 else x


def _check_sizes(x: Tensor, name: str, batch: bool) -> None:
    """At least one frame, region and feature per video (an empty batch, N = 0, is allowed)."""
    sizes = x.shape[1:] if batch else x.shape
    if any(s == 0 for s in sizes):
        form = "[N, T, R, D]" if batch else "[T, R, D] (or [T, D])"
        raise ValueError(f"{name} must hold at least one frame, region and feature per video ({form} with "
                         f"T, R, D >= 1), got shape {tuple(x.shape)}")


def _as_batch(x: Tensor, valid: Tensor | None, name: str,
              valid_name: str | None = None) -> tuple[Tensor, Tensor | None, bool]:
    """A batch ``[N, T, R, D]`` as is, or one video ``[T, R, D]`` / ``[T, D]`` as a batch of one (flag True).

    ``valid`` must be 0/1 or bool flags ``[N, T]`` (``[T]`` for one video); returned as bool.
    """
    x = check_float_tensor(x, name, ndim=None)
    valid_name = f"{valid_name} (the valid flags of {name})" if valid_name else f"the valid flags of {name}"
    if x.ndim not in (2, 3, 4):
        raise ValueError(f"{name} must be one video [T, R, D] (or [T, D]) or a batch of videos [N, T, R, D], "
                         f"got shape {tuple(x.shape)}")
    _check_sizes(x, name, batch=x.ndim == 4)
    if x.ndim == 4:
        if valid is not None:
            valid = check_flags(valid, valid_name, shape=x.shape[:2], meaning="True = a real frame, [N, T]")
        return x, valid, False
    if valid is not None:
        valid = check_flags(valid, valid_name, shape=x.shape[:1], meaning="True = a real frame, [T] for one video")
        valid = valid[None]
    return (x[None, :, None] if x.ndim == 2 else x[None]), valid, True


def _unbatch(out: Tensor, x_single: bool, y_single: bool, y_dim: int) -> Tensor:
    """Drop the batch axes of single videos: axis 0 for x, axis ``y_dim`` for y."""
    if y_single:
        out = out.select(y_dim, 0)
    return out.select(0, 0) if x_single else out


@renamed_keywords(x_mask="x_valid", y_mask="y_valid")
def frame_to_frame(x: Tensor, y: Tensor, spatial_k: float = 0.0, x_valid: Tensor | None = None,
                   y_valid: Tensor | None = None) -> Tensor:
    """All-pairs frame-to-frame similarities ``[Nx, Ny, Tx, Ty]`` by spatial TopK-Chamfer (HAP-VR Eq. 3).

    ``x [Nx, Tx, R, D]`` and ``y [Ny, Ty, R', D]`` hold L2-normalised float region descriptors
    (frame-level descriptors: ``R = 1``); region-to-region dot products are reduced with TopK-Chamfer
    over the target regions and averaged over the query regions. Pairs involving a padded frame
    (``x_valid [Nx, Tx]`` / ``y_valid [Ny, Ty]`` False) are 0. A single video ``[T, R, D]`` (or ``[T, D]``,
    with valid flags ``[T]``) drops its batch axis from the result: two videos give ``[Tx, Ty]``.

    Examples:
        >>> x = torch.nn.functional.normalize(torch.randn(5, 4, 8), dim=-1)  # one video: 5 frames, 4 regions
        >>> y = torch.nn.functional.normalize(torch.randn(3, 6, 4, 8), dim=-1)  # a batch of three videos
        >>> frame_to_frame(x, y).shape, frame_to_frame(x, y[0]).shape
        (torch.Size([3, 5, 6]), torch.Size([5, 6]))
        >>> bool(frame_to_frame(x, x).diagonal().allclose(torch.ones(5)))  # every frame matches itself
        True
    """
    spatial_k = check_rate(spatial_k, "spatial_k")
    x, x_valid, x_single = _as_batch(x, x_valid, "x", "x_valid")
    y, y_valid, y_single = _as_batch(y, y_valid, "y", "y_valid")
    if x.shape[-1] != y.shape[-1]:
        raise ValueError(f"x and y must share the descriptor size D, got {x.shape[-1]} and {y.shape[-1]}")
    return _unbatch(_frame_to_frame(x, y, spatial_k, x_valid, y_valid), x_single, y_single, -3)


def _frame_to_frame(x: Tensor, y: Tensor, spatial_k: float, x_valid: Tensor | None, y_valid: Tensor | None) -> Tensor:
    """:func:`frame_to_frame` on already checked 4-D inputs (no NaN scans in the hot path)."""
    (nx, tx, rx, d), (ny, ty, ry, _) = x.shape, y.shape
    regions = (x.reshape(-1, d) @ y.reshape(-1, d).T).view(nx, tx, rx, ny, ty, ry).permute(0, 3, 1, 4, 2, 5)
    f2f = reduce_topk_chamfer(regions, spatial_k)
    valid = pair_valid(None if x_valid is None else x_valid[:, None, :],
                     None if y_valid is None else y_valid[None, :, :])
    return f2f if valid is None else f2f.masked_fill(~valid, 0.0)


@renamed_keywords(query_mask="query_valid", database_mask="database_valid")
def video_similarity_matrix(queries: Tensor, database: Tensor, query_valid: Tensor | None = None,
                            database_valid: Tensor | None = None, measure: str = "chamfer", k: float = 0.1,
                            spatial_k: float = 0.0, chunk_size: int = 256) -> Tensor:
    """Training-free query × database scores ``[Q, B]`` from region or frame descriptors.

    ``measure``: ``"cosine"`` (cosine of mean-pooled descriptors, TCA Eq. 10 normalised),
    ``"mean"``, ``"chamfer"`` (TCA Eq. 8), ``"symmetric_chamfer"`` (TCA Eq. 9) or ``"topk_chamfer"``
    (HAP-VR Eq. 5 with rate ``k``) on the frame-to-frame matrix of :func:`frame_to_frame`.
    At most ``chunk_size`` (query, database) pairs are materialised at a time. ``queries [Q, T, R, D]``
    and ``database [B, T', R, D]`` with valid flags ``[Q, T]`` / ``[B, T']``; a single video ``[T, R, D]``
    drops its axis from the result (``[B]``, ``[Q]`` or a 0-d score).

    Examples:
        >>> videos = torch.nn.functional.normalize(torch.randn(3, 6, 4, 8), dim=-1)
        >>> scores = video_similarity_matrix(videos, videos, measure="chamfer")
        >>> scores.shape, bool(scores.diagonal().allclose(torch.ones(3)))
        (torch.Size([3, 3]), True)
        >>> video_similarity_matrix(videos[0], videos).shape  # one query video
        torch.Size([3])
    """
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {MEASURES}, got {measure!r}")
    k, spatial_k = check_rate(k, "k"), check_rate(spatial_k, "spatial_k")
    queries, query_valid, q_single = _as_batch(queries, query_valid, "queries", "query_valid")
    database, database_valid, d_single = _as_batch(database, database_valid, "database", "database_valid")
    return _unbatch(_video_similarity_matrix(queries, database, query_valid, database_valid, measure, k, spatial_k,
                                             chunk_size), q_single, d_single, -1)


def _video_similarity_matrix(queries: Tensor, database: Tensor, query_valid: Tensor | None,
                             database_valid: Tensor | None, measure: str, k: float, spatial_k: float,
                             chunk_size: int) -> Tensor:
    """:func:`video_similarity_matrix` on batches ``[N, T, R, D]``."""
    if measure == "cosine":
        qm = queries.mean(dim=2)
        dm = database.mean(dim=2)
        q = F.normalize(_frame_mean(qm, query_valid), dim=-1)
        b = F.normalize(_frame_mean(dm, database_valid), dim=-1)
        return q @ b.T

    if queries.shape[-1] != database.shape[-1]:
        raise ValueError(f"queries and database must share D, got {queries.shape[-1]} and {database.shape[-1]}")
    if not 0.0 <= k <= 1.0 or not 0.0 <= spatial_k <= 1.0:
        raise ValueError(f"k and spatial_k must be rates in [0, 1], got {k} and {spatial_k}")
    rate = {"chamfer": 0.0, "symmetric_chamfer": 0.0, "mean": 1.0, "topk_chamfer": k}[measure]

    def block(q: Tensor, b: Tensor, q_valid: Tensor | None, b_valid: Tensor | None) -> Tensor:
        f2f = _frame_to_frame(q, b, spatial_k, q_valid, b_valid)
        valid = pair_valid(None if q_valid is None else q_valid[:, None, :], None if b_valid is None else b_valid[None])
        if valid is not None:
            valid = valid.expand_as(f2f)
        sim = reduce_topk_chamfer(f2f, rate, valid)
        if measure == "symmetric_chamfer":
            valid_t = None if valid is None else valid.transpose(-1, -2)
            sim = 0.5 * (sim + reduce_topk_chamfer(f2f.transpose(-1, -2), rate, valid_t))
        return sim

    return _chunked(block, queries, database, query_valid, database_valid, chunk_size)


def _frame_mean(x: Tensor, valid: Tensor | None) -> Tensor:
    if valid is None:
        return x.mean(dim=1)
    w = valid.to(x.dtype).unsqueeze(-1)
    return (x * w).sum(dim=1) / w.sum(dim=1).clamp_min(1)


def _chunked(block, queries: Tensor, database: Tensor, query_valid: Tensor | None, database_valid: Tensor | None,
             chunk_size: int) -> Tensor:
    """Evaluate ``block`` on query/database blocks of at most ``chunk_size`` pairs; assemble ``[Q, B]``."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    n_q, n_b = queries.shape[0], database.shape[0]
    step_b = min(n_b, chunk_size)
    step_q = max(1, chunk_size // max(step_b, 1))
    rows = []
    for i in range(0, n_q, step_q):
        q_valid = None if query_valid is None else query_valid[i:i + step_q]
        rows.append(torch.cat([block(queries[i:i + step_q], database[j:j + step_b], q_valid,
                                     None if database_valid is None else database_valid[j:j + step_b])
                               for j in range(0, n_b, step_b)], dim=1))
    return torch.cat(rows, dim=0) if rows else queries.new_zeros(0, n_b)


class RegionAttention(nn.Module):
    """Region re-weighting ``x · sigmoid(uᵀ tanh(W x + b))`` applied before HAP-VR Eq. 3 (the released HAP-VR code, https://github.com/yafeng19/HAP-VR).

    Examples:
        >>> attention = RegionAttention(8)
        >>> x = torch.randn(2, 5, 4, 8)
        >>> bool(((attention(x) / x) - 0.5).abs().max() <= 0.5)  # each region scaled by a weight in (0, 1)
        True
    """

    def __init__(self, dims: int) -> None:
        super().__init__()
        self.proj = nn.Linear(dims, dims)
        self.context = nn.Linear(dims, 1, bias=False)
        nn.init.xavier_uniform_(self.proj.weight)
        nn.init.zeros_(self.proj.bias)
        nn.init.xavier_uniform_(self.context.weight)

    def forward(self, x: Tensor) -> Tensor:
        """Region descriptors ``[..., R, dims]`` (float) scaled by their attention weights, same shape.

        Examples:
            >>> RegionAttention(8)(torch.randn(2, 5, 4, 8)).shape
            torch.Size([2, 5, 4, 8])
        """
        return x * torch.sigmoid(self.context(torch.tanh(self.proj(x))))


class VideoSimilarityNetwork(nn.Module):
    """HAP-VR's similarity function f (§3.3.1): regions -> frames (Eq. 3) -> ψ (Eq. 4) -> video (Eq. 5).

    - ``forward(features [N, T, R, D], valid [N, T]) -> (video_sim [N, N], frame_sims [N, N, T, T], reg_loss)``
      for training: ``frame_sims`` are the spatial TopK-Chamfer matrices *before* ψ (the input of
      HAP-VR's frame-level AP loss), ``reg_loss`` the summed similarity regulariser on ψ's raw output.
    - ``score(queries, database, ...) -> [Q, B]`` for evaluation, chunked.

    ``spatial_k`` / ``temporal_k`` default to HAP-VR's released rates 0.1 / 0.03
    (the released HAP-VR code, https://github.com/yafeng19/HAP-VR). ``attention`` adds :class:`RegionAttention` (needs ``dims``);
    ``comparator=False`` skips ψ (plain two-level TopK-Chamfer, no parameters).
    ``chunk_size`` bounds how many video pairs' region tensors exist at once; under autograd each
    chunk is recomputed in backward (activation checkpointing) so training memory stays bounded too.

    ψ pools in floor mode like the released networks, so every video needs at least ``min_len`` = 4
    frames (4 for S2VS, 8 for HAP-VR's released loader; :func:`hapref.evaluation.similarities` tiles
    shorter videos as the released loaders do; in a padded batch a shorter video scores 0).
    Deviation: in ψ a pooled cell is valid only when all four cells under it are (the released code: when any
    is; :class:`hapref.similarity.comparator.VideoComparator`), which matters only for padded batches.
    ``signed_scores`` picks the range of :meth:`score`: False (default) maps ψ's output with
    ``hardtanh / 2 + 0.5`` into [0, 1], the training range of every loss here; True keeps
    ``hardtanh`` in [−1, 1] as the released evaluation does (``2·s − 1`` of the former: same ranking).
    :func:`hapref.models.load_released_network` sets it to True. ``forward`` always uses [0, 1].

    Examples:
        >>> import torch
        >>> net = VideoSimilarityNetwork(dims=8, attention=True)
        >>> videos = torch.nn.functional.normalize(torch.randn(3, 6, 4, 8), dim=-1)
        >>> sim, frame_sims, reg = net(videos)
        >>> tuple(sim.shape), tuple(frame_sims.shape), bool(((sim >= 0) & (sim <= 1)).all())
        ((3, 3), (3, 3, 6, 6), True)
        >>> net.signed_scores = True
        >>> torch.allclose(net.score(videos, videos), 2 * sim.detach() - 1, atol=1e-6)
        True
    """

    def __init__(self, dims: int | None = None, spatial_k: float = 0.1, temporal_k: float = 0.03,
                 attention: bool = False, comparator: bool = True, chunk_size: int = 256,
                 signed_scores: bool = False, min_len: int = 4, psi_init: str = "xavier") -> None:
        super().__init__()
        if attention and dims is None:
            raise ValueError("dims must be given when attention=True")
        if min_len < (4 if comparator else 1):
            raise ValueError(f"min_len must be >= 4 with ψ (it pools twice) and >= 1 without, got {min_len}")
        self.spatial_k, self.temporal_k, self.chunk_size = spatial_k, temporal_k, chunk_size
        self.signed_scores, self.min_len = signed_scores, min_len
        self.attention = RegionAttention(dims) if attention else None
        self.comparator = VideoComparator(psi_init) if comparator else None

    def index(self, features: Tensor) -> Tensor:
        """Region features ``[N, T, R, D]`` ready for comparison (attention applied when enabled).

        ``features`` float ``[N, T, R, D]``, or ``[N, T, D]`` frame descriptors (one region per frame: ``R = 1``).
        Index a database once and reuse it with :meth:`frame_similarity` for every query.

        Examples:
            >>> _ = torch.manual_seed(0)
            >>> net = VideoSimilarityNetwork(dims=8, attention=True)
            >>> videos = torch.nn.functional.normalize(torch.randn(3, 6, 4, 8), dim=-1)
            >>> indexed = net.index(videos)
            >>> indexed.shape, torch.equal(indexed, net.attention(videos))  # regions re-weighted
            (torch.Size([3, 6, 4, 8]), True)
            >>> VideoSimilarityNetwork().index(torch.randn(3, 6, 8)).shape  # frame descriptors, no attention
            torch.Size([3, 6, 1, 8])
        """
        features = _as_regions(features, "features")
        if self.attention is not None and features.shape[-1] != self.attention.proj.in_features:
            raise ValueError(f"features must have the descriptor size D = {self.attention.proj.in_features} of the "
                             f"region attention (dims), got shape {tuple(features.shape)}")
        return self.attention(features) if self.attention is not None else features

    @renamed_keywords(x_mask="x_valid", y_mask="y_valid")
    def frame_similarity(self, x: Tensor, y: Tensor, x_valid: Tensor | None = None,
                         y_valid: Tensor | None = None) -> Tensor:
        """Frame-to-frame matrices ``[Nx, Ny, Tx, Ty]`` of indexed videos (spatial TopK-Chamfer, Eq. 3).

        ``x [Nx, Tx, R, D]`` and ``y [Ny, Ty, R', D]`` come from :meth:`index`; ``x_valid [Nx, Tx]`` /
        ``y_valid [Ny, Ty]`` bool flags zero the pairs with a padded frame. Computed ``chunk_size`` video pairs at
        a time (checkpointed under autograd), with the values of :func:`frame_to_frame` at rate ``spatial_k``.

        Examples:
            >>> _ = torch.manual_seed(0)
            >>> net = VideoSimilarityNetwork(dims=8, attention=True, chunk_size=2)
            >>> x = net.index(torch.nn.functional.normalize(torch.randn(3, 6, 4, 8), dim=-1))
            >>> valid = torch.tensor([[True] * 6, [True] * 4 + [False] * 2, [True] * 6])
            >>> f2f = net.frame_similarity(x, x, valid, valid)
            >>> f2f.shape, torch.allclose(f2f, frame_to_frame(x, x, net.spatial_k, valid, valid))
            (torch.Size([3, 3, 6, 6]), True)
            >>> f2f[1, 0, 4:].abs().sum().item(), f2f[0, 1, :, 4:].abs().sum().item()  # padded frames of video 1
            (0.0, 0.0)
        """
        for name, v, flags in (("x", x, x_valid), ("y", y, y_valid)):
            check_float_tensor(v, name, ndim=4)
            if flags is not None:
                check_flags(flags, f"{name}_valid", shape=v.shape[:2], meaning="True = a real frame, [N, T]")
        if x.shape[-1] != y.shape[-1]:
            raise ValueError(f"x and y must share the descriptor size D, got {x.shape[-1]} and {y.shape[-1]}")
        x_valid = None if x_valid is None else check_flags(x_valid, "x_valid")
        y_valid = None if y_valid is None else check_flags(y_valid, "y_valid")
        step = max(1, self.chunk_size // max(y.shape[0], 1))
        blocks = []
        for i in range(0, x.shape[0], step):
            args = (x[i:i + step], y, self.spatial_k, None if x_valid is None else x_valid[i:i + step], y_valid)
            if torch.is_grad_enabled() and (x.requires_grad or y.requires_grad):
                blocks.append(checkpoint(_frame_to_frame, *args, use_reentrant=False))
            else:
                blocks.append(_frame_to_frame(*args))
        return torch.cat(blocks, dim=0)

    @renamed_keywords(mask="valid")
    def video_similarity(self, frame_sims: Tensor, valid: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """Video similarity ``[...]`` and regulariser from frame matrices ``[..., Tx, Ty]`` (Eq. 4–5).

        ``frame_sims`` float (e.g. from :meth:`frame_similarity`), ``valid`` bool broadcastable to it (False =
        a pair with a padded frame). ψ (Eq. 4) refines the matrices, then temporal TopK-Chamfer at rate
        ``temporal_k`` (Eq. 5) gives scores in [0, 1]; the regulariser (0-d) penalises ψ's raw output outside
        [−1, 1]. Without ψ (``comparator=False``) the regulariser is 0.

        Examples:
            >>> _ = torch.manual_seed(0)
            >>> net = VideoSimilarityNetwork(dims=8, attention=True)
            >>> videos = torch.nn.functional.normalize(torch.randn(3, 6, 4, 8), dim=-1)
            >>> x = net.index(videos)
            >>> sim, reg = net.video_similarity(net.frame_similarity(x, x))
            >>> sim.shape, reg.shape
            (torch.Size([3, 3]), torch.Size([]))
            >>> video_sim, _, train_reg = net(videos)  # the training forward is these three steps
            >>> torch.allclose(sim, video_sim), torch.allclose(reg, train_reg)
            (True, True)
            >>> plain = VideoSimilarityNetwork(comparator=False, temporal_k=0.0)  # no ψ, rate 0: Chamfer
            >>> frame_sims = torch.rand(2, 5, 7)
            >>> torch.allclose(plain.video_similarity(frame_sims)[0], frame_sims.amax(-1).mean(-1))
            True
        """
        check_float_tensor(frame_sims, "frame_sims", ndim=None)
        if frame_sims.ndim < 2:
            raise ValueError(f"frame_sims must have shape [..., Tx, Ty], got {tuple(frame_sims.shape)}")
        if valid is not None:
            valid = check_flags(valid, "valid", broadcast_to=frame_sims.shape,
                                meaning="True = a pair of real frames")
        return self._video_similarity(frame_sims, valid)

    def _video_similarity(self, frame_sims: Tensor, valid: Tensor | None,
                          signed: bool = False) -> tuple[Tensor, Tensor]:
        if valid is not None:
            valid = valid.expand_as(frame_sims)
        if self.comparator is None:
            return reduce_topk_chamfer(frame_sims, self.temporal_k, valid), frame_sims.new_zeros(())
        lead = frame_sims.shape[:-2]
        flat = frame_sims.reshape(-1, *frame_sims.shape[-2:])
        flat_valid = None if valid is None else valid.reshape(flat.shape)
        raw, out_valid = self.comparator(flat, flat_valid)
        sim = reduce_topk_chamfer(F.hardtanh(raw) if signed else squash(raw), self.temporal_k, out_valid)
        return sim.view(lead), similarity_regularization(raw, out_valid)

    @renamed_keywords(mask="valid")
    def forward(self, features: Tensor, valid: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """All-pairs scores of a training batch ``features [N, T, R, D]`` (float) with ``valid [N, T]`` bool.

        Returns ``(video_sim [N, N], frame_sims [N, N, T, T], reg)``: HAP-VR Eq. 5 video similarities,
        the Eq. 3 frame-to-frame matrices before ψ (the input of the frame-level AP loss) and the
        similarity regulariser (0-d).

        Examples:
            >>> net = VideoSimilarityNetwork()
            >>> video_sim, frame_sims, reg = net(torch.nn.functional.normalize(torch.randn(2, 8, 4, 16), dim=-1))
            >>> video_sim.shape, frame_sims.shape, reg.shape
            (torch.Size([2, 2]), torch.Size([2, 2, 8, 8]), torch.Size([]))
        """
        features = _as_regions(features, "features")
        if features.shape[0] == 0:
            raise ValueError(f"features must hold at least one video [N >= 1, T, R, D], got shape "
                             f"{tuple(features.shape)}")
        _check_sizes(features, "features", batch=True)
        if valid is not None:
            valid = check_flags(valid, "valid", shape=features.shape[:2], meaning="True = a real frame, [N, T]")
        x = self.index(features)
        frame_sims = self.frame_similarity(x, x, valid, valid)
        pairs = pair_valid(None if valid is None else valid[:, None, :], None if valid is None else valid[None])
        video_sim, reg = self._video_similarity(frame_sims, pairs)
        return video_sim, frame_sims, reg

    @renamed_keywords(query_mask="query_valid", database_mask="database_valid")
    def score(self, queries: Tensor, database: Tensor, query_valid: Tensor | None = None,
              database_valid: Tensor | None = None, chunk_size: int | None = None) -> Tensor:
        """Query × database video similarities ``[Q, B]`` of padded batches, at most ``chunk_size`` pairs at a time.

        Range [0, 1], or [−1, 1] with ``signed_scores``. For large databases of videos of mixed lengths
        prefer :func:`hapref.evaluation.similarities`, which never pads to the longest video.

        ``queries [Q, T, R, D]`` and ``database [B, T', R, D]`` float, valid flags ``[Q, T]`` / ``[B, T']``;
        a single video ``[T, R, D]`` (valid ``[T]``) drops its axis from the result.

        Examples:
            >>> net = VideoSimilarityNetwork().eval()
            >>> videos = torch.nn.functional.normalize(torch.randn(3, 8, 4, 16), dim=-1)
            >>> net.score(videos, videos).shape, net.score(videos[0], videos).shape
            (torch.Size([3, 3]), torch.Size([3]))
            >>> net.score(videos[0], videos[1]).shape  # two single videos: one score
            torch.Size([])
        """
        queries, query_valid, q_single = _as_batch(queries, query_valid, "queries", "query_valid")
        database, database_valid, d_single = _as_batch(database, database_valid, "database", "database_valid")
        if queries.shape[-1] != database.shape[-1]:
            raise ValueError(f"queries and database must share D, got {queries.shape[-1]} and {database.shape[-1]}")
        q, b = self.index(queries), self.index(database)

        def block(qb: Tensor, bb: Tensor, qm: Tensor | None, bm: Tensor | None) -> Tensor:
            f2f = _frame_to_frame(qb, bb, self.spatial_k, qm, bm)
            return self._video_similarity(f2f, pair_valid(None if qm is None else qm[:, None, :],
                                                        None if bm is None else bm[None]), self.signed_scores)[0]

        scores = _chunked(block, q, b, query_valid, database_valid, chunk_size or self.chunk_size)
        return _unbatch(scores, q_single, d_single, -1)


