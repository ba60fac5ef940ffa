"""hapref's embedding losses with pytorch-metric-learning's call and, where PML has the loss, its defaults.

PML calls a loss as ``loss(embeddings, labels, indices_tuple=None, ref_emb=None, ref_labels=None)``;
hapref's ranking losses take a score matrix, ``loss(scores, relevance, ignore)``. The classes here take PML's
call, so a PML training loop switches loss by changing one line::

    loss_fn = hapref.losses.pml.QuadLinearAP()          # was: pytorch_metric_learning.losses.FastAPLoss()
    loss = loss_fn(embeddings, labels, miner(embeddings, labels))

**Losses PML also has** give PML's numbers with PML's defaults (``tests/test_pml.py`` compares values and
gradients with pytorch-metric-learning 2.9, with and without miners):

=============================  ==============================================  ===================================
hapref.losses.pml              pytorch_metric_learning.losses                  defaults (both)
=============================  ==============================================  ===================================
``SmoothAP()``                 ``SmoothAPLoss()``                              τ 0.01, cosine, ``keep_self=True``
``FastAP()``                   ``FastAPLoss()``                                10 bins, squared Euclidean
``Contrastive()``              ``ContrastiveLoss()``                           margins 0 / 1, Euclidean, avg non-zero
``Triplet()``                  ``TripletMarginLoss()``                         margin 0.05, Euclidean, avg non-zero
``Circle()``                   ``CircleLoss()``                                m 0.4, γ 80, cosine, avg non-zero
``InfoNCE()`` = ``NTXent()``   ``NTXentLoss()``                                τ 0.07, cosine, mean over pos pairs
=============================  ==============================================  ===================================

The distances are those of L2-normalised embeddings: ``distance="cosine"`` (PML's ``CosineSimilarity()``),
``"euclidean"`` (``LpDistance()``) or ``"squared_euclidean"`` (``LpDistance(power=2)``); PML's distance
objects with these settings are accepted too. ``reduction`` is hapref's name for PML's reducer: ``"mean"``
(``MeanReducer``), ``"avg_nonzero"`` (``AvgNonZeroReducer``: the mean over the non-zero terms), ``"sum"``
(``SumReducer``) or ``"none"`` (the terms themselves); ``reducer=`` takes those four PML objects. Another
distance or reducer raises a ``TypeError`` that says the hapref way (scores of your own into the score-matrix
losses of :mod:`hapref.losses`, or ``reduction="none"`` and weights of your own). hapref's keywords are
``temperature`` (τ), ``margin`` and ``scale`` (PML's ``m`` and ``gamma`` of Circle: a ``TypeError`` names them).

A miner's output means what it means in PML: Contrastive, Circle and InfoNCE keep the mined pairs (a triplet
``(a, p, n)`` gives the pairs (a, p) and (a, n); PML's pair losses count a pair mined twice twice, Circle once),
Triplet keeps the mined triplets (mined pairs give every (a, p, n) whose pairs share the anchor), and the two AP
losses PML has (SmoothAP, FastAP) rank every pair but weigh each query by how often it appears in the mined
tuple, divided by the largest count (PML's ``convert_to_weights``). A mined tuple that leaves nothing to learn
from (no pair, or no positive or no negative pair) warns once per loss object.

Two PML behaviours are not copied: its ``SmoothAPLoss`` reshapes the batch into blocks and is only right when
the batch is contiguous class blocks with as many classes as items per class (hapref's :class:`SmoothAP` is
right on every batch and equals PML's on those), and its pair losses return 0 when every mined list holds at
most one index (hapref computes the loss of that one pair).

**Losses PML lacks** (QuadLinearAP, ListwiseAP, BlackBoxAP, MAE, MSE) take the papers' defaults, the scores
are cosine similarities, each embedding's pair with itself is left out unless ``keep_self=True``
(:func:`hapref.losses.embedding_batch`), and a miner's output restricts the pairs that enter the ranking
(:func:`mined_pairs`; a query left with no positive contributes nothing). The score-matrix losses of
:mod:`hapref.losses` keep the papers' defaults (Circle m 0.25 / γ 256, InfoNCE τ 0.03, ...).
"""

from __future__ import annotations

