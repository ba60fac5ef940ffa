"""The HAP-VR training objective: L_base plus video- and frame-level AP terms (HAP-VR Eq. 15)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor, nn

from hapref.losses.infonce import InfoNCE
from hapref.losses.pseudo_labels import frame_pseudo_labels
from hapref.losses.sshn import SSHN
from hapref.utils import at_least_float32, float32_compute
from hapref.validation import check_binary, check_float_tensor

ScoreLoss = Callable[..., Tensor]  # any ranking loss(scores [Q, M], relevance [Q, M], ignore=None) -> scalar


@dataclass(frozen=True)
class HAPVRWeights:
    """Trade-offs of Eq. 15: ``λ_f·L^F_AP + λ_v·L^V_AP + InfoNCE + λ_sshn·(L_hn + L_self) + λ_reg·L_reg``.

    Examples:
        >>> WEIGHT_PRESETS["released"]
        HAPVRWeights(frame=6.0, video=4.0, sshn=3.0, reg=1.0)
    """

    frame: float
    video: float
    sshn: float = 3.0
    reg: float = 1.0


WEIGHT_PRESETS: dict[str, HAPVRWeights] = {
    "paper": HAPVRWeights(frame=1.0, video=1.0),       # Eq. 15 as printed, unit trade-offs
    "released": HAPVRWeights(frame=6.0, video=4.0),    # scripts/train.sh of the released code (the released HAP-VR code, https://github.com/yafeng19/HAP-VR)
}


@float32_compute
def frame_level_ap_loss(frame_similarity: Tensor, positive: Tensor, negative: Tensor, video_relevance: Tensor,
                        ap_loss: ScoreLoss) -> Tensor:
    """Frame-level AP loss L^F_AP (HAP-VR §3.4): rank each query frame's target frames by the pseudo labels.

    ``frame_similarity [A, B, Ti, Tj]`` are the student's frame similarities, ``positive``/``negative``
    the Eq. 14 labels of the same shape (other frames are ignored), ``video_relevance [A, B]`` picks
    the video pairs the loss is averaged over (relevant pairs, self pairs included, as the released code).
    The similarities must be finite and no frame pair may be both positive and negative (``ValueError``
    naming the argument). Without a relevant video pair the loss is a zero on the graph, float32 for
    half-precision similarities (the dtype ``ap_loss`` gives them).

    Examples:
        >>> from hapref.losses import QuadLinearAP, frame_pseudo_labels
        >>> sims = torch.rand(2, 2, 4, 4)
        >>> pos, neg = frame_pseudo_labels(sims)
        >>> loss = frame_level_ap_loss(sims, pos, neg, torch.eye(2, dtype=torch.bool), QuadLinearAP())
        >>> loss.shape, 0 <= loss.item() <= 1
        (torch.Size([]), True)
    """
    frame_similarity = check_float_tensor(frame_similarity, "frame_similarity", ndim=4, finite=True)
    positive = check_binary(positive, "positive", frame_similarity.shape)
    negative = check_binary(negative, "negative", frame_similarity.shape)
    overlap = positive & negative
    if overlap.any():
        raise ValueError(f"positive and negative must be disjoint (each frame pair a positive, a negative or "
                         f"neither), got {int(overlap.sum())} pair(s) flagged both, e.g. at index "
                         f"{tuple(overlap.nonzero()[0].tolist())}")
    video_relevance = check_binary(video_relevance, "video_relevance", frame_similarity.shape[:2])
    if not video_relevance.any():  # a zero on the graph (x * 0 first: a half-precision sum could overflow)
        return (at_least_float32(frame_similarity) * 0).sum()
    t = frame_similarity.shape[-1]
    scores = frame_similarity[video_relevance].reshape(-1, t)
    pos, neg = positive[video_relevance].reshape(-1, t), negative[video_relevance].reshape(-1, t)
    return ap_loss(scores, pos, ~(pos | neg))


class HAPVRObjective(nn.Module):
    """Total HAP-VR loss (HAP-VR Eq. 15) from one forward pass of the similarity network.

    ``video_loss`` is the video-level ranking loss (QuadLinear-AP in HAP-VR; any
    ``loss(scores, relevance, ignore)`` for the Table 2 comparison, or None for L_base only);
    ``frame_loss`` the frame-level AP loss on Eq. 14 pseudo labels (None to drop it). ``weights`` is an
    :class:`HAPVRWeights` or a preset name of ``WEIGHT_PRESETS`` (``"paper"``, ``"released"``).

    Examples:
        >>> from hapref.losses import QuadLinearAP
        >>> objective = HAPVRObjective(QuadLinearAP(), None, weights="paper")
        >>> sims = torch.tensor([[1.0, 0.8, 0.1], [0.8, 1.0, 0.2], [0.1, 0.2, 1.0]])
        >>> terms = objective(sims, torch.tensor([[1, 1, 0], [1, 1, 0], [0, 0, 1]]), reg=torch.tensor(0.0))
        >>> sorted(terms)
        ['infonce', 'loss', 'reg', 'sshn', 'video_ap']
    """

    def __init__(self, video_loss: ScoreLoss | None, frame_loss: ScoreLoss | None,
                 weights: HAPVRWeights | str = "released", temperature: float = 0.03, sshn_eps: float = 1e-3,
                 top_rate: float = 0.35, bottom_rate: float = 0.35) -> None:
        super().__init__()
        if isinstance(weights, str) and weights not in WEIGHT_PRESETS:
            raise ValueError(f"weights must be one of {sorted(WEIGHT_PRESETS)} or an HAPVRWeights, got {weights!r}")
        if not isinstance(weights, (str, HAPVRWeights)):
            raise TypeError(f"weights must be a preset name {sorted(WEIGHT_PRESETS)} or an HAPVRWeights, "
                            f"got {type(weights).__name__}")
        self.weights = WEIGHT_PRESETS[weights] if isinstance(weights, str) else weights
        self.video_loss, self.frame_loss = video_loss, frame_loss
        self.infonce, self.sshn = InfoNCE(temperature), SSHN(sshn_eps)
        self.top_rate, self.bottom_rate = top_rate, bottom_rate

    @float32_compute
    def forward(self, video_similarity: Tensor, relevance: Tensor, reg: Tensor,
                frame_similarity: Tensor | None = None, teacher_similarity: Tensor | None = None,
                ) -> dict[str, Tensor]:
        """Loss terms: ``loss`` (the total) plus each weighted component for logging.

        ``video_similarity [N, N]`` in [0, 1], ``relevance [N, N]`` (diagonal 1), ``reg`` the summed
        similarity regulariser of ψ's raw output (as returned by
        :class:`hapref.similarity.VideoSimilarityNetwork`), ``frame_similarity``/``teacher_similarity
        [N, N, T, T]`` for the frame term.

        Examples:
            >>> from hapref.losses import QuadLinearAP
            >>> sims = torch.tensor([[1.0, 0.8, 0.1], [0.8, 1.0, 0.2], [0.1, 0.2, 1.0]])
            >>> relevance = torch.tensor([[1, 1, 0], [1, 1, 0], [0, 0, 1]], dtype=torch.bool)
            >>> terms = HAPVRObjective(QuadLinearAP(), None, weights="paper")(sims, relevance, torch.tensor(0.0))
            >>> sorted(terms), terms["loss"].ndim
            (['infonce', 'loss', 'reg', 'sshn', 'video_ap'], 0)
        """
        w = self.weights
        relevance = check_binary(relevance, "relevance", video_similarity.shape)
        hard_negative, self_sim = self.sshn(video_similarity, relevance)
        terms = {"infonce": self.infonce(video_similarity, relevance),
                 "sshn": w.sshn * (hard_negative + self_sim),
                 "reg": w.reg * reg}
        if self.video_loss is not None:
            terms["video_ap"] = w.video * self.video_loss(video_similarity, relevance)
        if self.frame_loss is not None:
            if frame_similarity is None or teacher_similarity is None:
                raise ValueError("the frame-level term needs frame_similarity and teacher_similarity [N, N, T, T]")
            with torch.no_grad():
                pos, neg = frame_pseudo_labels(teacher_similarity, self.top_rate, self.bottom_rate)
            terms["frame_ap"] = w.frame * frame_level_ap_loss(frame_similarity, pos, neg, relevance, self.frame_loss)
        terms["loss"] = sum(terms.values())
        return terms
