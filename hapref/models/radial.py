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
from torch.nn.utils.rnn import pack_padded_sequence

from hapref.features.frames import frame_features, pad_features
from hapref.features.temporal import concat_with_mean, frame_differences, temporal_mean
from hapref.validation import check_float_tensor

__all__ = ["FC_LR_MULTIPLIER", "DescriptorHead", "MeanDiffPooling", "QuadletVideoNet", "frame_features",
           "pad_features"]

#: Learning-rate multiplier of the new (fully connected) layers relative to the pretrained CNN's
#: (Radial "Experimental settings": "learning rate multiplier = 10", decay multiplier 1).
FC_LR_MULTIPLIER = 10.0


def _check_padded(features: Tensor, lengths: Tensor, feature_dim: int) -> None:
    """ValueError unless ``features`` is float ``[B, T, feature_dim]`` and ``lengths`` ``[B]`` in ``[1, T]``."""
    check_float_tensor(features, "features", ndim=3)
    if features.shape[-1] != feature_dim:
        raise ValueError(f"features must have shape [B, T, {feature_dim}], got {tuple(features.shape)}")
    if (not isinstance(lengths, Tensor) or lengths.is_floating_point() or lengths.shape != features.shape[:1]
            or (lengths < 1).any() or (lengths > features.shape[1]).any()):
        raise ValueError(f"lengths must be an integer [B] = [{features.shape[0]}] with values in "
                         f"[1, {features.shape[1]}]")


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
        _check_padded(features, lengths, self.feature_dim)
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


def _check_sizes(**sizes: int) -> None:
    bad = {name: size for name, size in sizes.items() if isinstance(size, bool) or not isinstance(size, int)
           or size < 1}
    if bad:
        raise ValueError(f"{', '.join(bad)} must be positive ints, got {bad}")


class DescriptorHead(nn.Module):
    """A head on the tuned motion descriptor: ``f = normalize(W d + b)`` or, diagonal, ``f = normalize(g ⊙ d)``.

    ``d = normalize([m/‖m‖, w·Δ_k/‖Δ_k‖])`` ``[B, 2F]`` is :func:`hapref.features.concat_with_mean` of the frame
    mean ``m`` and the pooled signed differences ``Δ_k`` (:func:`hapref.features.frame_differences`, lag ``k``);
    the defaults ``lag=2, weight=1.0`` are the options chapter 5 tunes on its validation instance. A departure of
    the book from the Radial paper (module docstring): the motion cue is in the input before any training, so
    the head only has to re-weight it.

    Args:
        feature_dim: size ``F`` of the per-frame vectors.
        embed_dim: output size of the linear layer (ignored with ``diagonal``: the output is ``2F``).
        lag: the frame-difference lag ``k >= 1``.
        weight: the weight ``w >= 0`` of the differences against the mean.
        diagonal: a per-dimension weighting ``g`` ``[2F]`` initialised at ones instead of the linear layer
            (Xavier-initialised ``W`` ``[embed_dim, 2F]``, zero ``b``).

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> head = DescriptorHead(feature_dim=6, embed_dim=4)
        >>> padded, lengths = pad_features([torch.randn(3, 6), torch.randn(5, 6)])
        >>> emb = head.embed_features(padded, lengths)
        >>> emb.shape, torch.allclose(emb.norm(dim=1), torch.ones(2))
        (torch.Size([2, 4]), True)

        The diagonal head starts as the descriptor itself:

        >>> weak = DescriptorHead(feature_dim=6, diagonal=True)
        >>> d = concat_with_mean(padded, frame_differences(padded, lengths, lag=2), lengths, 1.0)
        >>> weak.embed_features(padded, lengths).shape, torch.allclose(weak.embed_features(padded, lengths), d)
        (torch.Size([2, 12]), True)
    """

    def __init__(self, feature_dim: int, embed_dim: int = 64, lag: int = 2, weight: float = 1.0,
                 diagonal: bool = False) -> None:
        super().__init__()
        _check_sizes(feature_dim=feature_dim, embed_dim=embed_dim, lag=lag)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not weight >= 0:
            raise ValueError(f"weight must be a number >= 0, got {weight!r}")
        self.feature_dim, self.lag, self.weight, self.diagonal = feature_dim, lag, float(weight), bool(diagonal)
        if self.diagonal:
            self.gain = nn.Parameter(torch.ones(2 * feature_dim))
        else:
            self.linear = nn.Linear(2 * feature_dim, embed_dim)
            nn.init.xavier_uniform_(self.linear.weight)
            nn.init.zeros_(self.linear.bias)

    def descriptor(self, features: Tensor, lengths: Tensor) -> Tensor:
        """The fixed input ``d`` ``[B, 2F]`` (unit rows) of padded features ``[B, T, F]`` and lengths ``[B]``.

        Examples:
            >>> x = torch.tensor([[[1.0, 0.0], [1.0, 1.0], [1.0, 2.0]]])
            >>> DescriptorHead(2, lag=1).descriptor(x, torch.tensor([3]))  # normalize([(1, 1)/√2, (0, 1)])
            tensor([[0.5000, 0.5000, 0.0000, 0.7071]])
        """
        _check_padded(features, lengths, self.feature_dim)
        cue = frame_differences(features, lengths, lag=self.lag)
        return concat_with_mean(features, cue, lengths, self.weight)

    def embed_features(self, features: Tensor, lengths: Tensor) -> Tensor:
        """Unit-norm embeddings ``[B, embed_dim]`` (``[B, 2F]`` diagonal) of padded features ``[B, T, F]``.

        Examples:
            >>> head = DescriptorHead(feature_dim=3, embed_dim=2)
            >>> head.embed_features(torch.rand(4, 5, 3), torch.tensor([5, 4, 3, 3])).norm(dim=1)
            tensor([1.0000, 1.0000, 1.0000, 1.0000], grad_fn=<LinalgVectorNormBackward0>)
        """
        d = self.descriptor(features, lengths)
        return F.normalize(self.gain * d if self.diagonal else self.linear(d), dim=-1)

    def param_groups(self, lr: float) -> list[dict]:
        """One optimiser group: every parameter at ``lr`` (no backbone).

        Examples:
            >>> [(len(g["params"]), g["lr"]) for g in DescriptorHead(3, embed_dim=2).param_groups(1e-3)]
            [(2, 0.001)]
        """
        return [{"params": [p for p in self.parameters() if p.requires_grad], "lr": lr}]


