"""Training-free temporal alignment scores of a frame-to-frame similarity matrix.

The order-blind similarities of :mod:`hapref.similarity.chamfer` average each query frame's best match
wherever it lies in the target; the classic copy-detection methods below also ask that the matches
follow the query's order. Each takes a similarity matrix ``sims [..., Tq, Tt]`` (``s_ij``: query frame
``i`` against target frame ``j``, e.g. :func:`hapref.similarity.frame_to_frame`) and returns one score
per pair ``[...]`` in the dtype and on the device of ``sims``:

* :func:`dtw_similarity` — dynamic time warping, the symmetric Sakoe–Chiba recursion (global);
* :func:`dp_alignment` — dynamic-programming alignment with a gap penalty, local (Smith–Waterman) or
  global (Needleman–Wunsch);
* :func:`temporal_network` — the longest weighted path through each query frame's top matches
  (Tan et al. 2009);
* :func:`hough_voting` — votes of frame matches for a temporal offset (Douze et al. 2010);
* :func:`diagonal_band_similarity` — Chamfer restricted to a band around one diagonal, best diagonal.

Every method above expects the copy to run forward at the query's speed. :func:`warp_search` scores a pair
under a few warps of the target's time axis (:data:`WARPS`: forward or reversed, at speed 1, 2 or 0.5, the
fixed set of speed factors Douze et al. 2010 try) with any of them and keeps the best
(:func:`warp_target` applies one warp).

``query_valid [..., Tq]`` and ``target_valid [..., Tt]`` (bool, broadcastable against ``sims``'s
leading axes) mark real frames; padding must come after the real frames (a valid prefix), as
:func:`hapref.similarity.pad_videos` makes it. ``normalize`` rescales each pair's matrix over its valid
cells first (``"zscore"``: ``(s − mean) / std``; ``"minmax"``: ``(s − min) / (max − min)``), the per-pair
normalisation copy-detection systems apply before thresholding. Dynamic programmes run as an
anti-diagonal wavefront (``Tq + Tt`` vectorised steps over every pair at once), the temporal network as
``Tq`` steps; nothing leaves the device. :func:`alignment_similarity_matrix` scores every
(query, database) pair from descriptors, as :func:`hapref.similarity.video_similarity_matrix` does
with the order-blind measures.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from hapref.similarity.network import _as_batch, _chunked, _frame_to_frame, _unbatch
from hapref.validation import check_flags, check_float_tensor, check_rate

NORMALIZATIONS = (None, "zscore", "minmax")
_NEG = float("-inf")


# ---------------------------------------------------------------- input handling

def _flags(valid: Tensor | None, name: str, shape: tuple[int, ...], device: torch.device) -> Tensor:
    """``valid`` broadcast to ``shape`` (all True when None), checked to be a prefix of real frames."""
    if valid is None:
        return torch.ones(shape, dtype=torch.bool, device=device)
    valid = check_flags(valid, name, broadcast_to=shape, meaning="True = a real frame, padding last")
    valid = valid.to(device).expand(shape)
    lengths = valid.sum(dim=-1, keepdim=True)
    prefix = torch.arange(shape[-1], device=device) < lengths
    if not torch.equal(prefix, valid):
        raise ValueError(f"{name} must mark a prefix of real frames (padding after the last real frame), "
                         "got a False before a True")
    return valid


def _prepare(sims: object, query_valid: Tensor | None, target_valid: Tensor | None,
             normalize: str | None) -> tuple[Tensor, Tensor, Tensor, tuple[int, ...]]:
    """``(S [B, Tq, Tt], Lq [B], Lt [B], batch shape)`` with ``S`` normalised per pair if asked."""
    sims = check_float_tensor(sims, "sims", ndim=None, finite=True)
    if sims.ndim < 2 or sims.shape[-1] == 0 or sims.shape[-2] == 0:
        raise ValueError(f"sims must be a frame-to-frame similarity matrix [..., Tq, Tt] with Tq, Tt >= 1, "
                         f"got shape {tuple(sims.shape)}")
    if normalize not in NORMALIZATIONS:
        raise ValueError(f"normalize must be one of {NORMALIZATIONS}, got {normalize!r}")
    batch, (tq, tt) = tuple(sims.shape[:-2]), sims.shape[-2:]
    qv = _flags(query_valid, "query_valid", batch + (tq,), sims.device).reshape(-1, tq)
    tv = _flags(target_valid, "target_valid", batch + (tt,), sims.device).reshape(-1, tt)
    s = sims.reshape(-1, tq, tt)
    if normalize is not None:
        s = _normalize(s, qv[:, :, None] & tv[:, None, :], normalize)
    return s, qv.sum(dim=-1), tv.sum(dim=-1), batch


def _normalize(s: Tensor, valid: Tensor, how: str) -> Tensor:
    """Each pair's matrix rescaled over its valid cells (invalid cells are left as 0)."""
    n = valid.sum(dim=(-1, -2), keepdim=True).clamp_min(1)
    if how == "zscore":
        mean = (s * valid).sum(dim=(-1, -2), keepdim=True) / n
        var = (((s - mean) * valid) ** 2).sum(dim=(-1, -2), keepdim=True) / n
        out = (s - mean) / var.sqrt().clamp_min(1e-12)
    else:
        low = s.masked_fill(~valid, float("inf")).amin(dim=(-1, -2), keepdim=True)
        high = s.masked_fill(~valid, _NEG).amax(dim=(-1, -2), keepdim=True)
        low, high = torch.where(torch.isinf(low), 0.0, low), torch.where(torch.isinf(high), 1.0, high)
        out = (s - low) / (high - low).clamp_min(1e-12)
    return torch.where(valid, out, torch.zeros_like(out))


