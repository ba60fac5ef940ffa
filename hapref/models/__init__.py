"""The networks of the four papers, their builders and the loaders of released checkpoints."""

# HAP-VR
from hapref.models.hapvr import (
    LOSS_FAMILIES,
    VIDEO_LOSSES,
    BackboneTeacher,
    DinoTeacher,
    build_hapvr_network,
    frame_ranking_loss,
    video_ranking_loss,
)

# Radial: the quadlet CNN+LSTM network, and the book's heads on inputs that carry the motion
from hapref.models.radial import DescriptorHead, MeanDiffPooling, QuadletVideoNet

__all__ = [
    "BackboneTeacher", "build_hapvr_network", "DescriptorHead", "DinoTeacher", "frame_ranking_loss", "LOSS_FAMILIES",
    "MeanDiffPooling", "QuadletVideoNet", "VIDEO_LOSSES", "video_ranking_loss",
]

# TCA: the Transformer temporal context aggregator
from hapref.models.tca import TCA_PRESETS, TemporalContextAggregator, clip_mean_share, mean_share_regression  # noqa: E402,E501

__all__ += ["TCA_PRESETS", "TemporalContextAggregator", "clip_mean_share", "mean_share_regression"]

# TCA Table 1a baselines (NetVLAD, LSTM, GRU) and the momentum key encoder of Table 1e
from hapref.models.aggregators import (AGGREGATORS, NetVLADAggregator, RecurrentAggregator,  # noqa: E402
                                       build_aggregator)
from hapref.models.momentum import MomentumEncoder  # noqa: E402

__all__ += ["AGGREGATORS", "build_aggregator", "MomentumEncoder", "NetVLADAggregator", "RecurrentAggregator"]
from hapref.models.aggregators import PerFrameMLP  # noqa: E402  (a per-frame control for TCA, chapter 6)

__all__ += ["PerFrameMLP"]

# AutoSSVH: Grade-Net, the Gumbel top-K sampler and the hashing network
from hapref.models.autossvh import (PRESETS as AUTOSSVH_PRESETS, AutoSSVHNet, GradeNet, gradient_reversal,  # noqa: E402
                                    gumbel_topk)

__all__ += ["AUTOSSVH_PRESETS", "AutoSSVHNet", "GradeNet", "gradient_reversal", "gumbel_topk"]
from hapref.models.autossvh import gumbel_noise, released_logits  # noqa: E402  (the sampler noises)

__all__ += ["gumbel_noise", "released_logits"]

# Released S2VS / HAP-VR checkpoints as hapref similarity networks
from hapref.models.released import load_released_network, released_state_dict  # noqa: E402

__all__ += ["load_released_network", "released_state_dict"]

# AutoSSVH's training-free baselines of the learned sampler: which frames to drop without training
from hapref.models.frame_choice import (FRAME_SAMPLERS, farthest_from_mean_drop, highest_variance_drop,  # noqa: E402
                                        k_centre_drop, training_free_drop, uniform_drop)

__all__ += ["FRAME_SAMPLERS", "farthest_from_mean_drop", "highest_variance_drop", "k_centre_drop",
            "training_free_drop", "uniform_drop"]