class MeanDiffPooling(nn.Module):
    """A learned pooling of the frame mean and the pooled signed differences: ``f = normalize(A m + B Δ_k)``.

    ``m`` ``[B, F]`` is :func:`hapref.features.temporal_mean` and ``Δ_k`` :func:`hapref.features.frame_differences`
    (lag ``k``) of padded frame features ``[B, T, F]``; ``A`` and ``B`` are ``[embed_dim, F]`` without bias
    (PyTorch's default initialisation). Reversing a clip keeps ``m`` and negates ``Δ_k``, so the head can tell
    a clip from its reversal exactly as far as it learns ``B``. A departure of the book from the Radial paper
    (module docstring).

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> pool = MeanDiffPooling(feature_dim=6, embed_dim=4)
        >>> clip = torch.randn(1, 5, 6)
        >>> forward, backward = (pool.embed_features(c, torch.tensor([5])) for c in (clip, clip.flip(1)))
        >>> m = clip.mean(1)
        >>> a, b = pool.mean_map(m), pool.diff_map(frame_differences(clip, lag=2))
        >>> torch.allclose(forward, F.normalize(a + b)), torch.allclose(backward, F.normalize(a - b))
        (True, True)
    """

    def __init__(self, feature_dim: int, embed_dim: int = 64, lag: int = 2) -> None:
        super().__init__()
        _check_sizes(feature_dim=feature_dim, embed_dim=embed_dim, lag=lag)
        self.feature_dim, self.lag = feature_dim, lag
        self.mean_map = nn.Linear(feature_dim, embed_dim, bias=False)
        self.diff_map = nn.Linear(feature_dim, embed_dim, bias=False)

    def embed_features(self, features: Tensor, lengths: Tensor) -> Tensor:
        """Unit-norm embeddings ``[B, embed_dim]`` of padded features ``[B, T, F]`` and lengths ``[B]``.

        Examples:
            >>> pool = MeanDiffPooling(feature_dim=3, embed_dim=2)
            >>> pool.embed_features(torch.rand(2, 4, 3), torch.tensor([4, 3])).shape
            torch.Size([2, 2])
        """
        _check_padded(features, lengths, self.feature_dim)
        mean = temporal_mean(features, lengths)
        diff = frame_differences(features, lengths, lag=self.lag)
        return F.normalize(self.mean_map(mean) + self.diff_map(diff), dim=-1)

    def param_groups(self, lr: float) -> list[dict]:
        """One optimiser group: every parameter at ``lr`` (no backbone).

        Examples:
            >>> [(len(g["params"]), g["lr"]) for g in MeanDiffPooling(3, embed_dim=2).param_groups(1e-3)]
            [(2, 0.001)]
        """
        return [{"params": [p for p in self.parameters() if p.requires_grad], "lr": lr}]