import os
import sys
import warnings

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hapref.losses._base import gather_positives
from hapref.losses.blackbox_ap import BlackBoxAP as _BlackBoxAP
from hapref.losses.embeddings import embedding_batch
from hapref.losses.histogram_ap import FastAP as _FastAP, ListwiseAP as _ListwiseAP
from hapref.losses.pair_losses import Circle as _Circle
from hapref.losses.pointwise import MAE as _MAE, MSE as _MSE
from hapref.losses.quadlinear_ap import QuadLinearAP as _QuadLinearAP
from hapref.losses.smooth_ap import SmoothAP as _SmoothAP
from hapref.similarity.pairwise import l2_normalize
from hapref.utils import float32_compute
from hapref.validation import renamed_keywords

__all__ = ["BlackBoxAP", "Circle", "Contrastive", "FastAP", "InfoNCE", "ListwiseAP", "MAE", "MSE", "NTXent",
           "PMLLoss", "QuadLinearAP", "SmoothAP", "Triplet", "mined_pairs"]

_REDUCERS = {"MeanReducer": "mean", "AvgNonZeroReducer": "avg_nonzero", "SumReducer": "sum",
             "DoNothingReducer": "none"}
_DISTANCES = ("cosine", "euclidean", "squared_euclidean")
_INTERNAL = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))), os.path.dirname(torch.__file__))


def _index(t: object, name: str, size: int, device: torch.device) -> Tensor:
    if not isinstance(t, Tensor) or t.ndim != 1 or t.dtype.is_floating_point or t.dtype == torch.bool:
        raise ValueError(f"indices_tuple: {name} must be a 1-D integer tensor (a PML miner's output), got "
                         f"{type(t).__name__ if not isinstance(t, Tensor) else f'{t.dtype} {tuple(t.shape)}'}")
    if t.numel() and (int(t.min()) < 0 or int(t.max()) >= size):
        raise ValueError(f"indices_tuple: {name} must index [0, {size}), got values in [{int(t.min())}, {int(t.max())}]")
    return t.to(device=device, dtype=torch.long)


def _mined(indices_tuple: object, n: int, m: int, device: torch.device) -> tuple[Tensor, ...]:
    """A miner's output checked: 3 (anchors, positives, negatives) or 4 (anchors1, positives, anchors2,
    negatives) 1-D integer tensors of matching lengths, indexing the queries (n) and the candidates (m)."""
    if not isinstance(indices_tuple, (tuple, list)) or len(indices_tuple) not in (3, 4):
        raise ValueError("indices_tuple must be a PML miner's output: (anchors, positives, negatives) or "
                         f"(anchors1, positives, anchors2, negatives), got {type(indices_tuple).__name__}"
                         + (f" of length {len(indices_tuple)}" if isinstance(indices_tuple, (tuple, list)) else ""))
    if len(indices_tuple) == 3:
        a, p, neg = (_index(t, name, size, device) for t, name, size in
                     zip(indices_tuple, ("anchors", "positives", "negatives"), (n, m, m)))
        if not a.shape == p.shape == neg.shape:
            raise ValueError(f"indices_tuple: anchors, positives and negatives must have one length, got "
                             f"{a.numel()}, {p.numel()}, {neg.numel()}")
        return a, p, neg
    a1, p, a2, neg = (_index(t, name, size, device) for t, name, size in
                      zip(indices_tuple, ("anchors1", "positives", "anchors2", "negatives"), (n, m, n, m)))
    if a1.shape != p.shape or a2.shape != neg.shape:
        raise ValueError(f"indices_tuple: anchors1/positives and anchors2/negatives must pair up, got lengths "
                         f"{a1.numel()}/{p.numel()} and {a2.numel()}/{neg.numel()}")
    return a1, p, a2, neg


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
    device = torch.device(device)
    a1, p, a2, neg = _as_pairs(_mined(indices_tuple, n, m, device))
    keep = torch.zeros(n, m, dtype=torch.bool, device=device)
    keep[a1, p] = True
    keep[a2, neg] = True
    return keep


def _as_pairs(mined: tuple[Tensor, ...]) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """PML's ``convert_to_pairs``: triplets (a, p, n) become the pairs (a, p) and (a, n)."""
    if len(mined) == 3:
        a, p, neg = mined
        return a, p, a, neg
    return mined  # type: ignore[return-value]


