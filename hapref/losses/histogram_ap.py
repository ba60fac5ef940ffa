"""AP from soft score histograms: FastAP (Cakir et al., CVPR 2019) and the listwise AP of DIR (Revaud et al., ICCV 2019)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from hapref.losses._base import RankingLoss
from hapref.utils import at_least_float32, float32_compute


@float32_compute
def histogram_ap(scores: Tensor, positive: Tensor, negative: Tensor, centres: Tensor) -> Tensor:
    """Per-query AP ``[Q]`` with ranks quantised into soft bins (FastAP Eq. 8, DIR Eq. 5).

    Scores are clamped to the range of ``centres`` (descending, equally spaced) and split between
    the two nearest centres by triangular kernels. With h⁺_b, h_b the positive / total mass of bin b
    and H⁺_b, H_b their running sums from the top bin: ``AP = Σ_b (H⁺_b / H_b) · (h⁺_b / |P|)``.
    ``scores`` float [Q, M], ``positive``/``negative`` bool [Q, M], ``centres`` [B] descending. Half-precision
    scores are computed in, and give, float32; the AP is clamped at 1 (centres rounded to float16 are not
    exactly equally spaced, and their kernels then sum to slightly more than 1).

    Examples:
        >>> centres = torch.linspace(1, 0, 3)
        >>> histogram_ap(torch.tensor([[1.0, 0.5, 0.0]]), torch.tensor([[True, False, True]]),
        ...              torch.tensor([[False, True, False]]), centres)  # exact AP when scores sit on the centres
        tensor([0.8333])
    """
    scores = at_least_float32(scores)
    centres = centres.to(device=scores.device, dtype=scores.dtype)
    width = centres[0] - centres[1]
    clamped = scores.clamp(min=centres[-1].item(), max=centres[0].item())
    kernel = F.relu(1 - (clamped.unsqueeze(-1) - centres).abs() / width)  # [Q, M, B]
    pos_w, all_w = positive.to(scores.dtype), (positive | negative).to(scores.dtype)
    h_pos = torch.einsum("qmb,qm->qb", kernel, pos_w)
    h_all = torch.einsum("qmb,qm->qb", kernel, all_w)
    precision = h_pos.cumsum(dim=1) / h_all.cumsum(dim=1).clamp(min=torch.finfo(scores.dtype).tiny)
    return ((precision * h_pos).sum(dim=1) / pos_w.sum(dim=1)).clamp(max=1.0)


def _centres(score_range: tuple[float, float], count: int) -> Tensor:
    low, high = score_range
    if not high > low:
        raise ValueError(f"score_range must be (low, high) with high > low, got {score_range}")
    if count < 2:
        raise ValueError(f"the histogram needs at least 2 bin centres, got {count}")
    return torch.linspace(high, low, count, dtype=torch.float64)


class FastAP(RankingLoss):
    """FastAP loss 1 − AP over a soft histogram with ``num_bins`` intervals (num_bins + 1 centres).

    FastAP bins squared distances of unit vectors on [0, 4]; on cosine scores s = 1 − d/2 this is the
    score range (−1, 1), the default, and matches pytorch-metric-learning's ``FastAPLoss`` (see tests).
    A list-wise baseline of HAP-VR Table 2 (FastAP, https://github.com/kunhe/FastAP-metric-learning).
    :meth:`~hapref.losses.EmbeddingLoss.on_embeddings` equals pytorch-metric-learning's ``FastAPLoss``.
    ``reduction``: ``"mean"`` over the queries with a positive, ``"sum"``, or ``"none"`` (``[Q]``, see
    :class:`~hapref.losses.RankingLoss`).

    Examples:
        >>> scores = torch.tensor([[0.8, 0.6, -0.2]])
        >>> round(FastAP(num_bins=10)(scores, torch.tensor([[True, False, True]])).item(), 4)
        0.1667
    """

    def __init__(self, num_bins: int = 10, score_range: tuple[float, float] = (-1.0, 1.0),
                 reduction: str = "mean") -> None:
        super().__init__(reduction=reduction)
        self.num_bins, self.score_range = num_bins, score_range
        self.register_buffer("centres", _centres(score_range, num_bins + 1), persistent=False)

    def per_query(self, scores: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        centres = self.centres.to(device=scores.device, dtype=scores.dtype)
        return 1 - histogram_ap(scores, positive, negative, centres)

    def extra_repr(self) -> str:
        return self._with_reduction(f"num_bins={self.num_bins}, score_range={self.score_range}")


class ListwiseAP(RankingLoss):
    """DIR's listwise AP loss: 1 − AP quantised into ``num_bins`` bin centres on ``score_range``.

    The same estimator as :class:`FastAP` with DIR's defaults (25 centres on [0, 1]); scores
    outside the range fall into the end bins, as DIR's one-sided end kernels do.
    A list-wise baseline of HAP-VR Table 2 (https://github.com/naver/deep-image-retrieval). ``reduction`` as
    in :class:`FastAP`.

    Examples:
        >>> scores = torch.tensor([[1.0, 0.5, 0.0]])
        >>> round(ListwiseAP(num_bins=3)(scores, torch.tensor([[True, False, True]])).item(), 4)
        0.1667
    """

    def __init__(self, num_bins: int = 25, score_range: tuple[float, float] = (0.0, 1.0),
                 reduction: str = "mean") -> None:
        super().__init__(reduction=reduction)
        self.num_bins, self.score_range = num_bins, score_range
        self.register_buffer("centres", _centres(score_range, num_bins), persistent=False)

    def per_query(self, scores: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        centres = self.centres.to(device=scores.device, dtype=scores.dtype)
        return 1 - histogram_ap(scores, positive, negative, centres)

    def extra_repr(self) -> str:
        return self._with_reduction(f"num_bins={self.num_bins}, score_range={self.score_range}")
