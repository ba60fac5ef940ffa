"""Contrastive learning against a memory bank of negatives: the bank, InfoNCE (TCA Eq. 3) and Circle loss (Eq. 4).

The losses here are named ``MemoryBank…`` (:class:`MemoryBankInfoNCE`, :class:`MemoryBankCircle`) or
:class:`HardestTripletLoss`: they take the memory-bank layout below, unlike :class:`hapref.losses.InfoNCE` and
:class:`hapref.losses.Circle`, which take a batch's score matrix with any number of positives per row.

TCA §3.4 compares an anchor with one positive and many negatives kept from earlier batches. The
released run (the released TCA code, https://github.com/xwen99/temporal_context_aggregation) uses MoCo with momentum 0, i.e. the keys are the current encoder's
detached embeddings; the similarities are computed against the bank *before* the batch's keys are
enqueued. Both losses take the same similarity layout: ``sims [B, 1 + M]`` with the positive in column 0
and M negatives after it, plus optional ``ignore [B, M]`` flags (True = not a negative for that row,
e.g. a bank entry of the anchor's own clip; the keyword every loss takes) or their complement ``valid [B, M]``
(what :func:`contrastive_similarities` returns; the second positional argument). ``mask=`` raises a
``TypeError`` naming ``ignore``. Every loss returns the mean over the rows, their sum with
``reduction="sum"``, or the per-row values ``[B]`` with ``reduction="none"``.
"""

from __future__ import annotations

import math
import warnings

import torch
from torch import Tensor, nn

from hapref.losses._reduction import check_reduction, reduce_values
from hapref.utils import at_least_float32, float32_compute
from hapref.validation import check_float_tensor, renamed_keywords

__all__ = ["MemoryBank", "contrastive_similarities", "MemoryBankInfoNCE", "MemoryBankCircle", "HardestTripletLoss",
           "contrastive_loss"]

#: Old names that still import, with a DeprecationWarning naming the new one.
DEPRECATED_NAMES = {"CircleLoss": "MemoryBankCircle"}


