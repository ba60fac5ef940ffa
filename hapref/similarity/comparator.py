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


class VideoComparator(nn.Module):
    """ψ of HAP-VR Eq. 4 / ViSiL: ``[B, Tq, Tt]`` similarities -> raw scores ``[B, ⌈Tq/4⌉, ⌈Tt/4⌉]``.

    conv3×3(1→32) → ReLU → maxpool 2 → conv3×3(32→64) → ReLU → maxpool 2 → conv3×3(64→128) → ReLU
    → conv1×1(128→1), zero padding, Xavier-uniform weights and zero biases (the released HAP-VR code, https://github.com/yafeng19/HAP-VR).
    Pooling uses ``ceil_mode`` so that any length ≥ 1 works (the reference floors odd sizes).
    The output is *raw*: regularise it with :func:`similarity_regularization`, then map it to
    [0, 1] with :func:`squash`. Padded cells (``valid`` False) are zeroed on the way in.
    """

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.conv3 = nn.Conv2d(64, 128, 3, padding=1)
        self.fconv = nn.Conv2d(128, 1, 1)
        for conv in (self.conv1, self.conv2, self.conv3, self.fconv):
            nn.init.xavier_uniform_(conv.weight)
            nn.init.zeros_(conv.bias)

    @renamed_keywords(mask="valid")
    def forward(self, sim: Tensor, valid: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """Raw ψ output and its valid cells (None without input ``valid``).

        Padded cells are zeroed at the input and after every convolution (at each resolution), so
        a pair's score does not depend on how much padding its batch carries.
        """
        check_float_tensor(sim, "sim", ndim=3)
        m = None if valid is None else valid.to(device=sim.device, dtype=torch.bool).expand_as(sim).unsqueeze(1)

        def keep(x: Tensor) -> Tensor:
            return x if m is None else x.masked_fill(~m, 0.0)

        x = keep(sim.unsqueeze(1))
        for conv in (self.conv1, self.conv2):
            x = F.max_pool2d(F.relu(keep(conv(x))), 2, ceil_mode=True)
            if m is not None:
                m = F.max_pool2d(m.float(), 2, ceil_mode=True) > 0
        x = keep(self.fconv(F.relu(keep(self.conv3(x))))).squeeze(1)
        return x, None if m is None else m.squeeze(1)


def squash(raw: Tensor) -> Tensor:
    """Map ψ's raw output to [0, 1]: ``hardtanh(x) / 2 + 0.5`` (ViSiL / S2VS / HAP-VR)."""
    return F.hardtanh(raw) / 2 + 0.5


@renamed_keywords(mask="valid")
def similarity_regularization(raw: Tensor, valid: Tensor | None = None) -> Tensor:
    """Similarity regulariser on ψ's raw output: ``Σ |min(x + 1, 0)| + Σ |max(x − 1, 0)|`` (ViSiL; sum).

    It penalises values outside [−1, 1], where the hardtanh of :func:`squash` has no gradient.
    Only valid cells (``valid`` True) count.
    """
    penalty = F.relu(-1 - raw) + F.relu(raw - 1)
    if valid is not None:
        penalty = penalty * valid.to(penalty.dtype)
    return penalty.sum()
