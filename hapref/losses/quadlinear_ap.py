"""QuadLinear-AP (HAP-VR §3.3.2): exact steps for positive pairs, a quadratic-linear surrogate otherwise."""

from __future__ import annotations

from typing import ClassVar

from torch import Tensor

from hapref.losses._base import RankingLoss
from hapref.losses.relaxed_rank import relaxed_rank_ap
from hapref.losses.surrogates import QuadLinearStep, heaviside


class QuadLinearAP(RankingLoss):
    """QuadLinear-AP loss, HAP-VR Eq. 11 averaged over queries as in Eq. 12.

    Positive–negative steps become R⁻(x; δ) (Eq. 10), whose slope 2/δ never vanishes for a
    mis-ranked pair; positive–positive steps stay the exact H weighted by ``p`` (Eq. 9).
    The reference code counts the query as its own positive (nothing ignored); the paper's sets exclude
    it: pass ``ignore = eye(N)`` on a batch's N×N matrix for the paper's convention.

    Presets (:meth:`preset`): ``"paper"`` δ = 0.18 (Fig. 4), p = 1; ``"released_video"``
    δ = 0.05, p = 0.1 and ``"released_frame"`` δ = 0.05, p = 5 (the public training script).
    ``reduction``: ``"mean"`` over the queries with a positive, ``"sum"``, or ``"none"`` (``[Q]``, see
    :class:`~hapref.losses.RankingLoss`).

    Examples:
        >>> scores = torch.tensor([[0.9, 0.8, 0.1]])
        >>> relevance = torch.tensor([[True, False, True]])
        >>> loss = QuadLinearAP(delta=0.18)(scores, relevance)
        >>> round(loss.item(), 4)  # 1 − mean(1 / (1 + R⁻(−0.1)), 2 / (2 + R⁻(0.7)))
        0.4897
        >>> QuadLinearAP.preset("released_video")
        QuadLinearAP(delta=0.05, p=0.1)
    """

    pairwise = True
    PRESETS: ClassVar[dict[str, dict[str, float]]] = {
        "paper": {"delta": 0.18, "p": 1.0},
        "released_video": {"delta": 0.05, "p": 0.1},
        "released_frame": {"delta": 0.05, "p": 5.0},
    }

    def __init__(self, delta: float = 0.18, p: float = 1.0, max_elements: int = 2**25,
                 reduction: str = "mean") -> None:
        super().__init__(max_elements, reduction)
        if delta <= 0:
            raise ValueError(f"delta must be positive, got {delta}")
        if p < 0:
            raise ValueError(f"p must be non-negative, got {p}")
        self.delta, self.p = delta, p

    @classmethod
    def preset(cls, name: str, **kwargs: float) -> QuadLinearAP:
        """A loss with the named hyper-parameters (``"paper"``, ``"released_video"``, ``"released_frame"``).

        Examples:
            >>> QuadLinearAP.preset("paper", p=2.0)
            QuadLinearAP(delta=0.18, p=2.0)
            >>> QuadLinearAP.preset("best")
            Traceback (most recent call last):
            ...
            ValueError: name must be one of ['paper', 'released_frame', 'released_video'], got 'best'
        """
        if name not in cls.PRESETS:
            raise ValueError(f"name must be one of {sorted(cls.PRESETS)}, got {name!r}")
        return cls(**{**cls.PRESETS[name], **kwargs})

    @property
    def _neg_step(self) -> QuadLinearStep:
        return QuadLinearStep(self.delta)

    def per_query(self, scores: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return 1 - relaxed_rank_ap(scores, positive, negative, heaviside, self._neg_step, self.p)

    def extra_repr(self) -> str:
        return self._with_reduction(f"delta={self.delta}, p={self.p}")