def __getattr__(name: str):
    if name in DEPRECATED_NAMES:
        new = DEPRECATED_NAMES[name]
        warnings.warn(f"{name} was renamed {new} (TCA's Circle loss on memory-bank similarities; "
                      "hapref.losses.Circle is the score-matrix Circle loss); the old name will be removed",
                      DeprecationWarning, stacklevel=2)
        return globals()[new]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class MemoryBank(nn.Module):
    """FIFO queue of ``size`` detached keys ``[size, dim]`` with an integer id per key (−1 = empty slot).

    Buffers move with ``.to(device)``; :meth:`enqueue` overwrites the oldest keys first. With ``frames=T`` every
    entry is a set of frame keys ``[T, dim]`` with valid flags ``[T]`` (buffer ``valid``): the bank of the
    frame-level objective (:func:`hapref.train.tca.frame_contrastive_similarities`), whose negatives are compared
    frame by frame (Chamfer), not as one pooled vector.

    Examples:
        >>> bank = MemoryBank(size=3, dim=2)
        >>> bank.enqueue(torch.eye(2), torch.tensor([7, 8]))
        >>> bank.enqueue(torch.ones(2, 2), torch.tensor([9, 10]))
        >>> keys, ids = bank.filled()  # oldest first; the first key was overwritten
        >>> ids
        tensor([ 8,  9, 10])
        >>> frames = MemoryBank(size=4, dim=2, frames=3)        # entries of 3 frame keys each
        >>> frames.enqueue(torch.ones(2, 3, 2), valid=torch.tensor([[True, True, False], [True] * 3]))
        >>> tuple(frames.filled()[0].shape), frames.filled_valid().tolist()
        ((2, 3, 2), [[True, True, False], [True, True, True]])
    """

    def __init__(self, size: int, dim: int, dtype: torch.dtype | None = None, frames: int | None = None) -> None:
        super().__init__()
        dtype = torch.get_default_dtype() if dtype is None else dtype
        if size < 1 or dim < 1:
            raise ValueError(f"size and dim must be >= 1, got size={size}, dim={dim}")
        if frames is not None and frames < 1:
            raise ValueError(f"frames must be >= 1 (or None: one key vector per entry), got {frames}")
        if not dtype.is_floating_point:
            raise ValueError(f"dtype must be a floating dtype, got {dtype}")
        self.frames = frames
        shape = (size, dim) if frames is None else (size, frames, dim)
        self.register_buffer("keys", torch.zeros(shape, dtype=dtype))
        if frames is not None:          # which of each entry's frames are real (False = padding)
            self.register_buffer("valid", torch.zeros(size, frames, dtype=torch.bool))
        self.register_buffer("ids", torch.full((size,), -1, dtype=torch.long))
        self.register_buffer("pointer", torch.zeros((), dtype=torch.long))
        self.register_buffer("count", torch.zeros((), dtype=torch.long))

    @property
    def size(self) -> int:
        """Capacity of the queue (number of key slots, fixed at construction), an ``int``.

        Examples:
            >>> bank = MemoryBank(size=5, dim=2)
            >>> bank.size, tuple(bank.keys.shape)
            (5, (5, 2))
        """
        return self.keys.shape[0]

    def filled(self) -> tuple[Tensor, Tensor]:
        """The stored keys ``[n, dim]`` (bank dtype) and ids ``[n]`` (long), oldest first (n = min(enqueued, size)).

        Examples:
            >>> bank = MemoryBank(size=4, dim=3)
            >>> keys, ids = bank.filled()  # nothing enqueued yet
            >>> tuple(keys.shape), tuple(ids.shape)
            ((0, 3), (0,))
            >>> bank.enqueue(torch.eye(3), torch.tensor([1, 2, 3]))
            >>> bank.enqueue(2 * torch.ones(2, 3), torch.tensor([4, 5]))  # wraps around: id 1 is dropped
            >>> keys, ids = bank.filled()
            >>> ids, torch.equal(keys, torch.cat([torch.eye(3)[1:], 2 * torch.ones(2, 3)]))
            (tensor([2, 3, 4, 5]), True)
        """
        order = self._order()
        return self.keys[order], self.ids[order]

    def _order(self) -> Tensor:
        n = int(self.count)
        return (torch.arange(n, device=self.keys.device) + (int(self.pointer) - n)) % self.size

    def filled_valid(self) -> Tensor:
        """The valid flags ``[n, frames]`` (bool) of a frame bank's stored entries, in :meth:`filled`'s order.

        Examples:
            >>> bank = MemoryBank(size=2, dim=3, frames=2)
            >>> bank.enqueue(torch.ones(1, 2, 3))        # valid defaults to every frame real
            >>> bank.filled_valid()
            tensor([[True, True]])
            >>> MemoryBank(size=2, dim=3).filled_valid()
            Traceback (most recent call last):
            ...
            ValueError: filled_valid needs a frame bank (MemoryBank(..., frames=T))
        """
        if self.frames is None:
            raise ValueError("filled_valid needs a frame bank (MemoryBank(..., frames=T))")
        return self.valid[self._order()]

    @torch.no_grad()
    def fill_random(self, generator: torch.Generator | None = None) -> None:
        """Fill every slot with a random unit vector (id −1), as the released TCA code starts its queue.

        A full bank of random keys gives the contrastive loss negatives from the first step on, so a run without
        in-batch negatives is never left with none. Draws in float32, then casts to the bank's dtype.

        Examples:
            >>> bank = MemoryBank(size=3, dim=4)
            >>> bank.fill_random(torch.Generator().manual_seed(0))
            >>> keys, ids = bank.filled()
            >>> tuple(keys.shape), torch.allclose(keys.norm(dim=1), torch.ones(3)), ids.tolist()
            ((3, 4), True, [-1, -1, -1])
        """
        keys = torch.randn(self.keys.shape, generator=generator, dtype=torch.float32)
        self.keys.copy_(torch.nn.functional.normalize(keys, dim=-1).to(self.keys.dtype))
        if self.frames is not None:
            self.valid.fill_(True)
        self.ids.fill_(-1)
        self.pointer.zero_()
        self.count.fill_(self.size)

    def enqueue(self, keys: Tensor, ids: Tensor | None = None, valid: Tensor | None = None) -> None:
        """Append ``keys [B, dim]`` (detached) with ``ids [B]`` (default −1); if B > size only the last ``size`` stay.

        ``keys`` must have the bank's dtype and device; ``ids`` is a long tensor. A frame bank takes
        ``keys [B, frames, dim]`` and ``valid [B, frames]`` bool (default: every frame real). Returns nothing.

        Examples:
            >>> bank = MemoryBank(size=2, dim=2)
            >>> query = torch.randn(3, 2, requires_grad=True)
            >>> bank.enqueue(query, torch.tensor([10, 11, 12]))  # B = 3 > size: the first key is dropped
            >>> keys, ids = bank.filled()
            >>> ids, torch.equal(keys, query[1:].detach()), keys.requires_grad
            (tensor([11, 12]), True, False)
            >>> bank.enqueue(torch.zeros(1, 2))  # ids default to -1 (never matches a clip id)
            >>> bank.filled()[1]
            tensor([12, -1])
        """
        check_float_tensor(keys, "keys", ndim=self.keys.ndim)
        if keys.shape[1:] != self.keys.shape[1:] or keys.dtype != self.keys.dtype:
            shape = ", ".join(str(n) for n in ("B", *self.keys.shape[1:]))
            raise ValueError(f"keys must have shape [{shape}] and dtype {self.keys.dtype}, "
                             f"got {tuple(keys.shape)} {keys.dtype}")
        if self.frames is None and valid is not None:
            raise ValueError("valid is only for a frame bank (MemoryBank(..., frames=T))")
        if self.frames is not None:
            valid = torch.ones(keys.shape[:2], dtype=torch.bool, device=keys.device) if valid is None else valid
            if not isinstance(valid, Tensor) or valid.dtype != torch.bool or valid.shape != keys.shape[:2]:
                raise ValueError(f"valid must be a bool tensor of shape {tuple(keys.shape[:2])}, got "
                                 f"{tuple(valid.shape) if isinstance(valid, Tensor) else type(valid).__name__}")
        if keys.device != self.keys.device:
            raise ValueError(f"keys must be on the bank's device {self.keys.device}, got {keys.device}")
        if ids is None:
            ids = torch.full((keys.shape[0],), -1, dtype=torch.long, device=keys.device)
        if not isinstance(ids, Tensor) or ids.shape != keys.shape[:1] or ids.dtype != torch.long:
            raise ValueError(f"ids must be a long tensor of shape [{keys.shape[0]}], got "
                             f"{tuple(ids.shape) if isinstance(ids, Tensor) else type(ids).__name__}")
        keys, ids = keys.detach()[-self.size:], ids.to(self.ids.device)[-self.size:]
        slots = (int(self.pointer) + torch.arange(keys.shape[0], device=self.keys.device)) % self.size
        self.keys[slots] = keys
        self.ids[slots] = ids
        if self.frames is not None:
            self.valid[slots] = valid.to(self.valid.device)[-self.size:]
        self.pointer.fill_((int(self.pointer) + keys.shape[0]) % self.size)
        self.count.fill_(min(int(self.count) + keys.shape[0], self.size))


