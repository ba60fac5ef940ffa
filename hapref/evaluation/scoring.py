"""Streaming query × database similarities of a video similarity network, without padding to the longest video.

The released S2VS / HAP-VR evaluation scores one (query, target) pair per call of
``calculate_video_similarity`` (HAP-VR §3.3.1, Eq. 3–5; https://github.com/gkordo/s2vs,
https://github.com/yafeng19/HAP-VR): that wastes most of the machine on small matrix products and
small convolutions. Here the videos of a group are laid end to end along one frame axis, each in a
slot of ``4·(⌊T/4⌋ + 1)`` frames (its frames, then zero frames up to the next multiple of 4 and at
least one more). One matrix product gives the frame-to-frame matrices of every (query, target) pair
of two groups as blocks of one large matrix, and ψ runs once on that matrix: the zero frames act
as each block's zero padding, the pooled rows and columns outside the blocks are zeroed, and because
every block starts at a multiple of 4, the two floor-mode poolings of ψ cut every block exactly as
they cut the block alone. Memory is bounded by ``max_cells`` frame pairs per group pair, whatever the
database size. The large products (region similarities, the attention's linear layer) go through
:func:`hapref.similarity.products.dot_products`, oneDNN's kernel on the CPU.

Under ``torchrun`` (an initialised process group of several ranks) the database is split across the
ranks, each scores its share against every query, and rank 0 gathers the scores (see
:func:`similarities`).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from math import isqrt

import torch
import torch.nn.functional as F
from torch import Tensor
from tqdm.auto import tqdm

from hapref import distributed as hd
from hapref.data.loaders import tile_to_min_len
from hapref.similarity.comparator import squash
from hapref.similarity.network import VideoSimilarityNetwork
from hapref.similarity.products import dot_products

#: Frames per target chunk of the released evaluation loop (longer targets: chunk scores averaged).
CHUNK_FRAMES = 2048
#: Region products per band of the frame-to-frame step (16 MiB in float32; larger products ran faster).
_TILE = 2 ** 22
#: Regions per step of the region attention (its [rows, D] activations stay in cache).
_ATTENTION_ROWS = 1024


def _frames_of(item: object, what: str) -> tuple[str, Tensor]:
    if not isinstance(item, Mapping) or "id" not in item or "frames" not in item:
        raise ValueError(f"every item of {what} must be a mapping with 'id' and 'frames' (as HDF5Features yields), "
                         f"got {type(item).__name__}")
    frames = torch.as_tensor(item["frames"])
    if frames.ndim == 2:
        frames = frames[:, None]
    if frames.ndim != 3 or frames.shape[0] == 0 or not frames.is_floating_point():
        raise ValueError(f"frames of {item['id']!r} in {what} must be a float [T, R, D] or [T, D] array with T > 0, "
                         f"got {frames.dtype} {tuple(frames.shape)}")
    return str(item["id"]), frames


@dataclass
class _Group:
    """Videos laid end to end: their frames and where each lies in the slotted layout.

    ``features`` are ``[N, R, D]`` (frame-major, ``frame_axis`` 0) or ``[R, N, D]`` (region-major,
    ``frame_axis`` 1: indexed targets).

    In the slotted layout (``size`` frames) video i starts at ``starts[i]`` and is followed by zero frames
    up to its slot's end; ``positions`` maps each of the N frames to its place there.
    """

    features: Tensor
    starts: list[int]
    lengths: list[int]
    owners: list[int]     # index of the query / target each piece belongs to
    size: int
    positions: Tensor
    frame_axis: int = 0


def _slot(length: int, align: int) -> int:
    return align * (length // align + 1) if align > 1 else length


def _pack(model: VideoSimilarityNetwork, pieces: list[Tensor], owners: list[int], names: Sequence[str],
          align: int, device: torch.device, region_major: bool) -> _Group:
    """Videos laid end to end, each in its slot, with the model's region attention applied.

    ``region_major``: features ``[R, N, D]`` (else ``[N, R, D]``). The frames go through the attention
    about ``_ATTENTION_ROWS`` regions at a time, gathered across videos, so that each step's
    activations stay in cache and no frame is copied twice. Every frame must be finite: each step's
    regions are summed (a NaN or ±inf anywhere makes the sum non-finite) and only when a sum is not
    finite are the videos looked at one by one (``names[owner]`` names them).
    """
    starts, lengths, offset = [], [], 0
    for piece in pieces:
        starts.append(offset)
        lengths.append(piece.shape[0])
        offset += _slot(piece.shape[0], align)
    n, (r, d) = sum(lengths), pieces[0].shape[1:]
    out = torch.empty((r, n, d) if region_major else (n, r, d), device=device)
    attention, sums, frame = model.attention, [], 0
    for frames in _runs(pieces, max(1, _ATTENTION_ROWS // r)):
        frames = frames.to(device=device, dtype=torch.float32)
        end = frame + frames.shape[0]
        into = out[:, frame:end].transpose(0, 1) if region_major else out[frame:end]
        regions = frames.reshape(-1, d)
        sums.append(regions.sum())
        if attention is None:
            into.copy_(frames)
        else:   # RegionAttention.forward, one cache-sized step at a time
            hidden = dot_products(regions, attention.proj.weight, attention.proj.bias, tanh=True)
            weights = torch.sigmoid_(attention.context(hidden))
            torch.mul(frames, weights.view(-1, r, 1), out=into)
        frame = end
    if not bool(torch.stack(sums).isfinite().all()):
        for owner, piece in zip(owners, pieces):   # a sum can also overflow: then nothing is raised
            if not bool(torch.isfinite(piece.to(torch.float32)).all()):
                raise ValueError(f"frames of {names[owner]!r} must be finite (got NaN or ±inf)")
    positions = torch.cat([torch.arange(s, s + n) for s, n in zip(starts, lengths)]).to(device)
    return _Group(out, starts, lengths, owners, offset, positions, 1 if region_major else 0)


def _runs(pieces: list[Tensor], step: int) -> Iterable[Tensor]:
    """The frames of ``pieces`` end to end, ``step`` at a time (views, or a small copy across pieces)."""
    run: list[Tensor] = []
    size = 0
    for piece in pieces:
        i = 0
        while i < piece.shape[0]:
            take = piece[i:i + step - size]
            run.append(take)
            size += take.shape[0]
            i += take.shape[0]
            if size == step:
                yield run[0] if len(run) == 1 else torch.cat(run)
                run, size = [], 0
    if run:
        yield run[0] if len(run) == 1 else torch.cat(run)


def _split(group: _Group, max_size: int) -> list[tuple[int, _Group]]:
    """``(index of its first piece, sub-group)`` of runs of consecutive pieces, each at most ``max_size``
    slotted frames (a larger piece alone); the sub-groups' features are views of ``group``'s."""
    if group.size <= max_size:
        return [(0, group)]
    ends = group.starts[1:] + [group.size]
    parts, first, frame = [], 0, 0
    for i in range(len(group.starts)):
        base = group.starts[first]
        if i + 1 < len(group.starts) and ends[i + 1] - base <= max_size:
            continue
        count = sum(group.lengths[first:i + 1])
        parts.append((first, _Group(group.features.narrow(group.frame_axis, frame, count),
                                    [start - base for start in group.starts[first:i + 1]],
                                    group.lengths[first:i + 1], group.owners[first:i + 1], ends[i] - base,
                                    group.positions[frame:frame + count] - base, group.frame_axis)))
        first, frame = i + 1, frame + count
    return parts


def _invalid(group: _Group, level: int, device: torch.device) -> Tensor:
    """Indices of the frames of a packed group outside its videos after ``level`` floor-mode poolings by 2."""
    scale = 2 ** level
    valid = torch.zeros(group.size // scale, dtype=torch.bool)
    for start, length in zip(group.starts, group.lengths):
        valid[start // scale:start // scale + length // scale] = True
    return torch.nonzero(~valid).squeeze(1).to(device)


class _Scorer:
    """Blocks of (query group × target group) scores for one network."""

    def __init__(self, model: VideoSimilarityNetwork, device: torch.device) -> None:
        self.model = model
        self.psi = model.comparator
        self.align = 4 if self.psi is not None else 1
        self.level = 2 if self.psi is not None else 0

    def frame_matrix(self, q: _Group, t: _Group) -> Tensor:
        """Spatial (TopK-)Chamfer of all frame pairs in the slotted layout ``[q.size, t.size]`` (HAP-VR Eq. 3).

        Only real frames are multiplied, a band of query frames at a time (at most ``_TILE`` region
        products), so each band is reduced over regions while it is still in cache. Queries are
        frame-major and targets region-major, so a band's product is ``[query frame, query region,
        target region, target frame]``: both reductions run along contiguous rows of target frames. The
        zero frames between videos score 0.
        """
        n_q, rq, d = q.features.shape
        rt, n_t = t.features.shape[:2]
        k = max(round(rt * self.model.spatial_k), 1)
        targets = t.features.reshape(rt * n_t, d)
        rows = max(1, min(n_q, _TILE // (rq * rt * n_t)))
        compact = torch.empty(n_q, n_t, device=q.features.device)
        for i in range(0, n_q, rows):
            sims = dot_products(q.features[i:i + rows].reshape(-1, d), targets).view(-1, rq, rt, n_t)
            best = sims.amax(dim=2) if k == 1 else sims.topk(k, dim=2).values.mean(dim=2)
            torch.mean(best, dim=1, out=compact[i:i + rows])
        if n_q == q.size and n_t == t.size:
            return compact
        out = compact.new_zeros(q.size, t.size)
        out[q.positions[:, None], t.positions[None, :]] = compact
        return out

    def psi_output(self, f2f: Tensor, q: _Group, t: _Group) -> Tensor:
        """ψ (HAP-VR Eq. 4) of every block at once, then hardtanh ([−1, 1]) or its [0, 1] squash.

        Channels-last throughout; the first convolution (one input channel) is a matrix product over
        3×3 patches. Every pooling window behind a block's pooled values lies inside the block (blocks
        start at multiples of 4); ReLU runs after the pooling (the two commute), and the pooled rows and
        columns outside the blocks are zeroed, as the zero padding of the next 3×3 convolution. Values
        outside the blocks after the last 3×3 convolution are never read.
        """
        dev, psi = f2f.device, self.psi
        h, w = f2f.shape

        def pool(x: Tensor, level: int) -> Tensor:
            x = F.relu_(F.max_pool2d(x, 2))
            return x.index_fill_(2, _invalid(q, level, dev), 0.0).index_fill_(3, _invalid(t, level, dev), 0.0)

        patches = F.pad(f2f, (1, 1, 1, 1)).unfold(0, 3, 1).unfold(1, 3, 1).reshape(h * w, 9)
        x = torch.addmm(psi.conv1.bias, patches, psi.conv1.weight.reshape(-1, 9).T)
        x = pool(x.view(1, h, w, -1).permute(0, 3, 1, 2), 1)   # [1, 32, h, w] channels last -> h/2 x w/2
        x = pool(F.conv2d(x, psi.conv2.weight, psi.conv2.bias, padding=1), 2)
        x = F.relu_(F.conv2d(x, psi.conv3.weight, psi.conv3.bias, padding=1))
        x = F.conv2d(x, psi.fconv.weight, psi.fconv.bias)[0, 0]
        return F.hardtanh(x) if self.model.signed_scores else squash(x)

    def block_scores(self, q: _Group, t: _Group) -> Tensor:
        """Scores ``[pieces of q, pieces of t]`` (HAP-VR Eq. 3–5) of every pair of the two groups."""
        out = self.frame_matrix(q, t)
        if self.psi is not None:
            out = self.psi_output(out, q, t)
        scale = 2 ** self.level
        columns = []
        for start, length in zip(t.starts, t.lengths):
            block = out[:, start // scale:start // scale + length // scale]
            k = max(round(block.shape[1] * self.model.temporal_k), 1)
            columns.append(block.amax(dim=1) if k == 1 else block.topk(k, dim=1).values.mean(dim=1))
        best = torch.stack(columns, dim=1)                      # [Lq / scale, pieces of t]
        weights = torch.zeros(len(q.starts), best.shape[0], device=best.device, dtype=best.dtype)
        for i, (start, length) in enumerate(zip(q.starts, q.lengths)):
            weights[i, start // scale:start // scale + length // scale] = 1.0 / (length // scale)
        return weights @ best


def _query_groups(model: VideoSimilarityNetwork, queries: list[Tensor], names: Sequence[str], align: int,
                  rows_cap: int, device: torch.device) -> list[_Group]:
    """The queries, indexed, in groups of consecutive queries of at most ``rows_cap`` slotted frames."""
    groups, current, owners, size = [], [], [], 0
    for index, frames in enumerate(queries):
        slot = _slot(frames.shape[0], align)
        if current and size + slot > rows_cap:
            groups.append(_pack(model, current, owners, names, align, device, region_major=False))
            current, owners, size = [], [], 0
        current.append(frames)
        owners.append(index)
        size += slot
    if current:
        groups.append(_pack(model, current, owners, names, align, device, region_major=False))
    return groups


#: Default ``max_cells`` of :func:`similarities` per device type (frame pairs scored in one block).
DEFAULT_MAX_CELLS: dict[str, int] = {"cpu": 2 ** 17, "cuda": 2 ** 21}


@torch.inference_mode()
def similarities(model: VideoSimilarityNetwork, queries: Sequence[Mapping] | Iterable[Mapping],
                 database: Iterable[Mapping], *, device: str | torch.device | None = None, progress: bool = True,
                 max_cells: int | None = None, chunk_frames: int = CHUNK_FRAMES,
                 min_len: int | None = None, distributed: bool | None = None,
                 precision: str = "float32") -> dict[str, dict[str, float]]:
    """``{query_id: {target_id: similarity}}`` of a similarity network over a streamed database (HAP-VR Eq. 3–5).

    ``queries`` and ``database`` are sequences, iterables or Datasets of ``{"id": str, "frames": float
    [T, R, D] or [T, D]}`` items (what :class:`hapref.data.HDF5Features` yields); the database is read
    once, in order, and never held in memory. ``model`` is a
    :class:`hapref.similarity.VideoSimilarityNetwork`: a released network of
    :func:`hapref.models.load_released_network`, a hapref-trained one, or one without ψ.

    The result equals the released evaluation loop (https://github.com/gkordo/s2vs, evaluation.py)
    pair by pair: videos shorter than ``min_len`` frames (default: the model's ``min_len``) are
    doubled until long enough; targets longer than ``chunk_frames`` are cut into chunks of that many
    frames and their chunk similarities averaged (a last chunk shorter than ψ's 4 frames, on which
    the released loop fails, is doubled like a short video); scores are in [−1, 1] for networks with
    ``signed_scores`` and in [0, 1] otherwise. A video with a NaN or ±inf raises ``ValueError`` naming it.

    ``max_cells`` bounds the frame pairs scored at once (peak memory about 400 bytes each, float32, plus
    a 16 MiB band of region products;
    default :data:`DEFAULT_MAX_CELLS` of the device: 2¹⁷ on the CPU, fastest in
    ``benchmarks/scoring.py``, 2²¹ on CUDA):
    every query and target group is sized so that rows × columns stay within it, except that a
    single query × single target chunk larger than that is scored on its own. ``device``: where to
    compute (default: the model's; a copy of the model is moved there). Videos are packed, never
    padded to the longest one.

    ``precision``: ``"float32"`` (default, the released loop's arithmetic), ``"tf32"`` (CUDA's TensorFloat-32
    products and convolutions; on the CPU the same as float32) or ``"bfloat16"`` (the region products and ψ under
    ``torch.autocast`` in bfloat16, scores kept in float32): faster on GPUs, and off by at most about 0.02
    from the float32 scores on unit-norm descriptors (``tests/test_scoring.py`` measures it on the CPU).

    ``distributed`` (default: True inside an initialised process group of several ranks, as under
    ``torchrun``; pass False where only one rank calls this): every rank must call it with the same
    queries and database. Rank r scores a contiguous block of the database (:func:`hapref.distributed.shard_indices`)
    when ``database`` has ``len`` and indexing (a list, :class:`hapref.data.HDF5Features`), reading only
    its own videos, else every W-th video of the stream; rank 0 gathers and returns the whole result,
    targets in database order, the scores one process computes (equal up to float32 rounding, about 1e-7:
    the ranks pack other groups of targets); the other ranks return ``{}``.

    Examples:
        >>> import torch
        >>> from hapref.similarity import VideoSimilarityNetwork
        >>> net = VideoSimilarityNetwork(dims=8, attention=True, signed_scores=True).eval()
        >>> g = torch.Generator().manual_seed(0)
        >>> unit = lambda t: torch.nn.functional.normalize(torch.randn(t, 9, 8, generator=g), dim=-1)
        >>> videos = [{"id": f"v{i}", "frames": unit(t)} for i, t in enumerate([5, 11, 3])]
        >>> sims = similarities(net, videos[:1], videos, progress=False)
        >>> sorted(sims["v0"])
        ['v0', 'v1', 'v2']
        >>> padded = net.score(videos[0]["frames"][None], videos[1]["frames"][None])
        >>> abs(sims["v0"]["v1"] - padded.item()) < 1e-5
        True
    """
    if not isinstance(model, VideoSimilarityNetwork):
        raise TypeError(f"model must be a hapref.similarity.VideoSimilarityNetwork, got {type(model).__name__}")
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if max_cells is not None and (not isinstance(max_cells, int) or max_cells < 1) or chunk_frames < 4:
        raise ValueError(f"max_cells must be >= 1 and chunk_frames >= 4, got {max_cells} and {chunk_frames}")
    min_len = model.min_len if min_len is None else min_len
    if min_len < (4 if model.comparator is not None else 1):
        raise ValueError(f"min_len must be >= 4 for a network with ψ (>= 1 without), got {min_len}")
    if distributed is None:
        distributed = hd.is_distributed() and hd.get_world_size() > 1
    elif not isinstance(distributed, bool):
        raise TypeError(f"distributed must be a bool or None, got {distributed!r}")
    elif distributed and not hd.is_distributed():
        raise ValueError("distributed=True needs an initialised process group (hapref.distributed.init_distributed "
                         "under torchrun)")
    progress = progress and hd.is_main_process()
    if device is None:
        params = list(model.parameters())
        device = params[0].device if params else torch.device("cpu")
    device = torch.device(device)
    if max_cells is None:
        max_cells = DEFAULT_MAX_CELLS.get(device.type, DEFAULT_MAX_CELLS["cuda"])
    if any(p.device != device for p in model.parameters()):
        model = copy.deepcopy(model).to(device)  # the caller's model stays where it is
    was_training = model.training
    model.eval()
    scorer = _Scorer(model, device)
    align = scorer.align

    query_ids, query_frames = [], []
    dims = None if model.attention is None else model.attention.proj.in_features
    layout: list[tuple[int, ...]] = []

    def check_layout(vid: str, frames: Tensor) -> None:
        """Every video must have the first one's [R, D], and D must be the attention's dims."""
        if dims is not None and frames.shape[2] != dims:
            raise ValueError(f"descriptors of {vid!r} must have D = {dims} (the network's dims), got {frames.shape[2]}")
        if not layout:
            layout.append(tuple(frames.shape[1:]))
        elif tuple(frames.shape[1:]) != layout[0]:
            raise ValueError(f"every video must have [R, D] = {list(layout[0])} like the first one, "
                             f"got {list(frames.shape[1:])} for {vid!r}")

    for item in tqdm(queries, disable=not progress, desc="queries", total=_share_size(queries, False)):
        vid, frames = _frames_of(item, "queries")
        check_layout(vid, frames)
        query_ids.append(vid)
        query_frames.append(tile_to_min_len(frames, min_len))
    if not query_ids:
        raise ValueError("queries must hold at least one video")
    side = max(1, isqrt(max_cells))        # query groups and target groups about square
    groups = _query_groups(model, query_frames, query_ids, align, side, device)
    result: dict[str, dict[str, float]] = {vid: {} for vid in query_ids}

    pending: list[tuple[str, list[Tensor]]] = []
    width = 0

    def flush() -> None:
        pieces = [p for _, chunks in pending for p in chunks]
        owners = [i for i, (_, chunks) in enumerate(pending) for _ in chunks]
        target = _pack(model, pieces, owners, [vid for vid, _ in pending], align, device, region_major=True)
        piece_scores = torch.empty(len(query_ids), len(pieces), device=device)
        for group in groups:     # within max_cells, except a lone query x a lone target chunk
            for _, rows in _split(group, max(1, max_cells // target.size)):
                for first, columns in _split(target, max(1, max_cells // rows.size)):
                    with _precision(precision, device):
                        block = scorer.block_scores(rows, columns)  # [queries of rows, pieces of columns]
                    piece_scores[torch.tensor(rows.owners, device=device), first:first + block.shape[1]] = block.float()
        per_target = torch.zeros(len(query_ids), len(pending), device=device)
        per_target.index_add_(1, torch.tensor(owners, device=device), piece_scores)
        per_target /= torch.bincount(torch.tensor(owners), minlength=len(pending)).to(device)
        for vid, row in zip(query_ids, per_target.cpu().tolist()):
            scores = result[vid]
            for (target_id, _), value in zip(pending, row):
                scores[target_id] = value

    order: list[tuple[int, str]] = []      # (position in the database, id) of the videos scored here
    for position, item in tqdm(_database_share(database, distributed), disable=not progress, desc="database",
                               total=_share_size(database, distributed)):
        vid, frames = _frames_of(item, "database")
        check_layout(vid, frames)
        order.append((position, vid))
        frames = tile_to_min_len(frames, min_len)
        chunks = [tile_to_min_len(frames[i:i + chunk_frames], align) for i in range(0, frames.shape[0], chunk_frames)]
        slots = sum(_slot(c.shape[0], align) for c in chunks)
        if pending and width + slots > side:
            flush()
            pending, width = [], 0
        pending.append((vid, chunks))
        width += slots
    if pending:
        flush()
    model.train(was_training)
    return _gather_on_main(result, query_ids, order) if distributed else result


#: The arithmetic :func:`similarities` can score in.
PRECISIONS: tuple[str, ...] = ("float32", "tf32", "bfloat16")


@contextlib.contextmanager
def _precision(precision: str, device: torch.device):
    """TF32 products on CUDA, or bfloat16 autocast, inside the block (nothing for float32)."""
    if precision == "bfloat16":
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
            yield
    elif precision == "tf32" and device.type == "cuda":
        matmul = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            with torch.backends.cudnn.flags(enabled=torch.backends.cudnn.enabled, allow_tf32=True):
                yield
        finally:
            torch.backends.cuda.matmul.allow_tf32 = matmul
    else:
        yield


def _share_size(database: Iterable[Mapping], distributed: bool) -> int | None:
    """How many videos :func:`_database_share` yields, when the database has a length (else None)."""
    try:
        total = len(database)  # type: ignore[arg-type]
    except TypeError:
        return None
    if not distributed:
        return total
    rank, world = hd.get_rank(), hd.get_world_size()
    return len(range(rank, total, world)) if not hasattr(type(database), "__getitem__") else \
        len(hd.shard_indices(total, rank, world))


def _database_share(database: Iterable[Mapping], distributed: bool) -> Iterable[tuple[int, Mapping]]:
    """``(position in the database, item)`` of the videos this rank scores: all of them in one process."""
    if not distributed:
        yield from enumerate(database)
        return
    rank, world = hd.get_rank(), hd.get_world_size()
    kind = type(database)
    if hasattr(kind, "__len__") and hasattr(kind, "__getitem__") and not isinstance(database, Mapping):
        for position in hd.shard_indices(len(database), rank, world):   # reads only this rank's videos
            yield position, database[position]
        return
    for position, item in enumerate(database):
        if position % world == rank:
            yield position, item


def _gather_on_main(result: dict[str, dict[str, float]], query_ids: list[str],
                    order: list[tuple[int, str]]) -> dict[str, dict[str, float]]:
    """Rank 0: every rank's scores merged in database order (as one process fills them); other ranks: ``{}``."""
    parts = [None] * hd.get_world_size() if hd.is_main_process() else None
    torch.distributed.gather_object((result, order), parts, dst=0)
    if not hd.is_main_process():
        return {}
    merged: dict[str, dict[str, float]] = {vid: {} for vid in query_ids}
    scored = sorted((position, vid, rank) for rank, (_, part) in enumerate(parts) for position, vid in part)
    for _, target, rank in scored:        # a repeated id: first position's place, last position's score
        for vid in query_ids:
            merged[vid][target] = parts[rank][0][vid][target]
    return merged
