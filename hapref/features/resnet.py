"""ResNet-50 in plain torch with torchvision's module layout, for installs whose torchvision does not import.

Same modules and state-dict keys as ``torchvision.models.resnet50()`` (ResNet v1.5: the stride of a down-sampling
bottleneck sits on its 3×3 convolution), so a torchvision ``resnet50`` state dict such as the hub cache's
``resnet50-0676ba61.pth`` (``ResNet50_Weights.IMAGENET1K_V1``) loads as it is. Fresh weights follow torchvision's
initialisation (Kaiming-normal convolutions, fan-out; batch norms at weight 1, bias 0).
"""

from __future__ import annotations

from torch import Tensor, nn

#: File name of torchvision's ``ResNet50_Weights.IMAGENET1K_V1`` in the torch hub cache (``<hub>/checkpoints/``).
RESNET50_IMAGENET1K_V1 = "resnet50-0676ba61.pth"


class _Bottleneck(nn.Module):
    """1×1 -> 3×3 (stride) -> 1×1 convolutions with batch norms, plus the (projected) input, then ReLU."""

    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * self.expansion, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: Tensor) -> Tensor:
        """``[T, C_in, H, W] -> [T, 4·planes, H/stride, W/stride]``."""
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        return self.relu(self.bn3(self.conv3(out)) + identity)


class ResNet50(nn.Module):
    """torchvision's ``resnet50()`` in plain torch: stem, ``layer1..4`` (3, 4, 6, 3 bottlenecks), ``avgpool``, ``fc``.

    :class:`hapref.features.ResNet50Backbone` uses it when torchvision does not import.

    Examples:
        >>> net = ResNet50()
        >>> len(net.state_dict()), tuple(net.state_dict()["layer4.0.downsample.0.weight"].shape)
        (320, (2048, 1024, 1, 1))
    """

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self._inplanes = 64
        self.layer1 = self._layer(64, 3, 1)
        self.layer2 = self._layer(128, 4, 2)
        self.layer3 = self._layer(256, 6, 2)
        self.layer4 = self._layer(512, 3, 2)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512 * _Bottleneck.expansion, num_classes)
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)

    def _layer(self, planes: int, blocks: int, stride: int) -> nn.Sequential:
        out = planes * _Bottleneck.expansion
        downsample = None
        if stride != 1 or self._inplanes != out:
            downsample = nn.Sequential(nn.Conv2d(self._inplanes, out, 1, stride=stride, bias=False),
                                       nn.BatchNorm2d(out))
        layers = [_Bottleneck(self._inplanes, planes, stride, downsample)]
        self._inplanes = out
        layers += [_Bottleneck(out, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        """Class logits ``[T, num_classes]`` of normalised images ``[T, 3, H, W]``.

        Examples:
            >>> ResNet50(num_classes=10).eval()(torch.rand(2, 3, 32, 32)).shape
            torch.Size([2, 10])
        """
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(self.avgpool(x).flatten(1))
