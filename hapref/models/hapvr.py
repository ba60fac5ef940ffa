"""HAP-VR (HAP-VR §3): the similarity network, its loss registry and the frozen frame teachers.

The similarity function f itself (regions -> spatial TopK-Chamfer -> ψ -> temporal TopK-Chamfer, with
the frame matrices before ψ exposed) is :class:`hapref.similarity.VideoSimilarityNetwork`; this module
configures it the HAP-VR way and supplies what training adds around it: the ranking loss plugged into
Eq. 15 and the teacher that makes the Eq. 14 pseudo labels.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor, nn

from hapref.features import Backbone, dino_input, load_dino_vits16
from hapref.losses import (
    MAE,
    MSE,
    BlackBoxAP,
    Circle,
    Contrastive,
    CrossQueryAP,
    FastAP,
    ListwiseAP,
    QuadLinearAP,
    SmoothAP,
    Triplet,
)
from hapref.similarity.network import VideoSimilarityNetwork

#: Video-level ranking losses of HAP-VR Table 2 (list-, pair- and point-wise) and "none" (L_base only).
VIDEO_LOSSES: tuple[str, ...] = ("quadlinear_ap", "smooth_ap", "fastap", "blackbox_ap", "listwise_ap",
                                 "contrastive", "triplet", "circle", "mae", "mse", "none",
                                 "quadlinear_ap_crossquery")
LOSS_FAMILIES: dict[str, str] = {
    "quadlinear_ap": "list-wise", "smooth_ap": "list-wise", "fastap": "list-wise", "blackbox_ap": "list-wise",
    "listwise_ap": "list-wise", "contrastive": "pair-wise", "triplet": "pair-wise", "circle": "pair-wise",
    "mae": "point-wise", "mse": "point-wise", "none": "base only",
    "quadlinear_ap_crossquery": "list-wise + cross-query (extension)",
}


def video_ranking_loss(name: str) -> nn.Module | None:
    """The video-level loss ``name`` for similarities in [0, 1] (HAP-VR Table 2); None for ``"none"``.

    QuadLinear-AP uses the released run's video setting (δ = 0.05, p = 0.1); the others their
    authors' defaults, with histogram bins spanning [0, 1].

    Examples:
        >>> video_ranking_loss("quadlinear_ap")
        QuadLinearAP(delta=0.05, p=0.1)
        >>> video_ranking_loss("none") is None
        True
    """
    factories = {
        "quadlinear_ap": lambda: QuadLinearAP.preset("released_video"),
        "smooth_ap": lambda: SmoothAP(temperature=0.01),
        "fastap": lambda: FastAP(num_bins=10, score_range=(0.0, 1.0)),
        "blackbox_ap": lambda: BlackBoxAP(),
        "listwise_ap": lambda: ListwiseAP(num_bins=25, score_range=(0.0, 1.0)),
        "contrastive": lambda: Contrastive(),
        "triplet": lambda: Triplet(),
        "circle": lambda: Circle(),
        "mae": lambda: MAE(),
        "mse": lambda: MSE(),
        "none": lambda: None,
        # not in HAP-VR: the paper's term plus the same loss on the batch pooled across queries (μAP-oriented)
        "quadlinear_ap_crossquery": lambda: CrossQueryAP(QuadLinearAP.preset("released_video"), weight=1.0),
    }
    if name not in factories:
        raise ValueError(f"name must be one of {VIDEO_LOSSES}, got {name!r}")
    return factories[name]()


def frame_ranking_loss() -> QuadLinearAP:
    """The frame-level QuadLinear-AP of HAP-VR §3.4 with the released run's setting (δ = 0.05, p = 5).

    Examples:
        >>> frame_ranking_loss()
        QuadLinearAP(delta=0.05, p=5.0)
    """
    return QuadLinearAP.preset("released_frame")


def build_hapvr_network(dims: int, temporal_k: float = 0.03, spatial_k: float = 0.1,
                        attention: bool = True, psi_init: str = "xavier") -> VideoSimilarityNetwork:
    """HAP-VR's similarity function f (§3.3.1, Eq. 3–5): region attention, spatial TopK-Chamfer, ψ, temporal TopK-Chamfer.

    Rates default to the released run's (spatial 0.1, temporal 0.03, the released HAP-VR code, https://github.com/yafeng19/HAP-VR);
    ``temporal_k = 0`` is Chamfer and ``1`` mean pooling (the ends of Table 4). ``psi_init`` is ψ's
    initialisation: ``"xavier"`` (the released code) or ``"pooling"`` (hapref's: ψ starts as a 4×4 max-pool,
    :meth:`hapref.similarity.VideoComparator.start_as_pooling`).

    Examples:
        >>> net = build_hapvr_network(dims=16).eval()
        >>> videos = torch.nn.functional.normalize(torch.randn(2, 8, 4, 16), dim=-1)
        >>> net.score(videos, videos).shape
        torch.Size([2, 2])
    """
    return VideoSimilarityNetwork(dims=dims, spatial_k=spatial_k, temporal_k=temporal_k, attention=attention,
                                  psi_init=psi_init)


class BackboneTeacher(nn.Module):
    """Offline frame teacher g' (HAP-VR §3.4): a frozen CNN's last-stage global-average embedding ``[T, C]``.

    With the EfficientNet-Lite0 backbone this is a global, semantic image descriptor, unlike the
    student's multi-layer regional L3-iMAC input — a stand-in for DINO where no DINO weights exist.

    Examples:
        >>> from hapref.features import SmallCNN
        >>> teacher = BackboneTeacher(SmallCNN())
        >>> teacher(torch.zeros(3, 32, 32, 3, dtype=torch.uint8)).shape
        torch.Size([3, 128])
    """

    def __init__(self, backbone: Backbone) -> None:
        super().__init__()
        self.backbone = backbone

    @torch.no_grad()
    def forward(self, frames: Tensor) -> Tensor:
        """uint8 frames ``[T, H, W, 3]`` -> frozen global embeddings ``[T, C]`` (the teacher of HAP-VR Eq. 13).

        Examples:
            >>> from hapref.features import SmallCNN
            >>> BackboneTeacher(SmallCNN())(torch.zeros(2, 32, 32, 3, dtype=torch.uint8)).shape
            torch.Size([2, 128])
        """
        return self.backbone.embed(frames)


class DinoTeacher(nn.Module):
    """DINO ViT-S/16 frame teacher g' of HAP-VR §3.4 (CLS token, 384-d), frozen.

    The plain-torch :class:`hapref.features.VisionTransformer` with the weights of a local DINO checkpoint file
    (:func:`hapref.features.load_dino_vits16`: ``dino_deitsmall16_pretrain.pth``, or a training checkpoint's
    ``teacher`` with its ``module.``/``backbone.`` prefixes). Nothing is downloaded. Frames go through
    :func:`hapref.features.dino_input`: resized bicubically to 224×224 and ImageNet-normalised, as DINO was trained.
    Deviation: the released HAP-VR code passes the augmented uint8 frames to the ViT cast to float16, without
    scaling to [0, 1] or normalising (``training_tools.extract_DINO_features``, ``DINO.get_features``).

    Examples:
        >>> DinoTeacher("/nonexistent/dino_deitsmall16_pretrain.pth")  # a local file is required
        Traceback (most recent call last):
        ...
        ValueError: checkpoint must be an existing DINO ViT-S/16 file, got '/nonexistent/dino_deitsmall16_pretrain.pth'
    """

    def __init__(self, checkpoint: str | Path) -> None:
        super().__init__()
        path = Path(checkpoint)
        if not path.is_file():
            raise ValueError(f"checkpoint must be an existing DINO ViT-S/16 file, got {str(path)!r}")
        self.vit = load_dino_vits16(path)

    def train(self, mode: bool = True) -> DinoTeacher:
        return super().train(False)

    @torch.no_grad()
    def forward(self, frames: Tensor) -> Tensor:
        """uint8 frames ``[T, H, W, 3]`` (or float ``[T, 3, H, W]`` in [0, 1]) -> CLS embeddings ``[T, 384]``.

        Examples:
            Both lines need a local DINO ViT-S/16 checkpoint, which hapref does not ship and the doctest run
            does not have, so they are marked ``+SKIP``.

            >>> teacher = DinoTeacher("dino_deitsmall16_pretrain.pth")  # doctest: +SKIP
            >>> teacher(torch.zeros(2, 224, 224, 3, dtype=torch.uint8)).shape  # doctest: +SKIP
            torch.Size([2, 384])
        """
        weight = self.vit.cls_token
        return self.vit(dino_input(frames.to(weight.device)).to(weight.dtype))