@float32_compute
def contrastive_similarities(query: Tensor, positive: Tensor, bank: MemoryBank | None = None,
                             clip_ids: Tensor | None = None, in_batch: bool = True) -> tuple[Tensor, Tensor]:
    """Dot-product similarities ``[B, 1 + M]`` of L2-normalised ``query`` with its positive and negatives (TCA §3.4).

    Negatives are the other rows' positives (``in_batch``) followed by the bank's keys. ``valid [B, M]``
    drops negatives that share the anchor's ``clip_ids`` (the bank may still hold older views of it).

    Examples:
        >>> query = torch.nn.functional.normalize(torch.randn(3, 4), dim=-1)
        >>> sims, valid = contrastive_similarities(query, query)
        >>> sims.shape, torch.allclose(sims[:, 0], torch.ones(3)), valid.shape
        (torch.Size([3, 3]), True, torch.Size([3, 2]))
    """
    check_float_tensor(query, "query", ndim=2)
    check_float_tensor(positive, "positive", ndim=2)
    if query.shape != positive.shape:
        raise ValueError(f"query and positive must both be [B, D], got {tuple(query.shape)}, {tuple(positive.shape)}")
    b = query.shape[0]
    ids = torch.arange(b, device=query.device) if clip_ids is None else clip_ids.to(query.device)
    pos = (query * positive).sum(-1, keepdim=True)
    neg, neg_ids = [], []
    if in_batch and b > 1:
        off = ~torch.eye(b, dtype=torch.bool, device=query.device)
        neg.append((query @ positive.T)[off].view(b, b - 1))
        neg_ids.append(ids.expand(b, b)[off].view(b, b - 1))
    if bank is not None and int(bank.count) > 0:
        keys, key_ids = bank.filled()
        neg.append(query @ keys.to(query.dtype).T)
        neg_ids.append(key_ids.expand(b, -1))
    if not neg:
        return pos, torch.zeros(b, 0, dtype=torch.bool, device=query.device)
    neg_ids_all = torch.cat(neg_ids, dim=1)
    valid = (neg_ids_all != ids.unsqueeze(1)) | (neg_ids_all < 0)
    return torch.cat([pos, torch.cat(neg, dim=1)], dim=1), valid


