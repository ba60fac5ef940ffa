"""MoCo's momentum key encoder (He et al., CVPR 2020), the queue variant of TCA Table 1e.

TCA §4.2 trains with a "modified MoCo": the anchors go through the query encoder, the positives and the
queued negatives through a *key encoder* whose weights follow the query encoder's as an exponential moving
average, ``θ_k ← m·θ_k + (1 − m)·θ_q`` before every step. With ``m = 0`` the key encoder is the current query
encoder (the released run, a plain memory bank of recent embeddings); with ``m`` close to 1 the keys drift
slowly, which keeps the queued keys consistent with each other (MoCo's argument for large queues).
"""

from __future__ import annotations

import copy

import torch
from torch import Tensor, nn

__all__ = ["MomentumEncoder"]


class MomentumEncoder(nn.Module):
    """A frozen copy of ``encoder`` updated by :meth:`update` as ``θ_k ← m·θ_k + (1 − m)·θ_q`` (TCA Table 1e).

    Calls run the copy without gradient and return what ``encoder`` returns (e.g. ``[N, D]`` video
    descriptors of an aggregator). Buffers (e.g. running statistics) are copied from the query encoder.

    Args:
        encoder: the query encoder; copied at construction.
        momentum: ``m`` in ``[0, 1)``; 0 makes every update an exact copy.

    Examples:
        >>> query = nn.Linear(3, 2)
        >>> key = MomentumEncoder(query, momentum=0.9)
        >>> with torch.no_grad():
        ...     _ = query.weight.add_(1.0)
        >>> key.update(query)
        >>> torch.allclose(key.encoder.weight, query.weight - 0.9)  # moved 10 % of the way
        True
        >>> key(torch.ones(1, 3)).requires_grad
        False
    """

    def __init__(self, encoder: nn.Module, momentum: float = 0.999) -> None:
        super().__init__()
        if not isinstance(encoder, nn.Module):
            raise TypeError(f"encoder must be an nn.Module, got {type(encoder).__name__}")
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"momentum must lie in [0, 1), got {momentum}")
        self.momentum = momentum
        self.encoder = copy.deepcopy(encoder)
        self.encoder.requires_grad_(False)

    @torch.no_grad()
    def update(self, encoder: nn.Module) -> None:
        """One moving-average step ``θ_k ← m·θ_k + (1 − m)·θ_q`` towards the query ``encoder`` (same architecture).

        Parameters move in place; buffers (e.g. BatchNorm running statistics) are copied as they are. Call it once
        per optimiser step, before embedding the keys.

        Examples:
            >>> _ = torch.manual_seed(0)
            >>> query = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
            >>> key = MomentumEncoder(query, momentum=0.75)
            >>> _ = query(torch.randn(8, 3))  # a training step changes the running statistics ...
            >>> with torch.no_grad():
            ...     _ = query[0].weight.mul_(2.0)  # ... and the weights
            >>> old = key.encoder[0].weight.clone()
            >>> key.update(query)
            >>> torch.allclose(key.encoder[0].weight, 0.75 * old + 0.25 * query[0].weight)
            True
            >>> torch.equal(key.encoder[1].running_mean, query[1].running_mean)  # buffers copied
            True
            >>> exact = MomentumEncoder(nn.Linear(3, 2), momentum=0.0)
            >>> exact.update(query[0])  # m = 0: the key encoder becomes the query encoder
            >>> torch.equal(exact.encoder.weight, query[0].weight)
            True
        """
        mine, theirs = list(self.encoder.parameters()), list(encoder.parameters())
        if len(mine) != len(theirs) or any(a.shape != b.shape for a, b in zip(mine, theirs)):
            raise ValueError("encoder must have the architecture of the key encoder's copy")
        for key_param, query_param in zip(mine, theirs):
            key_param.mul_(self.momentum).add_(query_param.detach(), alpha=1.0 - self.momentum)
        for key_buf, query_buf in zip(self.encoder.buffers(), encoder.buffers()):
            key_buf.copy_(query_buf)

    @torch.no_grad()
    def forward(self, *args: Tensor, **kwargs: Tensor) -> Tensor:
        """The momentum (key) encoder's output for the wrapped encoder's inputs.

        Examples:
            >>> query = nn.Linear(3, 2)
            >>> key = MomentumEncoder(query, momentum=0.9)
            >>> torch.allclose(key(torch.ones(4, 3)), query(torch.ones(4, 3)))  # a fresh copy: the same output
            True
        """
        return self.encoder(*args, **kwargs)