def _number(x: object, name: str, low: float = 0.0, integer: bool = False, minimum_one: bool = False):
    kinds = (int,) if integer else (int, float)
    if isinstance(x, bool) or not isinstance(x, kinds):
        raise TypeError(f"{name} must be {'an int' if integer else 'a float'}, got {type(x).__name__}")
    bound = 1 if minimum_one else low
    if not x >= bound or x != x or x == float("inf"):
        raise ValueError(f"{name} must be a finite number >= {bound}, got {x!r}")
    return int(x) if integer else float(x)


def _finish(score: Tensor, lq: Tensor, lt: Tensor, batch: tuple[int, ...]) -> Tensor:
    """Pairs with an empty video score 0; back to the caller's batch shape."""
    score = torch.where((lq > 0) & (lt > 0), score, torch.zeros_like(score))
    return score.reshape(batch)


def _anti_diagonals(s: Tensor) -> Tensor:
    """``A [B, Tq + Tt - 1, Tq]`` with ``A[b, d, i] = s[b, i, d - i]`` (0 where ``d - i`` is outside ``[0, Tt)``)."""
    b, tq, tt = s.shape
    d = torch.arange(tq + tt - 1, device=s.device)[:, None]
    j = d - torch.arange(tq, device=s.device)[None, :]
    inside = (j >= 0) & (j < tt)
    a = s.gather(2, j.clamp(0, tt - 1).T[None].expand(b, tq, tq + tt - 1))      # [B, Tq, D]
    return a.transpose(1, 2) * inside[None]


def _wavefront(s: Tensor, lq: Tensor, lt: Tensor, diagonal: float, step: float, gap: float, bias: float,
               local: bool, border: str) -> Tensor:
    """One table ``H [B, Tq+1, Tt+1]`` filled along its anti-diagonals; returns the local maximum over the
    valid cells (``local``) or ``H(Lq, Lt)``.

    ``H(i, j) = max{0 (local only), H(i-1, j-1) + diagonal·(s_ij - bias), H(i-1, j) + step·(s_ij - bias) - gap,
    H(i, j-1) + step·(s_ij - bias) - gap}``; ``border``: ``"zero"`` (H = 0 on row and column 0), ``"gap"``
    (H(i, 0) = -i·gap, H(0, j) = -j·gap) or ``"corner"`` (H(0, 0) = 0, -inf elsewhere on the border).
    """
    b, tq, tt = s.shape
    a = _anti_diagonals(s - bias)
    i = torch.arange(tq + 1, device=s.device)
    neg = s.new_full((b, 1), _NEG)

    def border_value(k: Tensor) -> Tensor:
        if border == "zero":
            return torch.zeros_like(k, dtype=s.dtype)
        if border == "gap":
            return -gap * k.to(s.dtype)
        return torch.where(k == 0, 0.0, _NEG).to(s.dtype)

    prev2 = None
    prev1 = torch.where(i == 0, border_value(i), _NEG).to(s.dtype)[None].expand(b, tq + 1)   # d = 0
    best = s.new_full((b,), _NEG)
    readout = s.new_zeros(b)
    end = lq + lt
    if not local:
        readout = torch.where(end == 0, prev1[:, 0], readout)
    for d in range(1, tq + tt + 1):
        j = d - i
        on_border = ((i == 0) & (j <= tt)) | ((j == 0) & (i <= tq))
        edge = torch.where(on_border, border_value(torch.where(i == 0, j, i)), _NEG)[None].expand(b, tq + 1)
        interior = (i >= 1) & (j >= 1) & (j <= tt)
        sij = torch.cat([s.new_zeros(b, 1), a[:, d - 2]], dim=1) if d >= 2 else s.new_zeros(b, tq + 1)
        up = torch.cat([neg, prev1[:, :-1]], dim=1)                     # H(i-1, j)
        left = prev1                                                     # H(i, j-1)
        diag = torch.cat([neg, prev2[:, :-1]], dim=1) if prev2 is not None else s.new_full((b, tq + 1), _NEG)
        value = torch.maximum(diag + diagonal * sij, torch.maximum(up, left) + step * sij - gap)
        if local:
            value = value.clamp_min(0.0)
        cur = torch.where(interior[None], value, edge)
        if local:
            valid = interior[None] & (i[None] <= lq[:, None]) & (j[None] <= lt[:, None])
            best = torch.maximum(best, cur.masked_fill(~valid, _NEG).amax(dim=1))
        else:
            at = (end == d)
            if bool(at.any()):
                readout = torch.where(at, cur.gather(1, lq[:, None].clamp(max=tq)).squeeze(1), readout)
        prev2, prev1 = prev1, cur
    if local:
        return torch.where(torch.isinf(best), torch.zeros_like(best), best)
    return readout