def _check_sims(sims: Tensor, valid: Tensor | None, ignore: Tensor | None = None) -> Tensor:
    """Which entries of ``sims [B, 1 + M]`` take part, ``[B, 1 + M]`` bool, from ``valid`` or ``ignore`` ``[B, M]``.

    ``ignore`` (True = not a negative of that row) is the keyword every loss takes; ``valid`` is its complement,
    the flags :func:`contrastive_similarities` returns (passed positionally by the TCA trainer). One or neither.
    """
    check_float_tensor(sims, "sims", ndim=2, finite=True)
    if sims.shape[1] < 1:
        raise ValueError(f"sims must have shape [B, 1 + M] (positive in column 0), got {tuple(sims.shape)}")
    full = torch.ones_like(sims, dtype=torch.bool)
    if valid is not None and ignore is not None:
        raise ValueError("give ignore (True = not a negative of that row) or valid (its complement), not both")
    name, flags = ("ignore", ignore) if ignore is not None else ("valid", valid)
    if flags is None:
        return full
    if not isinstance(flags, Tensor) or flags.dtype != torch.bool or flags.shape != (sims.shape[0], sims.shape[1] - 1):
        raise ValueError(f"{name} must be a bool tensor of shape [{sims.shape[0]}, {sims.shape[1] - 1}] (one flag "
                         f"per negative), got " + (f"{flags.dtype} {tuple(flags.shape)}" if isinstance(flags, Tensor)
                                                   else type(flags).__name__))
    full[:, 1:] = (~flags if ignore is not None else flags).to(sims.device)
    return full


def _cross_entropy_column0(logits: Tensor, keep: Tensor, reduction: str = "mean") -> Tensor:
    """``−log softmax(logits)[:, 0]`` per row, dropped columns at −inf, reduced (an empty batch's mean is 0)."""
    if logits.shape[0] == 0:
        return logits[:, 0] * 0.0 if reduction == "none" else (logits * 0.0).sum()
    logits = logits.masked_fill(~keep, -math.inf)
    return reduce_values(torch.logsumexp(logits, dim=1) - logits[:, 0], reduction)


