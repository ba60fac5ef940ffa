"""From embeddings and class labels to the (scores, relevance, ignore) triple of the ranking losses.

Metric-learning code calls a loss as ``loss(embeddings, labels)``; hapref's ranking losses take a score
matrix. :func:`embedding_batch` builds that matrix the way pytorch-metric-learning does by default:
cosine similarities between the L2-normalised embeddings, relevance = same label, and each item's
pair with itself left out of its own ranking (the query is not a candidate for itself).
:class:`EmbeddingLoss` gives every loss an ``on_embeddings`` method built on it.
"""

from __future__ import annotations

import torch
from torch import Tensor

from hapref.similarity.pairwise import l2_normalize
from hapref.validation import as_tensor, check_float_tensor

__all__ = ["EmbeddingLoss", "embedding_batch"]


def refuse_labels_as_relevance(loss: object, scores: object, relevance: object) -> None:
    """A clear error when a score-matrix loss is called PML's way, ``loss(embeddings, labels)``.

    Examples:
        >>> from hapref.losses import QuadLinearAP
        >>> QuadLinearAP()(torch.randn(8, 4), torch.arange(8))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: relevance must be a [Q, M] bool matrix, got 1-D shape (8,) (class labels?): ... hapref.losses.pml.QuadLinearAP() ...
    """
    if getattr(relevance, "ndim", None) == 1 and getattr(scores, "ndim", None) == 2:
        name = type(loss).__name__
        raise ValueError(f"relevance must be a [Q, M] bool matrix, got 1-D shape {tuple(relevance.shape)} (class "
                         f"labels?): this {name} takes (scores, relevance, ignore); for loss(embeddings, labels) use "
                         f"hapref.losses.pml.{name}() (pytorch-metric-learning's call, miners accepted) or "
                         f"{name}().on_embeddings(embeddings, labels)")


