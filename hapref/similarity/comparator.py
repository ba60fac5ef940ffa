"""The ViSiL-style similarity CNN ψ, its [0, 1] squashing and the similarity regulariser.

HAP-VR Eq. 4 (after ViSiL): ψ reads a frame-to-frame similarity matrix as an image, so it can
learn to reward diagonal runs (temporally aligned copies) and suppress isolated spikes, and it
downsamples the matrix by 4 in each axis.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hapref.validation import check_float_tensor, renamed_keywords


#: ψ's initialisations: the released Xavier-uniform weights, or a pass-through max-pool (``start_as_pooling``).
INITS = ("xavier", "pooling")


class VideoComparator(nn.Module):
    """ψ of HAP-VR Eq. 4 / ViSiL: ``[B, Tq, Tt]`` similarities -> raw scores ``[B, ⌊Tq/4⌋, ⌊Tt/4⌋]``.

    conv3×3(1→32) → ReLU → maxpool 2 → conv3×3(32→64) → ReLU → maxpool 2 → conv3×3(64→128) → ReLU
    → conv1×1(128→1), zero padding, Xavier-uniform weights and zero biases (the released HAP-VR code,
    https://github.com/yafeng19/HAP-VR, and S2VS, https://github.com/gkordo/s2vs).
    Pooling floors as the released network does: an odd last row or column is dropped, so a matrix
    needs at least 4 frames on each side (the released loaders tile shorter videos, see
    :func:`hapref.evaluation.similarities`). Padded cells (``valid`` False) are zeroed on the way in
    and after every layer, and a pooled cell is valid only when all four cells it covers are, so a
    padded pair's valid output equals the same pair computed alone, whatever its padding.
    Deviation: the released code max-pools the mask, so a pooled cell is valid when *any* of its four
    cells is. The two rules differ only on a 2×2 block that straddles the end of a padded video (an odd
    valid length inside a longer padded batch); without padding they give the same output.
    The output is *raw*: regularise it with :func:`similarity_regularization`, then map it with
    :func:`squash` (training, [0, 1]) or :func:`torch.nn.functional.hardtanh` (released evaluation, [−1, 1]).

    Examples:
        >>> import torch
        >>> psi = VideoComparator()
        >>> raw, valid = psi(torch.rand(2, 9, 13), torch.ones(2, 9, 13, dtype=torch.bool))
        >>> tuple(raw.shape), tuple(valid.shape)
        ((2, 2, 3), (2, 2, 3))
    """

    def __init__(self, init: str = "xavier") -> None:
        super().__init__()
        if init not in INITS:
            raise ValueError(f"init must be one of {INITS}, got {init!r}")
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.conv3 = nn.Conv2d(64, 128, 3, padding=1)
        self.fconv = nn.Conv2d(128, 1, 1)
        for conv in (self.conv1, self.conv2, self.conv3, self.fconv):
            nn.init.xavier_uniform_(conv.weight)
            nn.init.zeros_(conv.bias)
        if init == "pooling":
            self.start_as_pooling()

    @torch.no_grad()
    def start_as_pooling(self) -> None:
        """Set ψ to a 4×4 max-pool of the positive part of its input (hapref's option, not the paper's).

        Channel 0 of every layer passes its input through (a centre-tap 1, the other taps 0) and the last
        layer reads channel 0 only, so ``ψ(S) = maxpool₄(max(S, 0))``: the network starts as Chamfer on the
        pooled matrix, not as a random function of it. The other channels keep their Xavier weights and
        start to matter as soon as the last layer's zero weights on them move. Used by the ``reshoot``
        profile, where a random ψ would first have to relearn from little data what Chamfer does.

        Examples:
            >>> psi = VideoComparator(init="pooling")
            >>> sim = torch.rand(1, 8, 8) * 2 - 1
            >>> raw, _ = psi(sim)
            >>> torch.allclose(raw, F.max_pool2d(sim.clamp_min(0)[:, None], 4)[:, 0])
            True
        """
        for conv in (self.conv1, self.conv2, self.conv3):
            conv.weight[0].zero_()
            conv.weight[0, 0, 1, 1] = 1.0
        self.fconv.weight.zero_()
        self.fconv.weight[0, 0] = 1.0

    @renamed_keywords(mask="valid")
    def forward(self, sim: Tensor, valid: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """Raw ψ output ``[B, ⌊Tq/4⌋, ⌊Tt/4⌋]`` and its valid cells (None without input ``valid``).

        Padded cells are zeroed at the input and after every layer (at each resolution), so a
        pair's score does not depend on how much padding its batch carries.

        Examples:
            >>> raw, valid = VideoComparator()(torch.rand(2, 9, 13))
            >>> raw.shape, valid
            (torch.Size([2, 2, 3]), None)
        """
        check_float_tensor(sim, "sim", ndim=3)
        if min(sim.shape[-2:]) < 4:
            raise ValueError(f"sim must be at least 4 × 4 (ψ pools twice, flooring), got {tuple(sim.shape)}; "
                             "tile shorter videos as the released loaders do")
        m = None if valid is None else valid.to(device=sim.device, dtype=torch.bool).expand_as(sim).unsqueeze(1)

        def keep(x: Tensor) -> Tensor:
            return x if m is None else x.masked_fill(~m, 0.0)

        x = keep(sim.unsqueeze(1))
        for conv in (self.conv1, self.conv2):
            x = F.max_pool2d(F.relu(keep(conv(x))), 2)
            if m is not None:  # valid when its whole 2×2 block is (the release: when any cell is; see the docstring)
                m = -F.max_pool2d(-m.float(), 2) > 0
            x = keep(x)
        x = keep(self.fconv(F.relu(keep(self.conv3(x))))).squeeze(1)
        return x, None if m is None else m.squeeze(1)


def squash(raw: Tensor) -> Tensor:
    """Map ψ's raw output to [0, 1]: ``hardtanh(x) / 2 + 0.5`` (HAP-VR Eq. 4; the released training forward).

    The released evaluation keeps ``hardtanh(x)`` in [−1, 1] instead; both give the same ranking.

    Examples:
        >>> import torch
        >>> squash(torch.tensor([-3.0, 0.0, 0.5, 2.0])).tolist()
        [0.0, 0.5, 0.75, 1.0]
    """
    return F.hardtanh(raw) / 2 + 0.5


@renamed_keywords(mask="valid")
def similarity_regularization(raw: Tensor, valid: Tensor | None = None) -> Tensor:
    """Similarity regulariser on ψ's raw output: ``Σ |min(x + 1, 0)| + Σ |max(x − 1, 0)|`` (ViSiL; sum).

    It penalises values outside [−1, 1], where the hardtanh of :func:`squash` has no gradient.
    Only valid cells (``valid`` True) count.

    Examples:
        >>> similarity_regularization(torch.tensor([-1.5, 0.0, 1.2]))  # 0.5 + 0.2
        tensor(0.7000)
    """
    penalty = F.relu(-1 - raw) + F.relu(raw - 1)
    if valid is not None:
        penalty = penalty * valid.to(penalty.dtype)
    return penalty.sum()