class MemoryBankInfoNCE(nn.Module):
    """InfoNCE against a memory bank (TCA Eq. 3): ``−log e^{s_p/τ} / (e^{s_p/τ} + Σ_j e^{s_n^j/τ})``, mean over rows.

    ``temperature`` is τ, by default 1/256: the value TCA's Table 1c tunes InfoNCE to (the scale of Circle loss's
    γ = 256); MoCo's τ = 0.07, the paper's starting point, trails it there. ``reduction`` ``"mean"`` (over rows),
    ``"sum"`` or ``"none"`` (``[B]``).
    :class:`hapref.losses.InfoNCE` is the score-matrix form (HAP-VR's L_base).

    Examples:
        >>> sims = torch.tensor([[0.9, 0.1, -0.3]])  # positive first, then the negatives
        >>> round(MemoryBankInfoNCE(temperature=0.1)(sims).item(), 6)  # log(1 + e^-8 + e^-12)
        0.000341
    """

    @renamed_keywords(tau="temperature")
    def __init__(self, temperature: float = 1 / 256, reduction: str = "mean") -> None:
        super().__init__()
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.temperature = temperature
        self.reduction = check_reduction(reduction)

    def logits(self, sims: Tensor) -> Tensor:
        """The softmax logits ``s/τ`` of Eq. 3, same shape and dtype as ``sims [B, 1 + M]``.

        The loss is the cross-entropy of these logits with target column 0.

        Examples:
            >>> loss = MemoryBankInfoNCE(temperature=0.1)
            >>> sims = torch.tensor([[0.9, 0.1, -0.3], [0.2, 0.5, 0.1]])
            >>> loss.logits(sims)
            tensor([[ 9.,  1., -3.],
                    [ 2.,  5.,  1.]])
            >>> target = torch.zeros(2, dtype=torch.long)
            >>> torch.allclose(loss(sims), torch.nn.functional.cross_entropy(loss.logits(sims), target))
            True
        """
        return sims / self.temperature

    @renamed_keywords(mask="ignore")
    @float32_compute
    def forward(self, sims: Tensor, valid: Tensor | None = None, ignore: Tensor | None = None) -> Tensor:
        """Mean loss over the rows of ``sims [B, 1 + M]`` (finite floats, positive in column 0) with optional
        ``ignore [B, M]`` bool (True = not a negative of that row) or its complement ``valid [B, M]`` (False = not
        a negative; the flags of :func:`contrastive_similarities`); 0-d (``[B]`` with ``reduction="none"``),
        float32 for half-precision input.

        Examples:
            >>> sims = torch.tensor([[0.9, 0.1, -0.2], [0.5, 0.6, 0.0]])
            >>> MemoryBankInfoNCE(temperature=0.1)(sims).shape
            torch.Size([])
            >>> loss = MemoryBankInfoNCE(0.1)
            >>> bool(loss(sims, torch.tensor([[True, True], [False, True]])) < loss(sims))  # fewer negatives
            True
            >>> MemoryBankInfoNCE(0.1, reduction="none")(sims).shape
            torch.Size([2])
        """
        keep = _check_sims(sims, valid, ignore)
        return _cross_entropy_column0(self.logits(sims), keep, self.reduction)


