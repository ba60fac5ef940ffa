"""The quadlet network of the Radial paper: per-frame CNN, a fully connected layer, an LSTM, L2 normalisation.

Radial loss paper, Fig. 1(i): every clip of a quadlet goes through the same weights ("four identical
branches"), so one module that embeds a batch of variable-length clips is all the network is.
The CNN is any frame backbone (default: EfficientNet-Lite0 with real ImageNet weights from
:mod:`hapref.features`; the paper's AlexNet is ``load_backbone("alexnet")`` where torchvision imports and its
weights are local, ResNet-50 likewise). Frozen (the book's quick default), its per-frame features can be computed
once and fed to :meth:`QuadletVideoNet.embed_features`. Trainable (``load_backbone(..., frozen=False)``, the
paper's end-to-end setting), :meth:`QuadletVideoNet.forward` runs it with gradients and
:meth:`QuadletVideoNet.param_groups` gives the new layers the paper's learning-rate multiplier
:data:`FC_LR_MULTIPLIER` relative to the pretrained convolutions.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_sequence

from hapref.validation import check_float_tensor

__all__ = ["FC_LR_MULTIPLIER", "QuadletVideoNet", "frame_features", "pad_features"]

#: Learning-rate multiplier of the new (fully connected) layers relative to the pretrained CNN's
#: (Radial "Experimental settings": "learning rate multiplier = 10", decay multiplier 1).
FC_LR_MULTIPLIER = 10.0


def frame_features(backbone: nn.Module, frames: Tensor, chunk: int = 64, grad: bool = False) -> Tensor:
    """Per-frame vectors ``[T, F]`` from a backbone, ``chunk`` frames at a time; gradients only with ``grad``.

    Backbones of :mod:`hapref.features` are used through their ``embed`` (global-average-pooled
    last stage); any other module must map frames to ``[T, F]`` itself.
    The per-frame CNN of the quadlet network (Radial Fig. 1(i)).

    Examples:
        >>> from hapref.features import SmallCNN
        >>> frame_features(SmallCNN(), torch.zeros(5, 32, 32, 3, dtype=torch.uint8)).shape
        torch.Size([5, 128])
        >>> cnn = SmallCNN(frozen=False)
        >>> frame_features(cnn, torch.zeros(2, 32, 32, 3, dtype=torch.uint8), grad=True).requires_grad
        True
    """
    embed = backbone.embed if hasattr(backbone, "embed") else backbone
    with torch.set_grad_enabled(grad and torch.is_grad_enabled()):
        return torch.cat([embed(frames[s:s + chunk]) for s in range(0, frames.shape[0], chunk)])


def pad_features(sequences: list[Tensor]) -> tuple[Tensor, Tensor]:
    """Right-pad ``[T_k, F]`` sequences to ``[B, T_max, F]``; also return the lengths ``[B]``.

    Input of the quadlet network's LSTM (Radial Fig. 1(i)).

    Examples:
        >>> padded, lengths = pad_features([torch.ones(2, 3), torch.ones(4, 3)])
        >>> padded.shape, lengths
        (torch.Size([2, 4, 3]), tensor([2, 4]))
    """
    if not sequences:
        raise ValueError("sequences must hold at least one [T, F] tensor")
    lengths = torch.tensor([s.shape[0] for s in sequences])
    if (lengths < 1).any():
        raise ValueError("every sequence in sequences needs at least one frame")
    return pad_sequence(sequences, batch_first=True), lengths


class QuadletVideoNet(nn.Module):
    """CNN -> FC -> LSTM -> L2-normalised embedding for clips of any length (Radial Fig. 1(i)).

    Args:
        feature_dim: size of the per-frame CNN vector (e.g. 320 for EfficientNet-Lite0's last stage).
        fc_dim: width of the fully connected layer on each frame (512 in the paper).
        hidden_dim: LSTM state size = embedding size.
        backbone: optional frame CNN; only needed to embed raw frames with :meth:`forward`. If any of its
            parameters requires gradients, :meth:`forward` trains it with the head (end to end).

    Examples:
        >>> net = QuadletVideoNet(feature_dim=6, fc_dim=8, hidden_dim=4).eval()
        >>> padded, lengths = pad_features([torch.randn(3, 6), torch.randn(5, 6)])
        >>> emb = net.embed_features(padded, lengths)
        >>> emb.shape, torch.allclose(emb.norm(dim=1), torch.ones(2))
        (torch.Size([2, 4]), True)

        With a frame CNN, ``forward`` embeds raw clips of different lengths:

        >>> from hapref.features import SmallCNN
        >>> net = QuadletVideoNet(feature_dim=128, fc_dim=8, hidden_dim=4, backbone=SmallCNN(image_size=32)).eval()
        >>> net([torch.zeros(3, 32, 32, 3, dtype=torch.uint8), torch.zeros(5, 32, 32, 3, dtype=torch.uint8)]).shape
        torch.Size([2, 4])
    """

    def __init__(self, feature_dim: int, fc_dim: int = 512, hidden_dim: int = 128,
                 backbone: nn.Module | None = None) -> None:
        super().__init__()
        if feature_dim < 1 or fc_dim < 1 or hidden_dim < 1:
            raise ValueError(f"feature_dim, fc_dim and hidden_dim must be positive, got {feature_dim}, {fc_dim}, {hidden_dim}")
        self.feature_dim = feature_dim
        self.backbone = backbone
        self.fc = nn.Sequential(nn.Linear(feature_dim, fc_dim), nn.ReLU())
        self.lstm = nn.LSTM(fc_dim, hidden_dim, batch_first=True)
        nn.init.xavier_uniform_(self.fc[0].weight)  # the paper's "Xavier weight filler"
        nn.init.zeros_(self.fc[0].bias)

    def embed_features(self, features: Tensor, lengths: Tensor) -> Tensor:
        """Unit-norm embeddings ``[B, hidden_dim]`` from padded frame features ``[B, T, F]`` and lengths ``[B]``.

        Padding never reaches the LSTM (packed sequences): the embedding is the state after each
        clip's own last frame. ``features`` float, ``lengths`` integer in ``[1, T]`` (as
        ``hapref.models.radial.pad_features`` returns them). Training feeds precomputed backbone features here; :meth:`forward` does the same from frames.

        Examples:
            >>> _ = torch.manual_seed(0)
            >>> net = QuadletVideoNet(feature_dim=6, fc_dim=8, hidden_dim=4).eval()
            >>> short, long = torch.randn(3, 6), torch.randn(5, 6)
            >>> padded, lengths = pad_features([short, long])
            >>> emb = net.embed_features(padded, lengths)
            >>> emb.shape, lengths.tolist()
            (torch.Size([2, 4]), [3, 5])
            >>> last_state = net.lstm(net.fc(short)[None])[0][0, -1]  # unpadded clip through FC + LSTM
            >>> torch.allclose(emb[0], F.normalize(last_state, dim=-1), atol=1e-6)  # padding left no trace
            True
        """
        check_float_tensor(features, "features", ndim=3)
        if features.shape[-1] != self.feature_dim:
            raise ValueError(f"features must have shape [B, T, {self.feature_dim}], got {tuple(features.shape)}")
        if lengths.shape != features.shape[:1] or (lengths < 1).any() or (lengths > features.shape[1]).any():
            raise ValueError(f"lengths must be [B] = [{features.shape[0]}] with values in [1, {features.shape[1]}]")
        packed = pack_padded_sequence(self.fc(features), lengths.cpu(), batch_first=True, enforce_sorted=False)
        _, (hidden, _) = self.lstm(packed)
        return F.normalize(hidden[-1], dim=-1)

    @property
    def finetunes_backbone(self) -> bool:
        """Whether the backbone trains with the head (some backbone parameter requires gradients).

        Examples:
            >>> from hapref.features import SmallCNN
            >>> net = QuadletVideoNet(feature_dim=128, fc_dim=8, hidden_dim=4, backbone=SmallCNN(image_size=32))
            >>> net.finetunes_backbone, QuadletVideoNet(feature_dim=6, fc_dim=8, hidden_dim=4).finetunes_backbone
            (False, False)
            >>> _ = net.backbone.requires_grad_(True)     # what finetune_backbone=true does
            >>> net.finetunes_backbone
            True
        """
        return self.backbone is not None and any(p.requires_grad for p in self.backbone.parameters())

    def forward(self, clips: list[Tensor]) -> Tensor:
        """Embed raw clips (each uint8 ``[T, H, W, 3]`` or whatever the backbone takes) through the backbone.

        All frames of all clips go through the CNN together (one batch-norm batch when the backbone trains),
        then each clip's frames through FC + LSTM. Gradients reach the CNN only when
        :attr:`finetunes_backbone`.

        Examples:
            >>> from hapref.features import SmallCNN
            >>> net = QuadletVideoNet(feature_dim=128, fc_dim=8, hidden_dim=4, backbone=SmallCNN(image_size=32)).eval()
            >>> net([torch.zeros(3, 32, 32, 3, dtype=torch.uint8)]).shape
            torch.Size([1, 4])
        """
        if self.backbone is None:
            raise ValueError("this QuadletVideoNet has no backbone; pass backbone= or use embed_features()")
        if not clips:
            raise ValueError("clips must hold at least one [T, H, W, 3] clip")
        device = next(self.parameters()).device
        frames = frame_features(self.backbone, torch.cat(list(clips)), grad=self.finetunes_backbone).to(device)
        features, lengths = pad_features(list(frames.split([clip.shape[0] for clip in clips])))
        return self.embed_features(features, lengths)

    def param_groups(self, lr: float) -> list[dict]:
        """Optimiser groups: the new layers (FC + LSTM) at ``lr``, the trainable backbone at
        ``lr / FC_LR_MULTIPLIER`` (Radial "Experimental settings": fc learning-rate multiplier 10 over the
        pretrained CNN; the same weight decay for both, decay multiplier 1).

        Examples:
            >>> from hapref.features import SmallCNN
            >>> net = QuadletVideoNet(128, fc_dim=8, hidden_dim=4, backbone=SmallCNN(frozen=False))
            >>> [(len(g["params"]), g["lr"]) for g in net.param_groups(1e-3)]
            [(6, 0.001), (8, 0.0001)]
            >>> frozen = QuadletVideoNet(128, fc_dim=8, hidden_dim=4, backbone=SmallCNN())
            >>> [(len(g["params"]), g["lr"]) for g in frozen.param_groups(1e-3)]
            [(6, 0.001)]
        """
        head = [p for name, p in self.named_parameters() if not name.startswith("backbone.") and p.requires_grad]
        groups = [{"params": head, "lr": lr}]
        if self.finetunes_backbone:
            cnn = [p for p in self.backbone.parameters() if p.requires_grad]
            groups.append({"params": cnn, "lr": lr / FC_LR_MULTIPLIER})
        return groups