# ---------------------------------------------------------------- the scores

def dtw_similarity(sims: Tensor, query_valid: Tensor | None = None, target_valid: Tensor | None = None,
                   normalize: str | None = None) -> Tensor:
    """Dynamic time warping similarity ``[...]`` of ``sims [..., Tq, Tt]`` (symmetric Sakoe–Chiba form).

    The best monotone, continuous path from frame pair (1, 1) to (Lq, Lt) through the matrix, every
    diagonal step counted twice so that all paths weigh ``Lq + Lt`` cells:

    .. math::
        :label: eq-dtw

        D(i, j) &= \\max\\{D(i-1, j-1) + 2 s_{ij},\\; D(i-1, j) + s_{ij},\\; D(i, j-1) + s_{ij}\\},\\\\
        \\mathrm{DTW} &= \\frac{D(L_q, L_t)}{L_q + L_t},

    with ``D(0, 0) = 0`` and ``-inf`` elsewhere on the border (Sakoe and Chiba 1978). Two identical
    videos score the mean of the diagonal (1 for unit frames); every query and target frame is matched,
    so a partial copy pays for the unmatched rest of the longer video.

    Args:
        sims: ``[..., Tq, Tt]`` float, finite.
        query_valid, target_valid: optional bool ``[..., Tq]`` / ``[..., Tt]`` (broadcastable), real
            frames first.
        normalize: ``None``, ``"zscore"`` or ``"minmax"`` (per pair, over the valid cells).

    Returns:
        ``[...]`` scores in the dtype of ``sims``; a pair with an empty video scores 0.

    Examples:
        >>> s = torch.tensor([[1.0, 0.2, 0.0], [0.1, 0.9, 0.3], [0.0, 0.2, 0.8]])
        >>> dtw_similarity(s)  # the diagonal (1 + 0.9 + 0.8) · 2 / 6
        tensor(0.9000)
        >>> dtw_similarity(s.flip(0))  # the same frames in the reverse order
        tensor(0.3500)
    """
    s, lq, lt, batch = _prepare(sims, query_valid, target_valid, normalize)
    score = _wavefront(s, lq, lt, diagonal=2.0, step=1.0, gap=0.0, bias=0.0, local=False, border="corner")
    return _finish(score / (lq + lt).clamp_min(1).to(s.dtype), lq, lt, batch)