class MemoryBankCircle(nn.Module):
    """Circle loss with one positive and many negatives, TCA's memory-bank form (TCA Eq. 4, Sun et al. 2020).

    ``−log e^{γα_p(s_p−Δ_p)} / (e^{γα_p(s_p−Δ_p)} + Σ_j e^{γα_n^j(s_n^j−Δ_n)})`` with optima O_p = 1+m,
    O_n = −m, weights ``α_p = [O_p − s_p]_+`` and ``α_n = [s_n − O_n]_+`` (detached, as in Circle loss),
    margins Δ_p = 1−m, Δ_n = m. ``margin`` is the relaxation margin m, ``scale`` the scale factor γ; TCA
    uses m = 0.25, γ = 256. ``reduction`` ``"mean"`` (over rows), ``"sum"`` or ``"none"`` (``[B]``).
    :class:`hapref.losses.Circle` is the same loss on a score matrix with any number of positives per row
    (HAP-VR Table 2); this class was called ``CircleLoss`` before (the old name warns).

    ``released=True`` reproduces the released code (the released TCA code, https://github.com/xwen99/temporal_context_aggregation): the positive-type α and Δ are
    written to row 0 of the logit matrix instead of column 0, so row 0 treats every entry as a positive and
    all other rows treat their positive like a negative (α = [s_p + m]_+, Δ = m).

    The similarities are meant to be cosines: the gradient γ·α grows with ``|s|``, and for float16 similarities
    beyond ``|s|`` ≈ 1e2 it exceeds float16's range and comes back ±inf (never NaN, so a loss scaler sees it).

    Examples:
        >>> sims = torch.tensor([[0.9, 0.1, -0.3]])
        >>> MemoryBankCircle(margin=0.25, scale=256.0)(sims).item() < 1e-3  # well ranked: almost no loss
        True
    """

    @renamed_keywords(m="margin", gamma="scale")
    def __init__(self, margin: float = 0.25, scale: float = 256.0, released: bool = False,
                 reduction: str = "mean") -> None:
        super().__init__()
        if not 0.0 <= margin < 1.0 or scale <= 0:
            raise ValueError(f"margin must lie in [0, 1) and scale be > 0, got margin={margin}, scale={scale}")
        self.margin, self.scale, self.released = margin, scale, released
        self.reduction = check_reduction(reduction)

    def logits(self, sims: Tensor) -> Tensor:
        """The softmax logits ``γ α (s − Δ)`` of Eq. 4 (α detached), same shape and dtype as ``sims [B, 1 + M]``.

        The loss is the cross-entropy of these logits with target column 0.

        Examples:
            >>> loss = MemoryBankCircle(margin=0.25, scale=256.0)
            >>> sims = torch.tensor([[0.9, 0.1, -0.3], [0.2, 0.5, 0.1]])
            >>> # positive: 256 * (1.25 - 0.9) * (0.9 - 0.75); negatives: 256 * [s + 0.25]_+ * (s - 0.25)
            >>> [round(v, 2) for v in loss.logits(sims)[0].tolist()]  # -0.3 < -m: weight α_n = 0
            [13.44, -13.44, -0.0]
            >>> target = torch.zeros(2, dtype=torch.long)
            >>> torch.allclose(loss(sims), torch.nn.functional.cross_entropy(loss.logits(sims), target))
            True
        """
        m = self.margin
        positive_type = torch.zeros_like(sims, dtype=torch.bool)
        if self.released:
            positive_type[:1] = True
        else:
            positive_type[:, 0] = True
        alpha = torch.where(positive_type, (1 + m - sims).clamp_min(0), (sims + m).clamp_min(0)).detach()
        delta = torch.where(positive_type, sims.new_tensor(1 - m), sims.new_tensor(m))
        return self.scale * alpha * (sims - delta)

    @renamed_keywords(mask="ignore")
    @float32_compute
    def forward(self, sims: Tensor, valid: Tensor | None = None, ignore: Tensor | None = None) -> Tensor:
        """Mean loss over the rows of ``sims [B, 1 + M]`` (finite floats, positive in column 0) with optional
        ``ignore [B, M]`` bool (True = not a negative of that row) or its complement ``valid [B, M]`` (False = not
        a negative; the flags of :func:`contrastive_similarities`); 0-d (``[B]`` with ``reduction="none"``),
        float32 for half-precision input.

        Examples:
            >>> well_ranked, mis_ranked = torch.tensor([[0.9, 0.1, -0.2]]), torch.tensor([[0.1, 0.9, -0.2]])
            >>> bool(MemoryBankCircle()(well_ranked) < MemoryBankCircle()(mis_ranked))
            True
        """
        keep = _check_sims(sims, valid, ignore)
        return _cross_entropy_column0(self.logits(sims), keep, self.reduction)


