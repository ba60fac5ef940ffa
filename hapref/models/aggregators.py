"""Baseline temporal aggregators of TCA Table 1a: NetVLAD, LSTM and GRU.

They share :class:`~hapref.models.tca.TemporalContextAggregator`'s call convention,
``model(features [N, T, D], valid [N, T]) -> [N, D]`` (an L2-normalised video descriptor; ``valid`` is True
for real frames and False for padding), so the TCA pipeline can train any of them with the same memory-bank
loss. TCA §4.2 compares them with the Transformer on iMAC features, video-level descriptors and the dot product.

* :class:`NetVLADAggregator` — NetVLAD (Arandjelović et al., CVPR 2016): soft-assign every frame to ``K``
  learned centres, sum the residuals per centre over the valid frames, intra-normalise, flatten, L2-normalise,
  then a linear map back to ``D`` (so every aggregator yields a ``D``-dimensional descriptor) and L2-normalise.
* :class:`RecurrentAggregator` — an LSTM (Hochreiter & Schmidhuber 1997) or GRU (Cho et al. 2014) over the
  valid frames in temporal order (padding must come after the real frames); the hidden states are the refined
  frame descriptors (``frame_embeddings``) and their valid-only mean, L2-normalised, is the video descriptor.
* :class:`PerFrameMLP` — a control, not a Table 1 row: TCA's encoder layer without its self-attention (the same
  feed-forward block, residual, LayerNorm and dropout), applied to every frame alone; whatever it learns is a
  per-frame map, so it cannot use the other frames of the clip.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from hapref.models.tca import _check_inputs

__all__ = ["AGGREGATORS", "NetVLADAggregator", "PerFrameMLP", "RecurrentAggregator", "build_aggregator"]

#: Names accepted by :func:`build_aggregator`.
AGGREGATORS: tuple[str, ...] = ("transformer", "netvlad", "lstm", "gru", "mlp")


class NetVLADAggregator(nn.Module):
    """NetVLAD pooling of frame descriptors into one video descriptor (TCA Table 1a baseline).

    For frame ``x_t`` and centre ``c_k``: ``a_k(x_t) = softmax_k(w_k·x_t + b_k)``,
    ``V_k = Σ_{t valid} a_k(x_t) (x_t − c_k)``; each ``V_k`` is L2-normalised (intra-normalisation), the
    concatenation ``[K·D]`` is L2-normalised, projected by a linear layer to ``D`` and L2-normalised again.

    Args:
        d_model: frame descriptor size D (also the output size).
        clusters: number of centres K.

    Examples:
        >>> model = NetVLADAggregator(d_model=8, clusters=4)
        >>> x, valid = torch.randn(2, 5, 8), torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
        >>> out = model(x, valid)
        >>> tuple(out.shape), torch.allclose(out.norm(dim=-1), torch.ones(2))
        ((2, 8), True)
    """

    def __init__(self, d_model: int, clusters: int = 16) -> None:
        super().__init__()
        if d_model < 1 or clusters < 1:
            raise ValueError(f"d_model and clusters must be >= 1, got d_model={d_model}, clusters={clusters}")
        self.d_model, self.clusters = d_model, clusters
        self.assign = nn.Linear(d_model, clusters)
        self.centres = nn.Parameter(torch.randn(clusters, d_model) / d_model ** 0.5)
        self.project = nn.Linear(clusters * d_model, d_model)

    def vlad(self, features: Tensor, valid: Tensor | None = None) -> Tensor:
        """The normalised VLAD vector ``[N, K·D]`` before the projection (the ``V_k`` above, flattened).

        ``features [N, T, D]`` float, ``valid [N, T]`` bool (None = all frames real); padded frames get zero
        assignment weight. Each ``V_k`` block is intra-normalised and the whole vector has unit L2 norm, so every
        block has norm ``1/√K`` (a row without valid frames stays zero).

        Examples:
            >>> _ = torch.manual_seed(0)
            >>> model = NetVLADAggregator(d_model=8, clusters=4)
            >>> x, valid = torch.randn(2, 5, 8), torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
            >>> v = model.vlad(x, valid)
            >>> tuple(v.shape), torch.allclose(v.view(2, 4, 8).norm(dim=-1), torch.full((2, 4), 0.5))
            ((2, 32), True)
            >>> torch.allclose(v[1], model.vlad(x[1:, :3])[0], atol=1e-6)  # padding has no effect
            True
        """
        valid = _check_inputs(features, valid, self.d_model)
        weights = torch.softmax(self.assign(features), dim=-1) * valid.unsqueeze(-1).to(features.dtype)  # [N,T,K]
        residual = torch.einsum("ntk,ntd->nkd", weights, features) - weights.sum(1).unsqueeze(-1) * self.centres
        return F.normalize(F.normalize(residual, dim=-1).flatten(1), dim=-1)

    def forward(self, features: Tensor, valid: Tensor | None = None) -> Tensor:
        """Video descriptor ``[N, D]``, L2-normalised.

        Examples:
            >>> NetVLADAggregator(d_model=8, clusters=4)(torch.randn(2, 5, 8)).shape
            torch.Size([2, 8])
        """
        return F.normalize(self.project(self.vlad(features, valid)), dim=-1)


class RecurrentAggregator(nn.Module):
    """LSTM or GRU over the valid frames, mean of the hidden states as video descriptor (TCA Table 1a baselines).

    Args:
        d_model: frame descriptor size D; the hidden size is D too.
        cell: ``"lstm"`` or ``"gru"``.
        num_layers: stacked recurrent layers.

    ``valid`` must mark a prefix of each row (padding after the real frames), as the padding helpers produce.

    Examples:
        >>> model = RecurrentAggregator(d_model=8, cell="gru")
        >>> x, valid = torch.randn(2, 5, 8), torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
        >>> tuple(model(x, valid).shape), tuple(model.frame_embeddings(x, valid).shape)
        ((2, 8), (2, 5, 8))
        >>> bool(model.frame_embeddings(x, valid)[1, 3:].abs().sum() == 0)  # padded frames stay zero
        True
    """

    def __init__(self, d_model: int, cell: str = "lstm", num_layers: int = 1) -> None:
        super().__init__()
        if cell not in ("lstm", "gru"):
            raise ValueError(f"cell must be 'lstm' or 'gru', got {cell!r}")
        if d_model < 1 or num_layers < 1:
            raise ValueError(f"d_model and num_layers must be >= 1, got d_model={d_model}, num_layers={num_layers}")
        self.d_model, self.cell = d_model, cell
        self.rnn = (nn.LSTM if cell == "lstm" else nn.GRU)(d_model, d_model, num_layers, batch_first=True)

    def _encode(self, features: Tensor, valid: Tensor | None) -> tuple[Tensor, Tensor]:
        valid = _check_inputs(features, valid, self.d_model)
        lengths = valid.sum(1)
        prefix = torch.arange(valid.shape[1], device=valid.device) < lengths.unsqueeze(1)
        if not torch.equal(prefix, valid):
            raise ValueError("valid must mark a prefix of every row (real frames first, padding after)")
        packed = pack_padded_sequence(features, lengths.clamp_min(1).cpu(), batch_first=True, enforce_sorted=False)
        out, _ = pad_packed_sequence(self.rnn(packed)[0], batch_first=True, total_length=features.shape[1])
        return out.masked_fill(~valid.unsqueeze(-1), 0.0), valid

    def frame_embeddings(self, features: Tensor, valid: Tensor | None = None) -> Tensor:
        """Hidden states ``[N, T, D]``, each L2-normalised; padded frames are zero.

        ``features [N, T, D]`` float, ``valid [N, T]`` bool marking a prefix of every row (None = all real). These
        are the context-refined frame descriptors, e.g. for frame-to-frame similarity.

        Examples:
            >>> _ = torch.manual_seed(0)
            >>> model = RecurrentAggregator(d_model=8, cell="lstm")
            >>> x, valid = torch.randn(2, 5, 8), torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
            >>> frames = model.frame_embeddings(x, valid)
            >>> torch.allclose(frames[0], F.normalize(model.rnn(x[:1])[0][0], dim=-1), atol=1e-6)  # plain LSTM
            True
            >>> torch.allclose(frames[1, :3], model.frame_embeddings(x[1:, :3])[0], atol=1e-6), frames[1, 3:].norm().item()
            (True, 0.0)
        """
        return F.normalize(self._encode(features, valid)[0], dim=-1)

    def forward(self, features: Tensor, valid: Tensor | None = None) -> Tensor:
        """Video descriptor ``[N, D]``: mean hidden state over the valid frames, L2-normalised.

        Examples:
            >>> model = RecurrentAggregator(d_model=8, cell="gru")
            >>> out = model(torch.randn(2, 5, 8), torch.ones(2, 5, dtype=torch.bool))
            >>> out.shape, torch.allclose(out.norm(dim=-1), torch.ones(2))
            (torch.Size([2, 8]), True)
        """
        out, valid = self._encode(features, valid)
        return F.normalize(out.sum(1) / valid.sum(1, keepdim=True).clamp_min(1).to(out.dtype), dim=-1)


class PerFrameMLP(nn.Module):
    """A per-frame map with TCA's layer shape: ``y_t = LayerNorm(x_t + W_2 dropout(ReLU(W_1 x_t)))`` (the
    feed-forward half of TCA Eq. 2 with its residual and post-norm), frame by frame; no frame sees another.

    ``frame_embeddings`` -> ``y_t`` L2-normalised ``[N, T, D]`` (padded frames 0); ``forward`` -> their
    valid-only mean, L2-normalised ``[N, D]``, as :class:`~hapref.models.tca.TemporalContextAggregator`.

    Args:
        d_model: frame descriptor size D.
        dim_feedforward: hidden size of the feed-forward block.
        dropout: dropout after the ReLU and on the block's output, as in the Transformer layer.

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> model = PerFrameMLP(d_model=8, dim_feedforward=16).eval()
        >>> x, valid = torch.randn(2, 5, 8), torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
        >>> frames = model.frame_embeddings(x, valid)
        >>> torch.allclose(frames[0, 2], model.frame_embeddings(x[:1, 2:3])[0, 0])   # a frame alone: the same
        True
        >>> tuple(model(x, valid).shape), float(frames[1, 3:].detach().abs().sum())
        ((2, 8), 0.0)
    """

    def __init__(self, d_model: int, dim_feedforward: int = 2048, dropout: float = 0.5) -> None:
        super().__init__()
        if d_model < 1 or dim_feedforward < 1:
            raise ValueError(f"d_model and dim_feedforward must be >= 1, got {d_model}, {dim_feedforward}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {dropout}")
        self.d_model = d_model
        self.block = nn.Sequential(nn.Linear(d_model, dim_feedforward), nn.ReLU(), nn.Dropout(dropout),
                                   nn.Linear(dim_feedforward, d_model), nn.Dropout(dropout))
        self.norm = nn.LayerNorm(d_model)

    def frame_embeddings(self, features: Tensor, valid: Tensor | None = None) -> Tensor:
        """Mapped frames ``[N, T, D]``, each L2-normalised; padded frames (``valid`` False) are zero.

        Examples:
            >>> PerFrameMLP(d_model=8, dim_feedforward=16)(torch.randn(3, 4, 8)).shape
            torch.Size([3, 8])
            >>> PerFrameMLP(d_model=8, dim_feedforward=16).frame_embeddings(torch.randn(3, 4, 8)).shape
            torch.Size([3, 4, 8])
        """
        valid = _check_inputs(features, valid, self.d_model)
        out = F.normalize(self.norm(features + self.block(features)), dim=-1)
        return out.masked_fill(~valid.unsqueeze(-1), 0.0)

    def forward(self, features: Tensor, valid: Tensor | None = None) -> Tensor:
        """Video descriptor ``[N, D]``: the valid-only mean of :meth:`frame_embeddings`, L2-normalised.

        Examples:
            >>> out = PerFrameMLP(d_model=8, dim_feedforward=16).eval()(torch.randn(2, 5, 8))
            >>> out.shape, torch.allclose(out.norm(dim=-1), torch.ones(2))
            (torch.Size([2, 8]), True)
        """
        valid = _check_inputs(features, valid, self.d_model)
        frames = self.frame_embeddings(features, valid)
        return F.normalize(frames.sum(1) / valid.sum(1, keepdim=True).clamp_min(1).to(frames.dtype), dim=-1)


def build_aggregator(name: str, d_model: int, nhead: int = 8, dim_feedforward: int = 2048, dropout: float = 0.5,
                     clusters: int = 16) -> nn.Module:
    """An aggregator of :data:`AGGREGATORS` by name (TCA Table 1a); ``"transformer"`` is TCA's own (Eq. 2).

    Examples:
        >>> [type(build_aggregator(n, 16, nhead=4, dim_feedforward=32)).__name__ for n in AGGREGATORS][1:]
        ['NetVLADAggregator', 'RecurrentAggregator', 'RecurrentAggregator', 'PerFrameMLP']
    """
    from hapref.models.tca import TemporalContextAggregator

    if name == "transformer":
        return TemporalContextAggregator(d_model, nhead, 1, dim_feedforward, dropout)
    if name == "netvlad":
        return NetVLADAggregator(d_model, clusters)
    if name in ("lstm", "gru"):
        return RecurrentAggregator(d_model, name)
    if name == "mlp":
        return PerFrameMLP(d_model, dim_feedforward, dropout)
    raise ValueError(f"aggregator must be one of {AGGREGATORS}, got {name!r}")