def dp_alignment(sims: Tensor, query_valid: Tensor | None = None, target_valid: Tensor | None = None,
                 gap: float = 0.1, bias: float = 0.5, local: bool = True, normalize: str | None = None) -> Tensor:
    """Dynamic-programming alignment score ``[...]`` of ``sims [..., Tq, Tt]`` with a gap penalty.

    A match of frames ``i`` and ``j`` earns ``s_ij − bias`` (a frame pair less similar than ``bias`` costs),
    skipping a frame of either video costs ``gap``:

    .. math::
        :label: eq-dp-alignment

        H(i, j) &= \\max\\{0,\\; H(i-1, j-1) + s_{ij} - b,\\\\
        &\\qquad\\quad H(i-1, j) - g,\\; H(i, j-1) - g\\},\\\\
        \\mathrm{DP} &= \\frac{\\max_{i, j} H(i, j)}{L_q}.

    ``local=True`` is Smith–Waterman (the 0 lets an alignment start anywhere, the maximum lets it end
    anywhere: a copy of any part of either video); ``local=False`` is Needleman–Wunsch (no 0, border
    ``H(i, 0) = −i·g``, ``H(0, j) = −j·g``, score ``H(L_q, L_t) / L_q``: both videos aligned end to end).
    A copy of the whole query scores ``1 − bias`` (unit frames).

    Args:
        sims: ``[..., Tq, Tt]`` float, finite.
        query_valid, target_valid: optional bool ``[..., Tq]`` / ``[..., Tt]``, real frames first.
        gap: ``g >= 0``, the cost of a skipped frame.
        bias: ``b``, the similarity a matched pair must exceed to add to the score.
        local: Smith–Waterman (True) or Needleman–Wunsch (False).
        normalize: ``None``, ``"zscore"`` or ``"minmax"`` (per pair, over the valid cells).

    Returns:
        ``[...]`` scores in the dtype of ``sims``; a pair with an empty video scores 0.

    Examples:
        >>> s = torch.tensor([[0.9, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.2]])
        >>> dp_alignment(s, gap=0.1, bias=0.5)  # frames 1-2 aligned: (0.4 + 0.3) / 3
        tensor(0.2333)
        >>> dp_alignment(s, gap=0.1, bias=0.5, local=False)  # end to end, both last frames skipped
        tensor(0.1667)
    """
    gap = _number(gap, "gap")
    bias = _number(bias, "bias", low=-float("inf"))
    if not isinstance(local, bool):
        raise TypeError(f"local must be a bool, got {type(local).__name__}")
    s, lq, lt, batch = _prepare(sims, query_valid, target_valid, normalize)
    score = _wavefront(s, lq, lt, diagonal=1.0, step=0.0, gap=gap, bias=bias, local=local,
                       border="zero" if local else "gap")
    return _finish(score / lq.clamp_min(1).to(s.dtype), lq, lt, batch)


def _top_matches(s: Tensor, lq: Tensor, lt: Tensor, top_k: int, threshold: float) -> Tensor:
    """Boolean ``[B, Tq, Tt]``: each valid query frame's ``top_k`` valid target frames above ``threshold``."""
    b, tq, tt = s.shape
    valid = (torch.arange(tq, device=s.device)[None, :, None] < lq[:, None, None]) \
        & (torch.arange(tt, device=s.device)[None, None, :] < lt[:, None, None])
    order = torch.argsort(s.masked_fill(~valid, _NEG), dim=-1, descending=True, stable=True)  # ties: by index
    rank = torch.empty_like(order).scatter_(-1, order, torch.arange(tt, device=s.device).expand_as(order))
    return valid & (rank < top_k) & (s > threshold)


def temporal_network(sims: Tensor, query_valid: Tensor | None = None, target_valid: Tensor | None = None,
                     top_k: int = 5, window: int = 3, threshold: float = 0.0,
                     normalize: str | None = None) -> Tensor:
    """Temporal-network score ``[...]`` of ``sims [..., Tq, Tt]`` (Tan et al. 2009): the heaviest path of matches.

    The nodes are the ``top_k`` most similar target frames of each query frame whose similarity exceeds
    ``threshold``; an edge joins node ``(i, j)`` to ``(i', j')`` when both videos move forward by at most
    ``window`` frames (``0 < i' − i <= w`` and ``0 < j' − j <= w``). The score is the weight of the heaviest
    path (it may start and end anywhere) over the query length:

    .. math::
        :label: eq-temporal-network

        P(i, j) &= s_{ij} + \\max\\Bigl(0, \\max_{\\substack{(i', j') \\in N,\\; i - w \\le i' < i,\\\\
        j - w \\le j' < j}} P(i', j')\\Bigr),\\\\
        \\mathrm{TN} &= \\frac{\\max_{(i, j) \\in N} P(i, j)}{L_q}.

    Tan et al. find the path by network flow; on a directed acyclic graph this recursion is the same
    longest path. A copy of the whole query scores the mean of its diagonal.

    Args:
        sims: ``[..., Tq, Tt]`` float, finite.
        query_valid, target_valid: optional bool ``[..., Tq]`` / ``[..., Tt]``, real frames first.
        top_k: ``>= 1`` matches kept per query frame (ties broken by target index).
        window: ``w >= 1``, the largest temporal step of an edge, in frames of either video.
        threshold: a kept match's similarity must exceed it.
        normalize: ``None``, ``"zscore"`` or ``"minmax"`` (per pair, over the valid cells).

    Returns:
        ``[...]`` scores in the dtype of ``sims``; 0 for a pair without any node.

    Examples:
        >>> s = torch.tensor([[0.9, 0.1, 0.1], [0.1, 0.1, 0.8], [0.1, 0.7, 0.1]])
        >>> temporal_network(s, top_k=1, window=2)  # 0.9 -> 0.8 (the 0.7 lies backwards): 1.7 / 3
        tensor(0.5667)
        >>> temporal_network(s, top_k=1, window=1)  # no edge is short enough: the best node, 0.9 / 3
        tensor(0.3000)
    """
    top_k = _number(top_k, "top_k", integer=True, minimum_one=True)
    window = _number(window, "window", integer=True, minimum_one=True)
    threshold = _number(threshold, "threshold", low=-float("inf"))
    s, lq, lt, batch = _prepare(sims, query_valid, target_valid, normalize)
    b, tq, tt = s.shape
    nodes = _top_matches(s, lq, lt, top_k, threshold)
    weights = s.masked_fill(~nodes, _NEG)
    rows: list[Tensor] = []
    best = s.new_full((b,), _NEG)
    for i in range(tq):
        if rows:
            previous = torch.stack(rows[-window:], dim=0).amax(dim=0)                 # [B, Tt]
            padded = F.pad(previous, (window, 0), value=_NEG)
            reach = F.max_pool1d(padded[:, None], window, stride=1)[:, 0, :tt]         # max over j-w..j-1
            p = weights[:, i] + reach.clamp_min(0.0)
        else:
            p = weights[:, i].clone()
        rows.append(p)
        best = torch.maximum(best, p.amax(dim=-1))
    best = torch.where(torch.isinf(best), torch.zeros_like(best), best)
    return _finish(best / lq.clamp_min(1).to(s.dtype), lq, lt, batch)


