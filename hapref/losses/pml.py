"""hapref's embedding losses with pytorch-metric-learning's call (PML).

PML calls a loss as ``loss(embeddings, labels, indices_tuple=None, ref_emb=None, ref_labels=None)``;
hapref's ranking losses take a score matrix, ``loss(scores, relevance, ignore)``. Each class here wraps the
score-matrix loss of the same name in :mod:`hapref.losses` and takes PML's arguments, so a PML training loop
switches to QuadLinear-AP by changing one line::

    loss_fn = hapref.losses.pml.QuadLinearAP()          # was: pytorch_metric_learning.losses.FastAPLoss()
    loss = loss_fn(embeddings, labels, miner(embeddings, labels))

Scores are cosine similarities of the L2-normalised embeddings, relevance is "same label", and each
embedding's pair with itself is left out (:func:`hapref.losses.embedding_batch`). A PML miner's output
restricts the pairs: ``(anchors, positives, negatives)`` triplets keep the pairs (a, p) and (a, n);
``(anchors1, positives, anchors2, negatives)`` keep (a1, p) and (a2, n). Every other pair is ignored, and
a query left with no positive contributes nothing (the mean is over the queries that keep one).

Where the two libraries define the same loss they agree under these settings (``tests/test_api.py``,
``tests/test_pml.py``): FastAP (``num_bins`` equal); Contrastive with PML's ``CosineSimilarity()`` distance,
``MeanReducer()`` and explicit ``pos_margin``/``neg_margin``; Triplet with ``TripletMarginLoss(distance=
CosineSimilarity(), reducer=MeanReducer())``; Circle with PML's ``m`` = hapref's ``margin`` and ``gamma`` = ``scale``;
all on class-balanced batches. hapref's keywords are ``temperature`` (PML and the papers: τ), ``margin`` and
``scale`` (γ); every class takes ``reduction="mean" | "sum" | "none"`` ("none": one value per query).
PML's ``SmoothAPLoss`` ranks each query among its own positives including itself (hapref's ``keep_self=True``)
and, because of how it reshapes the batch, is only correct for batches of equal, contiguous class blocks.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from hapref.losses.blackbox_ap import BlackBoxAP as _BlackBoxAP
from hapref.losses.embeddings import embedding_batch
from hapref.losses.histogram_ap import FastAP as _FastAP, ListwiseAP as _ListwiseAP
from hapref.losses.infonce import InfoNCE as _InfoNCE
from hapref.losses.pair_losses import Circle as _Circle, Contrastive as _Contrastive, Triplet as _Triplet
from hapref.losses.pointwise import MAE as _MAE, MSE as _MSE
from hapref.losses.quadlinear_ap import QuadLinearAP as _QuadLinearAP
from hapref.losses.smooth_ap import SmoothAP as _SmoothAP
from hapref.utils import float32_compute

__all__ = ["BlackBoxAP", "Circle", "Contrastive", "FastAP", "InfoNCE", "ListwiseAP", "MAE", "MSE", "PMLLoss",
           "QuadLinearAP", "SmoothAP", "Triplet", "mined_pairs"]


def _index(t: object, name: str, size: int, device: torch.device) -> Tensor:
    if not isinstance(t, Tensor) or t.ndim != 1 or t.dtype.is_floating_point or t.dtype == torch.bool:
        raise ValueError(f"indices_tuple: {name} must be a 1-D integer tensor (a PML miner's output), got "
                         f"{type(t).__name__ if not isinstance(t, Tensor) else f'{t.dtype} {tuple(t.shape)}'}")
    if t.numel() and (int(t.min()) < 0 or int(t.max()) >= size):
        raise ValueError(f"indices_tuple: {name} must index [0, {size}), got values in [{int(t.min())}, {int(t.max())}]")
    return t.to(device)


def mined_pairs(indices_tuple: tuple[Tensor, ...], n: int, m: int, device: torch.device | str = "cpu") -> Tensor:
    """The ``[n, m]`` bool mask of the pairs a PML miner selected (triplets or positive/negative pairs).

    Examples:
        >>> triplets = (torch.tensor([0]), torch.tensor([1]), torch.tensor([3]))
        >>> mined_pairs(triplets, 4, 4).nonzero().tolist()
        [[0, 1], [0, 3]]
        >>> pairs = (torch.tensor([0, 2]), torch.tensor([1, 3]), torch.tensor([1]), torch.tensor([2]))
        >>> mined_pairs(pairs, 4, 4).nonzero().tolist()
        [[0, 1], [1, 2], [2, 3]]
    """
    if not isinstance(indices_tuple, (tuple, list)) or len(indices_tuple) not in (3, 4):
        raise ValueError("indices_tuple must be a PML miner's output: (anchors, positives, negatives) or "
                         f"(anchors1, positives, anchors2, negatives), got {type(indices_tuple).__name__}"
                         + (f" of length {len(indices_tuple)}" if isinstance(indices_tuple, (tuple, list)) else ""))
    device = torch.device(device)
    keep = torch.zeros(n, m, dtype=torch.bool, device=device)
    if len(indices_tuple) == 3:
        a, p, neg = (_index(t, name, size, device) for t, name, size in
                     zip(indices_tuple, ("anchors", "positives", "negatives"), (n, m, m)))
        if not a.shape == p.shape == neg.shape:
            raise ValueError(f"indices_tuple: anchors, positives and negatives must have one length, got "
                             f"{a.numel()}, {p.numel()}, {neg.numel()}")
        keep[a, p] = True
        keep[a, neg] = True
    else:
        a1, p, a2, neg = (_index(t, name, size, device) for t, name, size in
                          zip(indices_tuple, ("anchors1", "positives", "anchors2", "negatives"), (n, m, n, m)))
        if a1.shape != p.shape or a2.shape != neg.shape:
            raise ValueError(f"indices_tuple: anchors1/positives and anchors2/negatives must pair up, got lengths "
                             f"{a1.numel()}/{p.numel()} and {a2.numel()}/{neg.numel()}")
        keep[a1, p] = True
        keep[a2, neg] = True
    return keep


class PMLLoss(nn.Module):
    """A score-matrix loss of :mod:`hapref.losses` called PML's way (base of this module's classes).

    Examples:
        >>> from hapref.losses import QuadLinearAP as ScoreMatrixLoss
        >>> loss = PMLLoss(ScoreMatrixLoss())
        >>> emb, labels = torch.randn(8, 4, generator=torch.Generator().manual_seed(0)), torch.arange(4).repeat(2)
        >>> bool(loss(emb, labels) == ScoreMatrixLoss().on_embeddings(emb, labels))
        True
    """

    def __init__(self, loss: nn.Module) -> None:
        super().__init__()
        self.loss = loss

    @float32_compute
    def forward(self, embeddings: Tensor, labels: Tensor, indices_tuple: tuple[Tensor, ...] | None = None,
                ref_emb: Tensor | None = None, ref_labels: Tensor | None = None) -> Tensor:
        """The loss of ``embeddings [N, D]`` with class ids ``labels [N]``; see the module docstring.

        Args:
            embeddings: ``[N, D]`` float queries (normalised here).
            labels: ``[N]`` integer class ids.
            indices_tuple: optional PML miner output restricting the pairs (triplets or pairs).
            ref_emb, ref_labels: optional ``[M, D]`` / ``[M]`` candidates (by default the batch ranks itself).

        Returns:
            0-d tensor.

        Examples:
            >>> loss = QuadLinearAP()
            >>> emb = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
            >>> float(loss(emb, torch.tensor([0, 0, 1, 1])))  # each query's class mate ranks first
            0.0
        """
        scores, relevance, ignore = embedding_batch(embeddings, labels, ref_emb, ref_labels)
        if indices_tuple is not None:
            keep = mined_pairs(indices_tuple, *scores.shape, device=scores.device)
            ignore = ~keep if ignore is None else ignore | ~keep
        return self.loss(scores, relevance, ignore)

    def extra_repr(self) -> str:
        return f"wraps {self.loss!r}"


def _pml_class(base: type) -> type:
    name = base.__name__
    doc = f"""{name} called PML's way: ``loss(embeddings, labels, indices_tuple=None, ref_emb=None, ref_labels=None)``.

    Takes the arguments of :class:`hapref.losses.{name}` (the score-matrix loss it wraps, see there for the
    equation and the keywords, ``reduction`` included) and computes it on cosine scores of the embeddings; see
    :mod:`hapref.losses.pml`.

    Examples:
        >>> from hapref.losses.pml import {name}
        >>> emb = torch.randn(8, 4, generator=torch.Generator().manual_seed(0), requires_grad=True)
        >>> loss = {name}()(emb, torch.arange(4).repeat(2))
        >>> loss.backward()
        >>> bool(torch.isfinite(loss)), emb.grad.shape
        (True, torch.Size([8, 4]))
    """

    def __init__(self, *args, **kwargs) -> None:
        PMLLoss.__init__(self, base(*args, **kwargs))

    cls = type(name, (PMLLoss,), {"__init__": __init__, "__doc__": doc, "__module__": __name__})
    return cls


QuadLinearAP = _pml_class(_QuadLinearAP)
SmoothAP = _pml_class(_SmoothAP)
FastAP = _pml_class(_FastAP)
ListwiseAP = _pml_class(_ListwiseAP)
BlackBoxAP = _pml_class(_BlackBoxAP)
Contrastive = _pml_class(_Contrastive)
Triplet = _pml_class(_Triplet)
Circle = _pml_class(_Circle)
MAE = _pml_class(_MAE)
MSE = _pml_class(_MSE)
InfoNCE = _pml_class(_InfoNCE)
