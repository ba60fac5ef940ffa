"""Smooth-AP (Brown et al., ECCV 2020): every step of the AP ranks relaxed by a sigmoid."""

from __future__ import annotations

from torch import Tensor

from hapref.losses._base import RankingLoss
from hapref.losses.relaxed_rank import relaxed_rank_ap
from hapref.losses.surrogates import SigmoidStep
from hapref.validation import renamed_keywords


class SmoothAP(RankingLoss):
    """Smooth-AP loss 1 − AP with H ≈ G(x; τ) for all pairs, HAP-VR Eq. 6 with Eq. 7.

    ``temperature`` is the sigmoid's temperature τ (0.01 in Smooth-AP's released code). Its gradient
    G'(d) vanishes once a negative outranks a positive by more than a few τ. ``reduction``: ``"mean"``
    over the queries with a positive, ``"sum"``, or ``"none"`` (``[Q]``, see :class:`~hapref.losses.RankingLoss`).
    Equals pytorch-metric-learning's ``SmoothAPLoss`` on the cosine matrix of the embeddings,
    not ignored, when each query counts itself as a positive (see tests).

    Examples:
        >>> scores = torch.tensor([[0.9, 0.8, 0.1]])
        >>> relevance = torch.tensor([[True, False, True]])
        >>> round(SmoothAP(temperature=0.01)(scores, relevance).item(), 4)  # 1 − AP, AP = (1 + 2/3) / 2
        0.1667
        >>> _ = torch.manual_seed(0)
        >>> SmoothAP().on_embeddings(torch.randn(6, 3), torch.tensor([0, 0, 1, 1, 2, 2])).item() > 0
        True
        >>> SmoothAP(tau=0.01)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        TypeError: SmoothAP.__init__() takes no keyword 'tau': it is now 'temperature' (τ > 0, ...)
    """

    pairwise = True

    @renamed_keywords(tau="temperature")
    def __init__(self, temperature: float = 0.01, max_elements: int = 2**25, reduction: str = "mean") -> None:
        super().__init__(max_elements, reduction)
        if temperature <= 0:
            raise ValueError(f"temperature must be positive, got {temperature}")
        self.temperature = temperature

    @property
    def _step(self) -> SigmoidStep:
        return SigmoidStep(self.temperature)

    def per_query(self, scores: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return 1 - relaxed_rank_ap(scores, positive, negative, self._step, self._step)

    def extra_repr(self) -> str:
        return self._with_reduction(f"temperature={self.temperature}")