def _reduction(reduction: str, reducer: object, allowed: tuple[str, ...], owner: str) -> str:
    """hapref's ``reduction`` from itself or from a PML reducer object (mapped by its class)."""
    if reducer is not None:
        name = type(reducer).__name__
        if name not in _REDUCERS or _REDUCERS[name] not in allowed:
            raise TypeError(f"{owner}: reducer={name}() has no hapref counterpart here; hapref's keyword is "
                            f"reduction= {' | '.join(map(repr, allowed))} (PML's "
                            + ", ".join(k for k, v in _REDUCERS.items() if v in allowed)
                            + "); for other weights take reduction='none' and reduce the terms yourself")
        reduction = _REDUCERS[name]
    if not isinstance(reduction, str) or reduction not in allowed:
        listed = "'mean', 'sum' or 'none'" + (" (or 'avg_nonzero', PML's AvgNonZeroReducer)"
                                              if "avg_nonzero" in allowed else "")
        raise ValueError(f"reduction must be {listed}, got {reduction!r}")
    return reduction


def _distance(distance: object, allowed: tuple[str, ...], owner: str) -> str:
    """``"cosine"``, ``"euclidean"`` or ``"squared_euclidean"`` from itself or from a PML distance object."""
    name = distance
    if not isinstance(distance, str):
        cls = type(distance).__name__
        normalized = getattr(distance, "normalize_embeddings", None) is True and getattr(distance, "p", None) == 2
        power = getattr(distance, "power", None)
        name = {("CosineSimilarity", 1): "cosine", ("LpDistance", 1): "euclidean",
                ("LpDistance", 2): "squared_euclidean"}.get((cls, power)) if normalized else None
        if name is None:
            settings = ", ".join(f"{k}={getattr(distance, k, None)}" for k in ("normalize_embeddings", "p", "power"))
            name = f"{cls}({settings})"
    if name not in allowed:
        pml_names = {"cosine": "CosineSimilarity()", "euclidean": "LpDistance()",
                     "squared_euclidean": "LpDistance(power=2)"}
        raise TypeError(f"{owner}: distance={name!r} is not supported; hapref computes it on L2-normalised embeddings "
                        f"with distance= {' | '.join(map(repr, allowed))} (PML's "
                        f"{', '.join(pml_names[a] for a in allowed)}); for another measure compute a score "
                        f"matrix yourself and call the score-matrix loss hapref.losses.{owner}")
    return name  # type: ignore[return-value]


def _relation(embeddings: Tensor, labels: Tensor, ref_emb: Tensor | None, ref_labels: Tensor | None,
              distance: str, keep_self: bool = False) -> tuple[Tensor, Tensor, Tensor]:
    """PML's "distance matrix" ``[N, M]`` (cosine similarity or the Euclidean distance of the normalised
    embeddings, squared or not), relevance and the usable pairs (self-pairs out unless ``keep_self``)."""
    scores, relevance, ignore = embedding_batch(embeddings, labels, ref_emb, ref_labels, keep_self)
    valid = torch.ones_like(relevance) if ignore is None else ~ignore
    if distance == "cosine":
        return scores, relevance, valid
    work = scores.dtype
    x = l2_normalize(embeddings.to(work))
    r = x if ref_emb is None else l2_normalize(ref_emb.to(device=x.device, dtype=work))
    dist = torch.cdist(x, r)
    return (dist.square() if distance == "squared_euclidean" else dist), relevance, valid


class _WarnOnce:
    """Mixin: one ``UserWarning`` per loss object when a miner's output leaves nothing to learn from."""

    _warned = False

    def _warn_empty(self, what: str, consequence: str) -> None:
        if not self._warned:
            self._warned = True
            # point at the caller's line, past hapref's and torch's frames
            frame, level = sys._getframe(0), 1
            while frame is not None and frame.f_code.co_filename.startswith(_INTERNAL):
                frame, level = frame.f_back, level + 1
            warnings.warn(f"{type(self).__name__}: the miner's indices_tuple holds {what}, so {consequence} "
                          "(as in pytorch-metric-learning); shown once per loss object", UserWarning, stacklevel=level)


def _zero(reference: Tensor) -> Tensor:
    """A 0-d zero still attached to ``reference``'s graph."""
    return reference[:0].sum()


