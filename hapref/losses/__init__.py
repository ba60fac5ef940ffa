"""Training objectives of the four papers: ranking (AP) losses, the HAP-VR objective, quadlet and Radial
losses, memory-bank InfoNCE and Circle losses, AutoSSVH's losses.

One vocabulary across the losses: a temperature τ is ``temperature``, a margin ``margin`` (``margin1``,
``pos_margin``, ... where there are several), a scale γ ``scale``; every loss class takes
``reduction="mean" | "sum" | "none"``. Old keywords (``tau``, ``m``, ``gamma``, ``g1``, ...) raise a
``TypeError`` naming the new one; the old class names ``CircleLoss`` and ``TripletLoss`` still import, with a
``DeprecationWarning`` naming ``MemoryBankCircle`` and ``EuclideanTripletLoss``.
"""

import warnings as _warnings

# HAP-VR base loss, pseudo labels and Eq. 15 objective
from hapref.losses.hapvr_objective import WEIGHT_PRESETS, HAPVRObjective, HAPVRWeights, frame_level_ap_loss
from hapref.losses.infonce import InfoNCE
from hapref.losses.pseudo_labels import frame_pseudo_labels, positive_overlap, teacher_frame_similarity
from hapref.losses.sshn import SSHN

# AP losses and the baselines of HAP-VR Table 2
from hapref.losses._base import RankingLoss
from hapref.losses.embeddings import EmbeddingLoss, embedding_batch
from hapref.losses.blackbox_ap import BlackBoxAP, blackbox_ranks, descending_ranks
from hapref.losses.histogram_ap import FastAP, ListwiseAP, histogram_ap
from hapref.losses.pair_losses import Circle, Contrastive, Triplet
from hapref.losses.pointwise import MAE, MSE
from hapref.losses.quadlinear_ap import QuadLinearAP
from hapref.losses.relaxed_rank import relaxed_rank_ap
from hapref.losses.smooth_ap import SmoothAP
from hapref.losses.cross_query import CrossQueryAP, pooled_ap_loss
from hapref.losses.surrogates import (QuadLinearStep, SigmoidStep, StepSurrogate, heaviside, negative_step_sum,
                                      quad_linear, sigmoid_step)

__all__ = [
    "blackbox_ranks",
    "BlackBoxAP",
    "Circle",
    "Contrastive",
    "CrossQueryAP",
    "descending_ranks",
    "embedding_batch",
    "EmbeddingLoss",
    "FastAP",
    "frame_level_ap_loss",
    "frame_pseudo_labels",
    "HAPVRObjective",
    "HAPVRWeights",
    "heaviside",
    "histogram_ap",
    "InfoNCE",
    "ListwiseAP",
    "MAE",
    "MSE",
    "negative_step_sum",
    "positive_overlap",
    "quad_linear",
    "pooled_ap_loss",
    "QuadLinearAP",
    "QuadLinearStep",
    "RankingLoss",
    "relaxed_rank_ap",
    "sigmoid_step",
    "SigmoidStep",
    "SmoothAP",
    "SSHN",
    "StepSurrogate",
    "teacher_frame_similarity",
    "Triplet",
    "WEIGHT_PRESETS",
]

# Radial loss: order-preserving losses on quadlets.
from hapref.losses.radial import (EuclideanTripletLoss, Quadruplet1Loss, Quadruplet2Loss, QuadletLoss,  # noqa: E402
                                  RadialLoss)

__all__ += ["EuclideanTripletLoss", "QuadletLoss", "Quadruplet1Loss", "Quadruplet2Loss", "RadialLoss"]

# TCA: memory-bank contrastive losses and their gradient analysis.
from hapref.losses.contrastive_gradients import anchor_gradient, negative_weights, similarity_gradients  # noqa: E402
from hapref.losses.memory_bank import (HardestTripletLoss, MemoryBank, MemoryBankCircle,  # noqa: E402
                                       MemoryBankInfoNCE, contrastive_loss, contrastive_similarities)

__all__ += ["anchor_gradient", "contrastive_loss", "contrastive_similarities", "HardestTripletLoss",
            "MemoryBank", "MemoryBankCircle", "MemoryBankInfoNCE", "negative_weights", "similarity_gradients"]

# AutoSSVH: frame reconstruction, view contrast, component voting and P2Set.
from hapref.losses.autossvh import (LOSS_WEIGHTS, AutoSSVHWeights, autossvh_loss,  # noqa: E402
                                    component_vote, dcl_loss, frame_reconstruction, kmeans_clusters, p2set_loss,
                                    view_contrast)

__all__ += ["autossvh_loss", "AutoSSVHWeights", "component_vote", "dcl_loss", "frame_reconstruction",
            "kmeans_clusters", "LOSS_WEIGHTS", "p2set_loss", "view_contrast"]

#: Renamed classes whose old names still import (with a DeprecationWarning): old name -> new name.
DEPRECATED_NAMES = {"CircleLoss": "MemoryBankCircle", "TripletLoss": "EuclideanTripletLoss"}
_WHY = {"CircleLoss": "TCA's Circle loss on memory-bank similarities; Circle is the score-matrix Circle loss",
        "TripletLoss": "the Radial paper's triplet on (q, p, n) embeddings with squared Euclidean distances; "
                       "Triplet is the triplet loss on a score matrix"}


def __getattr__(name: str):
    if name in DEPRECATED_NAMES:
        new = DEPRECATED_NAMES[name]
        _warnings.warn(f"hapref.losses.{name} was renamed {new} ({_WHY[name]}); the old name will be removed",
                       DeprecationWarning, stacklevel=2)
        return globals()[new]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
