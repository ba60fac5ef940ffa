"""Training-free frame samplers: which ``M`` of a video's ``T`` frames to drop, without training anything.

Each sampler takes frame features ``x [B, T, F]`` and the number of frames to drop ``M`` and returns the
dropped frame indices ``[B, M]`` (int64, sorted, on ``x``'s device): the same output as the learned sampler
(the third value of :meth:`hapref.models.autossvh.AutoSSVHNet.sample`) and as
:func:`hapref.models.autossvh.random_drop`, so the indices go wherever those go
(:func:`hapref.models.autossvh.drop_index` for the kept frames ``[B, T − M, F]``,
:meth:`~hapref.models.autossvh.AutoSSVHNet.view`). With ``K = T − M`` frames kept:

* ``uniform``: the same frames of every video, evenly spread: keep ``⌊(i + ½) T / K⌋`` for ``i < K``.
* ``farthest_from_mean``: keep the ``K`` frames of largest ``‖x_t − μ‖₂``, ``μ`` a reference frame (the
  mean frame of the split by default): frames that look like the average frame (blank, static, padding)
  go first.
* ``highest_variance``: keep the ``K`` frames whose entries vary most, ``Var_f(x_{t,f})`` (a flat frame
  has a flat feature).
* ``k_centre``: greedy k-centre (Gonzalez 1985) inside each video: start from the frame farthest from ``μ``,
  then repeatedly add the frame farthest (Euclidean) from its nearest kept frame: the kept frames cover the
  video's distinct content, each repeated stretch once.

Ranking ties go to the earlier frame.
"""

from __future__ import annotations

import torch
from torch import Tensor

from hapref.validation import check_float_tensor

__all__ = ["FRAME_SAMPLERS", "farthest_from_mean_drop", "highest_variance_drop", "k_centre_drop",
           "training_free_drop", "uniform_drop"]

#: The training-free samplers by name (:func:`training_free_drop`).
FRAME_SAMPLERS = ("uniform", "farthest_from_mean", "highest_variance", "k_centre")


def _frames(x: object, num_drop: object) -> tuple[Tensor, int]:
    x = check_float_tensor(x, "x", 3)
    frames = x.shape[1]
    if not isinstance(num_drop, int) or isinstance(num_drop, bool) or not 0 <= num_drop < frames:
        raise ValueError(f"num_drop must be an int in [0, T={frames}), got {num_drop!r}")
    return x, frames - num_drop


def _reference(x: Tensor, mean: object) -> Tensor:
    if mean is None:
        return x.mean((0, 1))
    ref = check_float_tensor(torch.as_tensor(mean), "mean", 1)
    if ref.shape[0] != x.shape[2]:
        raise ValueError(f"mean must have F={x.shape[2]} entries (one per feature), got {ref.shape[0]}")
    return ref.to(x.device, x.dtype)


def _drop_all_but(keep: Tensor, frames: int) -> Tensor:
    """Sorted indices ``[B, M]`` of the frames not in ``keep [B, K]``."""
    mask = torch.ones(keep.shape[0], frames, dtype=torch.bool, device=keep.device).scatter(1, keep, False)
    return mask.nonzero()[:, 1].view(keep.shape[0], -1)


def _drop_lowest(score: Tensor, kept: int) -> Tensor:
    """Keep the ``kept`` highest scores per row (ties to the earlier frame), return the others sorted."""
    order = torch.sort(-score, dim=1, stable=True).indices
    return _drop_all_but(order[:, :kept], score.shape[1])


def uniform_drop(x: object, num_drop: int) -> Tensor:
    """Evenly spread kept frames: keep ``⌊(i + ½) T / K⌋``, ``i = 0 … K − 1``, ``K = T − M``; drop the rest.

    Args:
        x: ``[B, T, F]`` float frame features (only the shape and device are used).
        num_drop: ``M``, frames to drop, ``0 <= M < T``.

    Returns:
        ``[B, M]`` int64 sorted dropped indices, the same for every video.

    Examples:
        >>> uniform_drop(torch.zeros(1, 8, 3), 5)          # keep frames 1, 4, 6
        tensor([[0, 2, 3, 5, 7]])
    """
    x, kept = _frames(x, num_drop)
    frames = x.shape[1]
    index = torch.arange(kept, device=x.device, dtype=torch.float64)
    keep = ((index + 0.5) * frames / kept).floor().long().clamp_max(frames - 1)
    return _drop_all_but(keep.expand(x.shape[0], -1), frames)


def farthest_from_mean_drop(x: object, num_drop: int, mean: object = None) -> Tensor:
    """Drop the ``M`` frames closest to the reference frame ``μ``: keep the ``T − M`` of largest ``‖x_t − μ‖₂``.

    Args:
        x: ``[B, T, F]`` float frame features.
        num_drop: ``M``, frames to drop, ``0 <= M < T``.
        mean: ``[F]`` reference ``μ`` (e.g. the training split's mean frame, so that database and queries share
            it); default: the mean of all ``B·T`` frames of ``x``.

    Returns:
        ``[B, M]`` int64 sorted dropped indices.

    Examples:
        >>> x = torch.tensor([[[0.0], [3.0], [0.1], [-2.0]]])
        >>> farthest_from_mean_drop(x, 2, mean=torch.zeros(1))   # frames 0 and 2 sit at the mean
        tensor([[0, 2]])
    """
    x, kept = _frames(x, num_drop)
    return _drop_lowest((x - _reference(x, mean)).norm(dim=-1), kept)


