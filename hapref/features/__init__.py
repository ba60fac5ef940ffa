"""Frame and region descriptors: frozen backbones, L3-iMAC / iMAC / L3-iRMAC pooling, PCA whitening, DINO's ViT-S/16,
training-free temporal descriptors (frame differences, trend, pyramid)."""

from hapref.features.backbones import (
    BACKBONES,
    AlexNetBackbone,
    Backbone,
    EfficientNetLite0Backbone,
    ResNet50Backbone,
    SmallCNN,
    load_backbone,
    to_float_frames,
)
from hapref.features.extractor import FeatureExtractor, released_frames
from hapref.features.pooling import (POOLINGS, RELEASED_KERNELS, pool_layers, region_windows, regional_max_pool,
                                     released_l3imac, released_l3irmac, released_tca_windows)
from hapref.features.resnet import ResNet50
from hapref.features.temporal import (TEMPORAL_DESCRIPTORS, concat_with_mean, frame_differences, temporal_mean,
                                      temporal_pyramid, temporal_trend, valid_frames)
from hapref.features.vit import DINO_VITS16, VisionTransformer, dino_backbone_state, dino_input, load_dino_vits16
from hapref.features.whitening import PCAWhitening

__all__ = [
    "AlexNetBackbone", "BACKBONES", "DINO_VITS16", "POOLINGS", "Backbone", "EfficientNetLite0Backbone",
    "FeatureExtractor", "PCAWhitening", "RELEASED_KERNELS", "ResNet50", "ResNet50Backbone", "SmallCNN",
    "VisionTransformer", "dino_backbone_state", "dino_input", "load_backbone", "load_dino_vits16", "pool_layers",
    "region_windows", "regional_max_pool", "released_frames", "released_l3imac", "released_l3irmac",
    "released_tca_windows", "to_float_frames",
]
__all__ += ["TEMPORAL_DESCRIPTORS", "concat_with_mean", "frame_differences", "temporal_mean", "temporal_pyramid",
            "temporal_trend", "valid_frames"]
from hapref.features.view_pairs import ViewDifferenceProjection, WithinClipWhitening, within_clip_covariance  # noqa: E402

__all__ += ["ViewDifferenceProjection", "WithinClipWhitening", "within_clip_covariance"]