def hough_voting(sims: Tensor, query_valid: Tensor | None = None, target_valid: Tensor | None = None,
                 top_k: int = 1, bin_width: int = 1, threshold: float = 0.0,
                 normalize: str | None = None) -> Tensor:
    """Temporal Hough voting score ``[...]`` of ``sims [..., Tq, Tt]`` (Douze et al. 2010).

    Each query frame's ``top_k`` matches above ``threshold`` vote for the temporal offset ``δ = j − i``
    between the videos, with weight ``s_ij − threshold``; votes are binned by ``bin_width`` offsets and the
    score is the heaviest bin over the query length:

    .. math::
        :label: eq-hough-voting

        V(\\beta) &= \\sum_{i} \\sum_{j \\in \\mathrm{top}_k(i),\\, s_{ij} > \\tau} (s_{ij} - \\tau)\\,
        [\\lfloor (j - i + L_q - 1) / W \\rfloor = \\beta],\\\\
        \\mathrm{HV} &= \\frac{\\max_\\beta V(\\beta)}{L_q}.

    A copy at any offset collects its matches in one bin; matches scattered in time (a shuffled or
    re-cut video) spread over many bins. Douze et al. also fit a playback-speed factor; the offset
    alone is the speed-1 case.

    Args:
        sims: ``[..., Tq, Tt]`` float, finite.
        query_valid, target_valid: optional bool ``[..., Tq]`` / ``[..., Tt]``, real frames first.
        top_k: ``>= 1`` votes per query frame (ties broken by target index).
        bin_width: ``W >= 1`` offsets per histogram bin.
        threshold: ``τ``; only matches above it vote.
        normalize: ``None``, ``"zscore"`` or ``"minmax"`` (per pair, over the valid cells).

    Returns:
        ``[...]`` scores in the dtype of ``sims``; 0 for a pair without any vote.

    Examples:
        >>> s = torch.tensor([[0.9, 0.1, 0.1], [0.1, 0.8, 0.1], [0.7, 0.1, 0.1]])
        >>> hough_voting(s)  # offset 0 gets 0.9 + 0.8, offset -2 gets 0.7: 1.7 / 3
        tensor(0.5667)
        >>> hough_voting(s, bin_width=3)  # offsets -2..0 share one bin: (0.9 + 0.8 + 0.7) / 3
        tensor(0.8000)
    """
    top_k = _number(top_k, "top_k", integer=True, minimum_one=True)
    bin_width = _number(bin_width, "bin_width", integer=True, minimum_one=True)
    threshold = _number(threshold, "threshold", low=-float("inf"))
    s, lq, lt, batch = _prepare(sims, query_valid, target_valid, normalize)
    b, tq, tt = s.shape
    votes = _top_matches(s, lq, lt, top_k, threshold)
    weight = torch.where(votes, s - threshold, torch.zeros_like(s)).reshape(b, -1)
    offset = torch.arange(tt, device=s.device)[None, :] - torch.arange(tq, device=s.device)[:, None]
    offset = offset[None] + (lq - 1)[:, None, None]          # j - i + Lq - 1 >= 0 on the valid cells
    bins = (offset.clamp_min(0) // bin_width).reshape(b, -1)
    hist = s.new_zeros(b, (tq + tt - 2) // bin_width + 1).scatter_add_(1, bins, weight)
    return _finish(hist.amax(dim=-1) / lq.clamp_min(1).to(s.dtype), lq, lt, batch)


def diagonal_band_similarity(sims: Tensor, query_valid: Tensor | None = None, target_valid: Tensor | None = None,
                             width: int = 1, normalize: str | None = None) -> Tensor:
    """Temporal-consistency score ``[...]`` of ``sims [..., Tq, Tt]``: Chamfer inside the best diagonal band.

    For every offset ``δ``, each query frame keeps its best match within ``width`` frames of the diagonal
    ``j = i + δ`` (a frame whose band falls outside the target counts 0); the score is the best offset's
    mean over the query:

    .. math::
        :label: eq-diagonal-band

        C(\\delta) = \\frac{1}{L_q} \\sum_{i=1}^{L_q} \\max_{j:\\, |j - i - \\delta| \\le w} s_{ij}, \\qquad
        \\mathrm{Band} = \\max_{-L_q < \\delta < L_t} C(\\delta).

    ``width`` large enough to cover the target is Chamfer (every match allowed); ``width = 0`` is the
    mean of the best diagonal. A copy keeps its matches near one diagonal; a video whose matches lie
    elsewhere in time loses them.

    Args:
        sims: ``[..., Tq, Tt]`` float, finite.
        query_valid, target_valid: optional bool ``[..., Tq]`` / ``[..., Tt]``, real frames first.
        width: ``w >= 0``, the half-width of the band in target frames.
        normalize: ``None``, ``"zscore"`` or ``"minmax"`` (per pair, over the valid cells).

    Returns:
        ``[...]`` scores in the dtype of ``sims``; a pair with an empty video scores 0.

    Examples:
        >>> s = torch.tensor([[0.9, 0.1, 0.1], [0.1, 0.1, 0.8], [0.1, 0.7, 0.1]])
        >>> diagonal_band_similarity(s, width=0)  # the main diagonal: (0.9 + 0.1 + 0.1) / 3
        tensor(0.3667)
        >>> diagonal_band_similarity(s, width=1)  # each frame's best within one frame of it
        tensor(0.8000)
    """
    width = _number(width, "width", integer=True)
    s, lq, lt, batch = _prepare(sims, query_valid, target_valid, normalize)
    b, tq, tt = s.shape
    valid = (torch.arange(tq, device=s.device)[None, :, None] < lq[:, None, None]) \
        & (torch.arange(tt, device=s.device)[None, None, :] < lt[:, None, None])
    filled = s.masked_fill(~valid, _NEG)
    n_off = tq + tt - 1
    k = torch.arange(n_off, device=s.device)[None, :] - (tq - 1) + torch.arange(tq, device=s.device)[:, None]
    inside = (k >= 0) & (k < tt)                                       # [Tq, D]: j = i + δ
    skew = filled.gather(2, k.clamp(0, tt - 1)[None].expand(b, tq, n_off)).masked_fill(~inside[None], _NEG)
    if width > 0:
        skew = F.max_pool1d(F.pad(skew, (width, width), value=_NEG), 2 * width + 1, stride=1)
    skew = torch.where(torch.isinf(skew), torch.zeros_like(skew), skew)
    c = skew.sum(dim=1) / lq.clamp_min(1).to(s.dtype)[:, None]                          # [B, D]
    delta = torch.arange(n_off, device=s.device)[None, :] - (tq - 1)
    allowed = (delta > -lq[:, None]) & (delta < lt[:, None])
    score = c.masked_fill(~allowed, _NEG).amax(dim=-1)
    score = torch.where(torch.isinf(score), torch.zeros_like(score), score)
    return _finish(score, lq, lt, batch)


#: The alignment scores by name, for :func:`alignment_similarity_matrix` and the sweeps.
ALIGNMENTS: dict[str, Callable[..., Tensor]] = {
    "dtw": dtw_similarity, "dp": dp_alignment, "temporal_network": temporal_network,
    "hough": hough_voting, "band": diagonal_band_similarity,
}


#: The warps :func:`warp_search` tries by default: (direction, speed) with direction +1 (forward) or -1
#: (reversed) and speed 1, 2 (the target plays the query twice as fast) or 0.5 (half as fast).
WARPS: tuple[tuple[int, float], ...] = tuple((d, v) for d in (1, -1) for v in (1.0, 2.0, 0.5))


def warp_target(sims: Tensor, target_valid: Tensor | None = None, direction: int = 1, speed: float = 1.0,
                ) -> tuple[Tensor, Tensor]:
    """``sims [..., Tq, Tt]`` with the target's time axis undone for a playback ``speed`` and ``direction``.

    A target that plays the query at ``speed`` ``v`` (``v = 2``: every other query frame) in ``direction``
    ``d`` (−1: backwards) is mapped back to the query's time: its ``L_t`` real frames become
    ``L_t' = ceil(v L_t)`` columns, column ``j'`` taking target frame

    .. math::
        :label: eq-warp-target

        \\pi(j') = \\lfloor j' / v \\rfloor \\;(d = +1), \\qquad \\pi(j') = L_t - 1 - \\lfloor j' / v \\rfloor
        \\;(d = -1),

    so a sped-up copy has each frame repeated ``v`` times, a slowed one every ``1/v``-th frame, and a reversed
    one its real frames in the opposite order (padding stays last).

    Args:
        sims: ``[..., Tq, Tt]`` float, finite.
        target_valid: optional bool ``[..., Tt]`` (broadcastable), real frames first.
        direction: ``1`` or ``-1``.
        speed: ``v > 0``.

    Returns:
        ``(warped [..., Tq, ceil(v Tt)], valid [..., ceil(v Tt)])``; cells past a pair's ``L_t'`` are 0 and
        marked invalid.

    Examples:
        >>> s = torch.tensor([[1.0, 2.0, 3.0, 0.0]])                  # 3 real target frames, 1 padding
        >>> valid = torch.tensor([True, True, True, False])
        >>> warp_target(s, valid, direction=-1)[0]
        tensor([[3., 2., 1., 0.]])
        >>> w, v = warp_target(s, valid, speed=2.0)
        >>> w, v.int()
        (tensor([[1., 1., 2., 2., 3., 3., 0., 0.]]), tensor([1, 1, 1, 1, 1, 1, 0, 0], dtype=torch.int32))
        >>> warp_target(s, valid, speed=0.5)[0]                      # frames 0 and 2
        tensor([[1., 3.]])
    """
    sims = check_float_tensor(sims, "sims", ndim=None, finite=True)
    if sims.ndim < 2 or sims.shape[-1] == 0 or sims.shape[-2] == 0:
        raise ValueError(f"sims must be a frame-to-frame similarity matrix [..., Tq, Tt] with Tq, Tt >= 1, "
                         f"got shape {tuple(sims.shape)}")
    if direction not in (1, -1) or isinstance(direction, bool):
        raise ValueError(f"direction must be 1 (forward) or -1 (reversed), got {direction!r}")
    speed = _number(speed, "speed")
    if speed <= 0:
        raise ValueError(f"speed must be > 0, got {speed}")
    batch, (tq, tt) = tuple(sims.shape[:-2]), sims.shape[-2:]
    lt = _flags(target_valid, "target_valid", batch + (tt,), sims.device).sum(dim=-1, keepdim=True)   # [..., 1]
    out = max(1, math.ceil(tt * speed))
    j = torch.arange(out, device=sims.device, dtype=torch.float64)
    source = torch.floor(j / speed).long().expand(batch + (out,))
    source = torch.minimum(source, (lt - 1).clamp_min(0))
    if direction == -1:
        source = (lt - 1).clamp_min(0) - source
    valid = j.expand(batch + (out,)) < torch.ceil(lt.double() * speed)
    warped = sims.gather(-1, source[..., None, :].expand(batch + (tq, out)))
    return warped.masked_fill(~valid[..., None, :], 0.0), valid


def warp_search(sims: Tensor, query_valid: Tensor | None = None, target_valid: Tensor | None = None,
                method: str | Callable[..., Tensor] = "temporal_network",
                warps: tuple[tuple[int, float], ...] = WARPS, return_warp: bool = False, **params,
                ) -> Tensor | tuple[Tensor, Tensor]:
    """Alignment score ``[...]`` of ``sims [..., Tq, Tt]`` under the best of several warps of the target.

    .. math::
        :label: eq-warp-search

        \\mathrm{WS}(q, t) = \\max_{(d, v) \\in \\mathcal{W}} A\\bigl(S \\circ \\pi_{d, v}\\bigr),

    with ``A`` an alignment ``method`` (a name of :data:`ALIGNMENTS` or a function of the same signature,
    called with ``params``) and ``S ∘ π`` the matrix of :func:`warp_target`. With ``warps=((1, 1.0),)`` it is
    the method itself.

    Args:
        sims: ``[..., Tq, Tt]`` float, finite.
        query_valid, target_valid: optional bool ``[..., Tq]`` / ``[..., Tt]``, real frames first.
        method: the alignment to search with.
        warps: ``(direction, speed)`` pairs (default :data:`WARPS`, 6 warps).
        return_warp: also return the index into ``warps`` of each pair's best warp (the first on a tie).

    Returns:
        ``[...]`` scores in the dtype of ``sims`` (and ``[...]`` long warp indices with ``return_warp``).

    Examples:
        >>> s = torch.eye(4).flip(-1)                     # a reversed copy: the anti-diagonal
        >>> temporal_network(s, top_k=1, window=1)        # forward only: one frame of the path
        tensor(0.2500)
        >>> score, k = warp_search(s, method="temporal_network", top_k=1, window=1, return_warp=True)
        >>> score, WARPS[int(k)]
        (tensor(1.), (-1, 1.0))
    """
    if isinstance(method, str):
        if method not in ALIGNMENTS:
            raise ValueError(f"method must be one of {tuple(ALIGNMENTS)} or a function, got {method!r}")
        method = ALIGNMENTS[method]
    elif not callable(method):
        raise ValueError(f"method must be one of {tuple(ALIGNMENTS)} or a function, got {method!r}")
    warps = tuple(warps)
    if not warps:
        raise ValueError("warps must hold at least one (direction, speed) pair")
    scores = []
    for direction, speed in warps:
        warped, valid = warp_target(sims, target_valid, direction, speed)
        scores.append(method(warped, query_valid, valid, **params))
    stacked = torch.stack(scores)
    index = stacked.argmax(dim=0)                       # the first best warp on a tie
    best = stacked.gather(0, index[None])[0]
    return (best, index) if return_warp else best


def alignment_similarity_matrix(queries: Tensor, database: Tensor, query_valid: Tensor | None = None,
                                database_valid: Tensor | None = None, method: str = "dtw", spatial_k: float = 0.0,
                                chunk_size: int = 256, **params) -> Tensor:
    """Query × database alignment scores ``[Q, B]`` from region or frame descriptors.

    The frame-to-frame matrix of every pair (spatial TopK-Chamfer at rate ``spatial_k``,
    :func:`hapref.similarity.frame_to_frame`, HAP-VR Eq. 3) is scored by the alignment ``method`` of
    :data:`ALIGNMENTS` (``"dtw"``, ``"dp"``, ``"temporal_network"``, ``"hough"``, ``"band"``) with its keyword
    ``params``, at most ``chunk_size`` pairs at a time. Shapes as
    :func:`hapref.similarity.video_similarity_matrix`: ``queries [Q, T, R, D]``, ``database [B, T', R, D]``,
    valid flags ``[Q, T]`` / ``[B, T']``; a single video drops its axis.

    Examples:
        >>> videos = torch.nn.functional.normalize(torch.randn(3, 6, 4, 8, dtype=torch.float64), dim=-1)
        >>> scores = alignment_similarity_matrix(videos, videos, method="dtw")
        >>> scores.shape, bool(scores.diagonal().allclose(torch.ones(3, dtype=torch.float64)))
        (torch.Size([3, 3]), True)
        >>> alignment_similarity_matrix(videos[0], videos, method="hough", top_k=2).shape
        torch.Size([3])
    """
    if method not in ALIGNMENTS:
        raise ValueError(f"method must be one of {tuple(ALIGNMENTS)}, got {method!r}")
    spatial_k = check_rate(spatial_k, "spatial_k")
    function = ALIGNMENTS[method]
    queries, query_valid, q_single = _as_batch(queries, query_valid, "queries", "query_valid")
    database, database_valid, d_single = _as_batch(database, database_valid, "database", "database_valid")
    if queries.shape[-1] != database.shape[-1]:
        raise ValueError(f"queries and database must share D, got {queries.shape[-1]} and {database.shape[-1]}")

    def block(q: Tensor, b: Tensor, q_valid: Tensor | None, b_valid: Tensor | None) -> Tensor:
        f2f = _frame_to_frame(q, b, spatial_k, q_valid, b_valid)
        return function(f2f, None if q_valid is None else q_valid[:, None, :],
                        None if b_valid is None else b_valid[None, :, :], **params)

    return _unbatch(_chunked(block, queries, database, query_valid, database_valid, chunk_size),
                    q_single, d_single, -1)