def highest_variance_drop(x: object, num_drop: int) -> Tensor:
    """Drop the ``M`` flattest frames: keep the ``T − M`` of largest ``Var_f(x_{t,f})`` (population variance).

    Args:
        x: ``[B, T, F]`` float frame features.
        num_drop: ``M``, frames to drop, ``0 <= M < T``.

    Variances are compared after rounding to 12 significant digits of the video's largest one, so frames
    whose variances differ only in the last bits (a permuted copy of a frame) tie and the earlier is kept.

    Returns:
        ``[B, M]`` int64 sorted dropped indices.

    Examples:
        >>> x = torch.tensor([[[1.0, 1.0], [0.0, 2.0], [5.0, 5.0]]])
        >>> highest_variance_drop(x, 2)                    # frame 1 is the only one that varies
        tensor([[0, 2]])
        >>> y = torch.tensor([[[0.1, 0.7, 0.2], [0.7, 0.2, 0.1], [1.0, 1.0, 1.0]]])
        >>> highest_variance_drop(y, 2)                    # frame 1 permutes frame 0: a tie, the earlier one kept
        tensor([[1, 2]])
    """
    x, kept = _frames(x, num_drop)
    variance = x.var(dim=-1, unbiased=False)
    # rounded to 12 significant digits of the row's largest variance, so that frames whose variances differ
    # only by the rounding of the summation order (a permuted copy of a frame) tie, and ties go to the earlier
    # frame as the module promises
    scale = variance.amax(1, keepdim=True).clamp_min(torch.finfo(variance.dtype).tiny)
    return _drop_lowest(torch.round(variance / scale, decimals=12), kept)


def k_centre_drop(x: object, num_drop: int, mean: object = None) -> Tensor:
    """Greedy k-centre inside each video: keep ``c_1 = argmax_t ‖x_t − μ‖``, then ``c_{i+1} = argmax_t min_{j≤i}
    ‖x_t − x_{c_j}‖`` until ``T − M`` frames are kept; drop the rest.

    A 2-approximation of the k-centre problem (Gonzalez 1985): every dropped frame lies within twice the
    optimal radius of a kept one. Ties go to the earlier frame; a frame once kept is never picked again.

    Args:
        x: ``[B, T, F]`` float frame features.
        num_drop: ``M``, frames to drop, ``0 <= M < T``.
        mean: ``[F]`` reference ``μ`` of the first pick; default: the mean of all frames of ``x``.

    Returns:
        ``[B, M]`` int64 sorted dropped indices.

    Examples:
        >>> x = torch.tensor([[[0.0], [0.0], [0.0], [5.0], [5.1], [9.0]]])
        >>> k_centre_drop(x, 3, mean=torch.zeros(1))       # keep 9, then 0, then 5: one frame per stretch
        tensor([[1, 2, 4]])
    """
    x, kept = _frames(x, num_drop)
    distance = (x - _reference(x, mean)).norm(dim=-1)                     # [B, T]
    chosen = torch.zeros(x.shape[:2], dtype=torch.bool, device=x.device)
    picks = []
    for _ in range(kept):
        pick = distance.masked_fill(chosen, -torch.inf).argmax(1)          # first maximum: the earlier frame
        picks.append(pick)
        chosen[torch.arange(x.shape[0], device=x.device), pick] = True
        centre = x[torch.arange(x.shape[0], device=x.device), pick]        # [B, F]
        gap = (x - centre[:, None]).norm(dim=-1)
        distance = gap if len(picks) == 1 else torch.minimum(distance, gap)
    return _drop_all_but(torch.stack(picks, 1), x.shape[1])


def training_free_drop(x: object, num_drop: int, method: str, mean: object = None) -> Tensor:
    """The dropped indices ``[B, M]`` of the training-free sampler ``method`` (one of :data:`FRAME_SAMPLERS`).

    Examples:
        >>> x = torch.tensor([[[0.0], [3.0], [0.1], [-2.0], [2.9], [0.2]]])
        >>> {m: training_free_drop(x, 3, m, mean=torch.zeros(1)).tolist()
        ...  for m in ("uniform", "farthest_from_mean")}
        {'uniform': [[0, 2, 4]], 'farthest_from_mean': [[0, 2, 5]]}
    """
    if method == "uniform":
        return uniform_drop(x, num_drop)
    if method == "farthest_from_mean":
        return farthest_from_mean_drop(x, num_drop, mean)
    if method == "highest_variance":
        return highest_variance_drop(x, num_drop)
    if method == "k_centre":
        return k_centre_drop(x, num_drop, mean)
    raise ValueError(f"method must be one of {FRAME_SAMPLERS}, got {method!r}")