class HardestTripletLoss(nn.Module):
    """Triplet loss with the hardest negative of each row, the pair-wise baseline of TCA Table 1d.

    ``mean_rows [max_j s_n^j − s_p + margin]_+`` over the valid negatives of each row (rows without one give
    0); same ``sims [B, 1 + M]`` / ``valid [B, M]`` layout as :class:`MemoryBankInfoNCE`. TCA §4.2 compares
    its memory-bank losses with triplet training and hard-negative mining as in DML (Kordopatis-Zilos et al.
    2017); the margin is a free parameter (not stated in the TCA paper). ``reduction`` ``"mean"`` (over rows),
    ``"sum"`` or ``"none"`` (``[B]``).

    Examples:
        >>> sims = torch.tensor([[0.8, 0.75, 0.1], [0.9, -0.2, 0.3]])
        >>> round(HardestTripletLoss(margin=0.1)(sims).item(), 4)  # ([0.75 - 0.8 + 0.1]_+ + 0) / 2
        0.025
    """

    def __init__(self, margin: float = 0.1, reduction: str = "mean") -> None:
        super().__init__()
        if margin < 0:
            raise ValueError(f"margin must be >= 0, got {margin}")
        self.margin = margin
        self.reduction = check_reduction(reduction)

    @renamed_keywords(mask="ignore")
    @float32_compute
    def forward(self, sims: Tensor, valid: Tensor | None = None, ignore: Tensor | None = None) -> Tensor:
        """Mean hinge over the rows of ``sims [B, 1 + M]`` (finite floats, positive in column 0) with optional
        ``ignore [B, M]`` bool (True = not a negative of that row) or its complement ``valid [B, M]``; 0-d (``[B]``
        with ``reduction="none"``), float32 for half-precision input (a zero on the graph when no row has a negative).

        Examples:
            >>> sims, loss = torch.tensor([[0.8, 0.75, 0.1]]), HardestTripletLoss(margin=0.1)
            >>> round(loss(sims).item(), 4), loss(sims, valid=torch.tensor([[False, True]])).item()  # 0.75 left out
            (0.05, 0.0)
        """
        keep = _check_sims(sims, valid, ignore)
        sims = at_least_float32(sims)
        if sims.shape[0] == 0 or sims.shape[1] < 2:
            return sims[:, 0] * 0.0 if self.reduction == "none" else (sims * 0.0).sum()
        hardest = sims[:, 1:].masked_fill(~keep[:, 1:], -math.inf).amax(dim=1)
        hinge = (hardest - sims[:, 0] + self.margin).clamp_min(0)
        return reduce_values(torch.where(keep[:, 1:].any(dim=1), hinge, torch.zeros_like(hinge)), self.reduction)


def contrastive_loss(name: str, **hyperparameters) -> nn.Module:
    """``"infonce"`` -> :class:`MemoryBankInfoNCE`, ``"circle"`` -> :class:`MemoryBankCircle`,
    ``"triplet"`` -> :class:`HardestTripletLoss` (TCA Table 1c/1d), built with ``hyperparameters``.

    The keywords are the class's own: ``temperature`` (InfoNCE), ``margin`` and ``scale`` (Circle),
    ``margin`` (triplet), and ``reduction`` for any of them.

    Examples:
        >>> [type(contrastive_loss(n)).__name__ for n in ("infonce", "circle", "triplet")]
        ['MemoryBankInfoNCE', 'MemoryBankCircle', 'HardestTripletLoss']
        >>> contrastive_loss("circle", margin=0.3, scale=64.0).scale
        64.0
    """
    losses = {"infonce": MemoryBankInfoNCE, "circle": MemoryBankCircle, "triplet": HardestTripletLoss}
    if name not in losses:
        raise ValueError(f"loss must be 'infonce', 'circle' or 'triplet', got {name!r}")
    return losses[name](**hyperparameters)