class PMLLoss(_WarnOnce, nn.Module):
    """A score-matrix loss of :mod:`hapref.losses` called PML's way, a miner restricting the pairs.

    The base of this module's classes for the losses PML lacks: scores are cosine similarities, relevance is
    "same label", the self-pair is left out unless ``keep_self`` and a miner's pairs restrict the ranking.

    Examples:
        >>> from hapref.losses import QuadLinearAP as ScoreMatrixLoss
        >>> loss = PMLLoss(ScoreMatrixLoss())
        >>> emb, labels = torch.randn(8, 4, generator=torch.Generator().manual_seed(0)), torch.arange(4).repeat(2)
        >>> bool(loss(emb, labels) == ScoreMatrixLoss().on_embeddings(emb, labels))
        True
    """

    def __init__(self, loss: nn.Module, keep_self: bool = False) -> None:
        super().__init__()
        self.loss, self.keep_self = loss, bool(keep_self)

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
            0-d tensor (``[N]`` with ``reduction="none"``).

        Examples:
            >>> loss = QuadLinearAP()
            >>> emb = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
            >>> float(loss(emb, torch.tensor([0, 0, 1, 1])))  # each query's class mate ranks first
            0.0
        """
        scores, relevance, ignore = embedding_batch(embeddings, labels, ref_emb, ref_labels, self.keep_self)
        if indices_tuple is not None:
            keep = mined_pairs(indices_tuple, *scores.shape, device=scores.device)
            if not (keep & relevance).any():
                self._warn_empty("no positive pair" if keep.any() else "no pair", "the loss is 0 for this batch")
            elif not (keep & ~relevance).any():
                self._warn_empty("no negative pair", "the loss sees positive pairs only (an AP loss is 0)")
            ignore = ~keep if ignore is None else ignore | ~keep
        return self.loss(scores, relevance, ignore)

    def extra_repr(self) -> str:
        return f"wraps {self.loss!r}" + (", keep_self=True" if self.keep_self else "")


def _pml_docs(name: str) -> str:
    return f"""
    Examples:
        >>> from hapref.losses.pml import {name}
        >>> emb = torch.randn(8, 4, generator=torch.Generator().manual_seed(0), requires_grad=True)
        >>> loss = {name}()(emb, torch.arange(4).repeat_interleave(2))
        >>> loss.backward()
        >>> bool(torch.isfinite(loss)), emb.grad.shape
        (True, torch.Size([8, 4]))
    """


class QuadLinearAP(PMLLoss):
    """QuadLinear-AP (HAP-VR Eq. 11) called PML's way; see :class:`hapref.losses.QuadLinearAP` for the keywords.
    """

    def __init__(self, delta: float = 0.18, p: float = 1.0, max_elements: int = 2**25, reduction: str = "mean",
                 keep_self: bool = False) -> None:
        super().__init__(_QuadLinearAP(delta, p, max_elements, reduction), keep_self)


class ListwiseAP(PMLLoss):
    """DIR's listwise AP called PML's way; see :class:`hapref.losses.ListwiseAP` for the keywords.
    """

    def __init__(self, num_bins: int = 25, score_range: tuple[float, float] = (0.0, 1.0), reduction: str = "mean",
                 keep_self: bool = False) -> None:
        super().__init__(_ListwiseAP(num_bins, score_range, reduction), keep_self)


class BlackBoxAP(PMLLoss):
    """Blackbox AP called PML's way; see :class:`hapref.losses.BlackBoxAP` for the keywords.
    """

    def __init__(self, lambda_: float = 4.0, reduction: str = "mean", keep_self: bool = False) -> None:
        super().__init__(_BlackBoxAP(lambda_, reduction), keep_self)


class MAE(PMLLoss):
    """Mean absolute error of the cosine scores to 0/1 relevance called PML's way (:class:`hapref.losses.MAE`).
    """

    def __init__(self, reduction: str = "mean", keep_self: bool = False) -> None:
        super().__init__(_MAE(reduction=reduction), keep_self)


class MSE(PMLLoss):
    """Mean squared error of the cosine scores to 0/1 relevance called PML's way (:class:`hapref.losses.MSE`).
    """

    def __init__(self, reduction: str = "mean", keep_self: bool = False) -> None:
        super().__init__(_MSE(reduction=reduction), keep_self)


# ------------------------------------------------------------------ losses PML also has: PML's conventions


class _WeightedAP(PMLLoss):
    """An AP loss PML also has: every pair ranked, a miner weighs the queries (PML's ``convert_to_weights``)."""

    def _weighted(self, embeddings: Tensor, labels: Tensor, indices_tuple: tuple[Tensor, ...] | None,
                  ref_emb: Tensor | None, ref_labels: Tensor | None) -> Tensor:
        scores, relevance, ignore = embedding_batch(embeddings, labels, ref_emb, ref_labels, self.keep_self)
        per_query = self.loss(scores, relevance, ignore)                    # [N], 0 without a positive
        has_positive = (relevance if ignore is None else relevance & ~ignore).any(dim=1)
        if indices_tuple is not None:
            mined = _mined(indices_tuple, *scores.shape, device=scores.device)
            # with a reference set only the anchors are queries of this batch (PML's using_ref)
            used = torch.cat(mined if ref_emb is None else mined[::2] if len(mined) == 4 else mined[:1])
            if used.numel() == 0:
                self._warn_empty("no pair", "every query weighs 1")
            else:
                counts = torch.bincount(used, minlength=scores.shape[0])[:scores.shape[0]].to(per_query.dtype)
                per_query = per_query * (counts / counts.max())
        if self.reduction == "none":
            return per_query
        if self.reduction == "sum":
            return per_query.sum()
        return per_query[has_positive].mean() if has_positive.any() else _zero(per_query)

    @float32_compute
    def forward(self, embeddings: Tensor, labels: Tensor, indices_tuple: tuple[Tensor, ...] | None = None,
                ref_emb: Tensor | None = None, ref_labels: Tensor | None = None) -> Tensor:
        """The mean over the queries with a positive of the (miner-weighted) ``1 − AP``; PML's call.

        Args:
            embeddings: ``[N, D]`` float queries; labels: ``[N]`` integer class ids.
            indices_tuple: optional PML miner output; it weighs the queries (module docstring).
            ref_emb, ref_labels: optional ``[M, D]`` / ``[M]`` candidates (by default the batch ranks itself).

        Returns:
            0-d tensor (``[N]`` with ``reduction="none"``).

        Examples:
            >>> emb = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
            >>> float(FastAP()(emb, torch.tensor([0, 0, 1, 1])))  # each query's class mate ranks first
            0.0
        """
        return self._weighted(embeddings, labels, indices_tuple, ref_emb, ref_labels)


class SmoothAP(_WeightedAP):
    """Smooth-AP as PML's ``SmoothAPLoss()``: τ = 0.01, cosine, each query ranked among its positives
    including itself (``keep_self=True``; ``False`` leaves the self-pair out, as :class:`QuadLinearAP` does).

    The loss is :class:`hapref.losses.SmoothAP` (HAP-VR Eq. 6 with Eq. 7) on the cosine matrix. PML's
    implementation is right only on batches of contiguous class blocks with as many classes as items per
    class (16 = 4 × 4, not 32 = 8 × 4), and it refuses unequal classes; this one takes any batch, any
    ``ref_emb``, and equals PML's where PML is right. A miner weighs the queries as in PML.
    ``distance``: only ``"cosine"`` (PML's only one); ``reduction``: ``"mean"`` | ``"sum"`` | ``"none"``.
    """

    @renamed_keywords(tau="temperature")
    def __init__(self, temperature: float = 0.01, keep_self: bool = True, max_elements: int = 2**25,
                 reduction: str = "mean", distance: object = "cosine", reducer: object = None) -> None:
        reduction = _reduction(reduction, reducer, ("mean", "sum", "none"), "SmoothAP")
        _distance(distance, ("cosine",), "SmoothAP")
        super().__init__(_SmoothAP(temperature, max_elements, "none"), keep_self)
        self.reduction = reduction

    def extra_repr(self) -> str:
        return f"temperature={self.loss.temperature}, keep_self={self.keep_self}, reduction={self.reduction!r}"


class FastAP(_WeightedAP):
    """FastAP as PML's ``FastAPLoss()``: ``num_bins`` 10 on the squared Euclidean distances of the normalised
    embeddings (the cosine range (−1, 1), :class:`hapref.losses.FastAP`), self-pairs out, a miner weighing the
    queries as in PML. ``distance``: only ``"squared_euclidean"``; ``reduction``: ``"mean"`` | ``"sum"`` | ``"none"``.
    """

    def __init__(self, num_bins: int = 10, keep_self: bool = False, reduction: str = "mean",
                 distance: object = "squared_euclidean", reducer: object = None) -> None:
        reduction = _reduction(reduction, reducer, ("mean", "sum", "none"), "FastAP")
        _distance(distance, ("squared_euclidean",), "FastAP")
        super().__init__(_FastAP(num_bins, (-1.0, 1.0), "none"), keep_self)
        self.reduction = reduction

    def extra_repr(self) -> str:
        return f"num_bins={self.loss.num_bins}, reduction={self.reduction!r}"


def _reduce_terms(terms: Tensor, reduction: str) -> Tensor:
    """PML's reducers on loss terms ``[K]``: mean, mean of the non-zero ones, sum, or the terms (0 when empty)."""
    if reduction == "none":
        return terms
    if reduction == "avg_nonzero":
        terms = terms[terms > 0]
    if terms.numel() == 0:
        return _zero(terms)
    return terms.sum() if reduction == "sum" else terms.mean()


class _PairLoss(_WarnOnce, nn.Module):
    """Base of the pair and triplet losses PML also has (own ``forward``, PML's conventions)."""

    _empty_means = "the loss is 0 for this batch"

    def __init__(self, name: str, reduction: str, reducer: object, distance: object,
                 distances: tuple[str, ...]) -> None:
        super().__init__()
        self.reduction = _reduction(reduction, reducer, ("mean", "avg_nonzero", "sum", "none"), name)
        self.distance = _distance(distance, distances, name)

    def _pairs(self, embeddings: Tensor, labels: Tensor, indices_tuple: tuple[Tensor, ...] | None,
               ref_emb: Tensor | None, ref_labels: Tensor | None) -> tuple[Tensor, tuple[Tensor, ...]]:
        """The distance matrix and PML's pair lists (a1, p, a2, n): every pair, or the mined ones."""
        dist, relevance, valid = _relation(embeddings, labels, ref_emb, ref_labels, self.distance)
        if indices_tuple is None:
            return dist, (*(relevance & valid).nonzero().unbind(1), *(~relevance & valid).nonzero().unbind(1))
        pairs = _as_pairs(_mined(indices_tuple, *dist.shape, device=dist.device))
        if pairs[0].numel() == 0 or pairs[2].numel() == 0:
            self._warn_empty("no " + ("pair" if pairs[0].numel() == pairs[2].numel() == 0 else
                                      "positive pair" if pairs[0].numel() == 0 else "negative pair"),
                             self._empty_means)
        return dist, pairs

    def _sign(self) -> float:
        """+1 for a distance (smaller = closer), −1 for the cosine similarity (PML's ``distance.margin``)."""
        return -1.0 if self.distance == "cosine" else 1.0


class Contrastive(_PairLoss):
    """Contrastive loss (Hadsell et al. 2006) as PML's ``ContrastiveLoss()``: the sum of the positive-pair term
    ``[d − pos_margin]₊`` and the negative-pair term ``[neg_margin − d]₊``, each reduced over its pairs.

    Defaults as PML's: Euclidean distance of the normalised embeddings, ``pos_margin`` 0, ``neg_margin`` 1,
    ``reduction="avg_nonzero"`` (each term averaged over its non-zero pairs). With ``distance="cosine"`` the
    terms are ``[pos_margin − s]₊`` and ``[s − neg_margin]₊`` (then pass ``pos_margin=1, neg_margin=0``, PML's
    advice, which is :class:`hapref.losses.Contrastive`'s default on a score matrix).
    ``reduction="none"`` returns the positive-pair terms followed by the negative-pair terms.
    """

    _empty_means = "the term of the missing pairs is 0 for this batch"

    def __init__(self, pos_margin: float = 0.0, neg_margin: float = 1.0, distance: object = "euclidean",
                 reduction: str = "avg_nonzero", reducer: object = None) -> None:
        super().__init__("Contrastive", reduction, reducer, distance, _DISTANCES)
        self.pos_margin, self.neg_margin = float(pos_margin), float(neg_margin)

    @float32_compute
    def forward(self, embeddings: Tensor, labels: Tensor, indices_tuple: tuple[Tensor, ...] | None = None,
                ref_emb: Tensor | None = None, ref_labels: Tensor | None = None) -> Tensor:
        """The loss of ``embeddings [N, D]`` with class ids ``labels [N]`` (PML's call, miners keep their pairs).

        Returns:
            0-d tensor; with ``reduction="none"`` the ``[P + K]`` pair terms.

        Examples:
            >>> emb = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
            >>> float(Contrastive()(emb, torch.tensor([0, 0, 1, 1])))  # positives at 0, negatives at √2 > 1
            0.0
        """
        dist, (a1, p, a2, n) = self._pairs(embeddings, labels, indices_tuple, ref_emb, ref_labels)
        sign = self._sign()
        pos = F.relu(sign * (dist[a1, p] - self.pos_margin))
        neg = F.relu(sign * (self.neg_margin - dist[a2, n]))
        if self.reduction == "none":
            return torch.cat([pos, neg])
        return _reduce_terms(pos, self.reduction) + _reduce_terms(neg, self.reduction) + _zero(dist)

    def extra_repr(self) -> str:
        return (f"pos_margin={self.pos_margin}, neg_margin={self.neg_margin}, distance={self.distance!r}, "
                f"reduction={self.reduction!r}")


class Triplet(_PairLoss):
    """Triplet loss (Schroff et al. 2015) as PML's ``TripletMarginLoss()``: ``[d_ap − d_an + margin]₊`` over
    every triplet (anchor, positive, negative), or over the mined ones.

    Defaults as PML's: ``margin`` 0.05, Euclidean distance of the normalised embeddings,
    ``reduction="avg_nonzero"`` (the mean over the triplets that violate the margin); ``smooth_loss=True`` takes
    ``softplus`` instead of ``[·]₊``. With ``distance="cosine"`` the term is ``[s_an − s_ap + margin]₊``.
    ``reduction="none"`` returns one term per triplet, ordered by anchor, positive, negative.
    :class:`hapref.losses.Triplet` is the score-matrix version (per-query means).
    """

    def __init__(self, margin: float = 0.05, distance: object = "euclidean", smooth_loss: bool = False,
                 reduction: str = "avg_nonzero", reducer: object = None) -> None:
        super().__init__("Triplet", reduction, reducer, distance, _DISTANCES)
        self.margin, self.smooth_loss = float(margin), bool(smooth_loss)

    @float32_compute
    def forward(self, embeddings: Tensor, labels: Tensor, indices_tuple: tuple[Tensor, ...] | None = None,
                ref_emb: Tensor | None = None, ref_labels: Tensor | None = None) -> Tensor:
        """The loss of ``embeddings [N, D]`` with class ids ``labels [N]`` (PML's call, miners keep their triplets).

        Returns:
            0-d tensor; with ``reduction="none"`` the ``[T]`` triplet terms.

        Examples:
            >>> emb = torch.tensor([[1.0, 0.0], [1.0, 0.1], [0.0, 1.0], [0.1, 1.0]])
            >>> float(Triplet()(emb, torch.tensor([0, 0, 1, 1])))  # every negative much farther than the positive
            0.0
        """
        dist, relevance, valid = _relation(embeddings, labels, ref_emb, ref_labels, self.distance)
        sign = self._sign()
        if indices_tuple is None:     # every (a, p, n): positives packed per anchor, [N, P_max, M]
            pos_dist, slot = gather_positives(dist, relevance & valid)
            margins = sign * (pos_dist.unsqueeze(2) - dist.unsqueeze(1)) + self.margin
            values = margins[slot.unsqueeze(2) & (~relevance & valid).unsqueeze(1)]
        else:
            mined = _mined(indices_tuple, *dist.shape, device=dist.device)
            if len(mined) == 4:       # PML's convert_to_triplets: pos and neg pairs sharing the anchor
                a1, p, a2, n = mined
                i, j = torch.nonzero(a1.unsqueeze(1) == a2.unsqueeze(0), as_tuple=True)
                mined = (a1[i], p[i], n[j])
            a, p, n = mined
            if a.numel() == 0:
                self._warn_empty("no triplet", "the loss is 0 for this batch")
            values = sign * (dist[a, p] - dist[a, n]) + self.margin
        terms = F.softplus(values) if self.smooth_loss else F.relu(values)
        return terms if self.reduction == "none" else _reduce_terms(terms, self.reduction) + _zero(dist)

    def extra_repr(self) -> str:
        return f"margin={self.margin}, distance={self.distance!r}, reduction={self.reduction!r}"


class Circle(_PairLoss):
    """Circle loss (Sun et al., CVPR 2020, Eq. 6) as PML's ``CircleLoss()``: m = 0.4, γ = 80, cosine, the mean
    over the queries with a non-zero loss (``reduction="avg_nonzero"``).

    Per query, :class:`hapref.losses.Circle`'s term over its (mined) positive and negative pairs; a query
    without either is 0. ``margin`` is PML's ``m``, ``scale`` its ``gamma``. ``reduction="none"``: ``[N]``.
    The score-matrix :class:`hapref.losses.Circle` keeps the TCA paper's m = 0.25, γ = 256.
    """

    @renamed_keywords(m="margin", gamma="scale")
    def __init__(self, margin: float = 0.4, scale: float = 80.0, reduction: str = "avg_nonzero",
                 distance: object = "cosine", reducer: object = None) -> None:
        super().__init__("Circle", reduction, reducer, distance, ("cosine",))
        self.loss = _Circle(margin, scale, "none")

    @float32_compute
    def forward(self, embeddings: Tensor, labels: Tensor, indices_tuple: tuple[Tensor, ...] | None = None,
                ref_emb: Tensor | None = None, ref_labels: Tensor | None = None) -> Tensor:
        """The loss of ``embeddings [N, D]`` with class ids ``labels [N]`` (PML's call, miners keep their pairs).

        Returns:
            0-d tensor; ``[N]`` with ``reduction="none"``.

        Examples:
            >>> emb = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
            >>> float(Circle()(emb, torch.tensor([0, 0, 1, 1]))) < 1e-3  # well separated: almost no loss
            True
        """
        scores, (a1, p, a2, n) = self._pairs(embeddings, labels, indices_tuple, ref_emb, ref_labels)
        positive, negative = torch.zeros_like(scores, dtype=torch.bool), torch.zeros_like(scores, dtype=torch.bool)
        positive[a1, p] = True
        negative[a2, n] = True
        ignore = ~(positive | negative)
        terms = self.loss(scores, positive, ignore) * (positive.any(dim=1) & negative.any(dim=1))
        return terms if self.reduction == "none" else _reduce_terms(terms, self.reduction)

    def extra_repr(self) -> str:
        return f"margin={self.loss.margin}, scale={self.loss.scale}, reduction={self.reduction!r}"


class InfoNCE(_PairLoss):
    """InfoNCE as PML's ``NTXentLoss()`` (``NTXent`` is the same class): τ = 0.07, cosine, the mean over the
    positive pairs of ``−log(e^{s_ap/τ} / (e^{s_ap/τ} + Σ_n e^{s_an/τ}))``, the sum over the anchor's
    (mined) negative pairs.

    A negative pair mined twice counts twice, as in PML. ``distance="euclidean"`` uses −d as the similarity
    (PML's convention for a distance). ``reduction="none"``: one term per positive pair. The score-matrix
    :class:`hapref.losses.InfoNCE` is the S2VS form (τ = 0.03, per-query means).
    """

    @renamed_keywords(tau="temperature")
    def __init__(self, temperature: float = 0.07, distance: object = "cosine", reduction: str = "mean",
                 reducer: object = None) -> None:
        super().__init__("InfoNCE", reduction, reducer, distance, _DISTANCES)
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.temperature = float(temperature)

    @float32_compute
    def forward(self, embeddings: Tensor, labels: Tensor, indices_tuple: tuple[Tensor, ...] | None = None,
                ref_emb: Tensor | None = None, ref_labels: Tensor | None = None) -> Tensor:
        """The loss of ``embeddings [N, D]`` with class ids ``labels [N]`` (PML's call, miners keep their pairs).

        Returns:
            0-d tensor; ``[P]`` (one term per positive pair) with ``reduction="none"``.

        Examples:
            >>> emb = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
            >>> round(float(InfoNCE()(emb, torch.tensor([0, 0, 1, 1]))), 6)  # log(1 + e^{-1/0.07})
            1e-06
        """
        dist, (a1, p, a2, n) = self._pairs(embeddings, labels, indices_tuple, ref_emb, ref_labels)
        logits = -self._sign() * dist / self.temperature
        if a1.numel() == 0 or a2.numel() == 0:
            return logits[:0, 0] if self.reduction == "none" else _zero(logits)
        # log Σ over each anchor's negative pairs, a pair counted as often as it was mined
        counts = torch.zeros_like(logits).index_put_((a2, n), torch.ones_like(a2, dtype=logits.dtype), accumulate=True)
        # a large finite floor, not −inf, for the other pairs: an anchor without negatives gets a zero term
        # with a zero (not NaN) gradient
        floor = torch.finfo(logits.dtype).min / 4
        neg_lse = torch.logsumexp(torch.where(counts > 0, logits + counts.clamp(min=1).log(), floor), dim=1)
        pos = logits[a1, p]
        terms = -torch.log(torch.sigmoid(pos - neg_lse[a1]) + torch.finfo(logits.dtype).tiny)
        return terms if self.reduction == "none" else _reduce_terms(terms, self.reduction)

    def extra_repr(self) -> str:
        return f"temperature={self.temperature}, distance={self.distance!r}, reduction={self.reduction!r}"


for _cls in (QuadLinearAP, ListwiseAP, BlackBoxAP, MAE, MSE, SmoothAP, FastAP, Contrastive, Triplet, Circle, InfoNCE):
    _cls.__doc__ += _pml_docs(_cls.__name__)

del _cls

NTXent = InfoNCE