def _labels(labels: object, name: str, n: int, device: torch.device) -> Tensor:
    labels = as_tensor(labels)
    if not isinstance(labels, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor or a NumPy array of [N] class ids, got {type(labels).__name__}")
    if labels.ndim != 1 or labels.shape[0] != n:
        raise ValueError(f"{name} must have shape [{n}] (one class id per embedding), got {tuple(labels.shape)}")
    if labels.is_floating_point() or labels.is_complex():
        raise ValueError(f"{name} must hold integer (or bool) class ids, got dtype {labels.dtype}")
    return labels.to(device)


def _embeddings(x: object, name: str) -> Tensor:
    x = check_float_tensor(x, name, ndim=2, finite=True)
    if x.shape[0] == 0:
        raise ValueError(f"{name} must hold at least one embedding [N >= 1, D], got shape {tuple(x.shape)}")
    return x


def embedding_batch(embeddings: Tensor, labels: Tensor, ref_embeddings: Tensor | None = None,
                    ref_labels: Tensor | None = None, keep_self: bool = False,
                    ) -> tuple[Tensor, Tensor, Tensor | None]:
    """Cosine scores ``[N, M]``, relevance (same label) and ignore (self-pairs) from labelled embeddings.

    Args:
        embeddings: ``[N, D]`` float queries (any scale: they are L2-normalised here).
        labels: ``[N]`` integer class ids (tensor or NumPy array).
        ref_embeddings, ref_labels: optional ``[M, D]`` / ``[M]`` candidates; by default the batch
            ranks itself (M = N).
        keep_self: when the batch ranks itself, keep each query's pair with itself as a positive
            (the released HAP-VR and Smooth-AP code do); by default it is ignored.

    Returns:
        ``(scores, relevance, ignore)``: scores ``[N, M]`` (float32 for half-precision input, whose
        normalisation would underflow, else the input dtype; a zero embedding scores 0 with a finite gradient,
        see :func:`hapref.similarity.l2_normalize`), relevance ``[N, M]`` bool, ignore ``[N, N]``
        bool with the diagonal set (None with ``ref_embeddings`` or ``keep_self``).

    Examples:
        >>> emb = torch.tensor([[1.0, 0.0], [2.0, 0.0], [0.0, 3.0]])
        >>> scores, relevance, ignore = embedding_batch(emb, torch.tensor([0, 0, 1]))
        >>> scores
        tensor([[1., 1., 0.],
                [1., 1., 0.],
                [0., 0., 1.]])
        >>> relevance.int()
        tensor([[1, 1, 0],
                [1, 1, 0],
                [0, 0, 1]], dtype=torch.int32)
        >>> ignore.int().diagonal()
        tensor([1, 1, 1], dtype=torch.int32)
    """
    embeddings = _embeddings(embeddings, "embeddings")
    labels = _labels(labels, "labels", embeddings.shape[0], embeddings.device)
    if (ref_embeddings is None) != (ref_labels is None):
        raise ValueError("ref_embeddings and ref_labels must be given together (or neither)")
    if ref_embeddings is None:
        ref, ref_lab = embeddings, labels
    else:
        ref = _embeddings(ref_embeddings, "ref_embeddings")
        if ref.shape[1] != embeddings.shape[1]:
            raise ValueError(f"ref_embeddings must be [M, D={embeddings.shape[1]}], got {tuple(ref.shape)}")
        ref_lab = _labels(ref_labels, "ref_labels", ref.shape[0], embeddings.device)
    # float32 for half precision (the normalisation's epsilon is 0 in float16); zero rows score 0 with a
    # bounded gradient (hapref.similarity.l2_normalize).
    work = torch.promote_types(embeddings.dtype, torch.float32)
    scores = l2_normalize(embeddings.to(work)) @ l2_normalize(ref.to(device=embeddings.device, dtype=work)).T
    relevance = labels[:, None] == ref_lab[None, :]
    if ref_embeddings is not None or keep_self:
        return scores, relevance, None
    return scores, relevance, torch.eye(len(labels), dtype=torch.bool, device=embeddings.device)


class EmbeddingLoss:
    """Mixin: ``loss.on_embeddings(embeddings, labels)`` for a loss called as ``loss(scores, relevance, ignore)``.

    The scores are cosine similarities of the embeddings and relevance is "same label"; each
    query's pair with itself is ignored unless ``keep_self`` (see :func:`embedding_batch`).
    Every :class:`hapref.losses.RankingLoss`, :class:`hapref.losses.InfoNCE` and :class:`hapref.losses.SSHN` has it.

    Examples:
        >>> from hapref.losses import FastAP
        >>> emb = torch.tensor([[1.0, 0.1], [0.9, 0.0], [0.0, 1.0], [0.1, 0.9]])
        >>> FastAP().on_embeddings(emb, torch.tensor([0, 0, 1, 1]))  # each query's class mate ranks first
        tensor(0.)
    """

    def on_embeddings(self, embeddings: Tensor, labels: Tensor, ref_embeddings: Tensor | None = None,
                      ref_labels: Tensor | None = None, keep_self: bool = False):
        """The loss of labelled embeddings ``[N, D]`` with class ids ``[N]`` (pytorch-metric-learning's call).

        Equivalent to ``self(*embedding_batch(embeddings, labels, ref_embeddings, ref_labels, keep_self))``.

        Examples:
            >>> from hapref.losses import QuadLinearAP
            >>> _ = torch.manual_seed(0)
            >>> emb = torch.randn(8, 4, requires_grad=True)
            >>> labels = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
            >>> loss = QuadLinearAP().on_embeddings(emb, labels)
            >>> loss.backward()
            >>> 0 <= loss.item() <= 1, emb.grad.shape
            (True, torch.Size([8, 4]))
        """
        scores, relevance, ignore = embedding_batch(embeddings, labels, ref_embeddings, ref_labels, keep_self)
        return self(scores, relevance, ignore)  # type: ignore[operator]
