"""Frame and region descriptors: frozen backbones, L3-iMAC / iMAC / L3-iRMAC pooling, PCA whitening."""

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
                                     released_l3imac)
from hapref.features.whitening import PCAWhitening

__all__ = [
    "AlexNetBackbone", "BACKBONES", "POOLINGS", "Backbone", "EfficientNetLite0Backbone", "FeatureExtractor",
    "PCAWhitening", "RELEASED_KERNELS", "ResNet50Backbone", "SmallCNN", "load_backbone", "pool_layers",
    "region_windows", "regional_max_pool", "released_frames", "released_l3imac", "to_float_frames",
]
