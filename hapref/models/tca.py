"""Temporal context aggregation: a Transformer encoder over a video's frame descriptors (TCA §3.3, Eq. 2).

Self-attention lets every frame descriptor absorb context from the whole clip. The encoder has no
positional encoding (as in the released code, the released TCA code, https://github.com/xwen99/temporal_context_aggregation), so it is permutation-equivariant
over frames; padded frames are excluded from attention by a key-padding mask (the inverse of ``valid``). The refined frame
descriptors give TCA_f (Chamfer over frames); their valid-only mean, L2-normalised, gives TCA_c.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hapref.validation import check_float_tensor, renamed_keywords

#: Paper sizes (TCA §4.1: d = 1024, 8 heads, 1 layer, dropout 0.5) and the released run's dropout 0.2 (§6.3).
TCA_PRESETS: dict[str, dict[str, float | int]] = {
    "paper": {"d_model": 1024, "nhead": 8, "num_layers": 1, "dim_feedforward": 2048, "dropout": 0.5},
    "released": {"d_model": 1024, "nhead": 8, "num_layers": 1, "dim_feedforward": 2048, "dropout": 0.2},
}


def _one_video(features: Tensor, valid: Tensor | None) -> tuple[Tensor, Tensor | None, bool]:
    """One video ``[T, D]`` (valid ``[T]``) as a batch of one; batches pass unchanged. Flag: it was one video."""
    if not isinstance(features, Tensor) or features.ndim != 2:
        return features, valid, False
    if valid is not None and isinstance(valid, Tensor) and valid.shape == features.shape[:1]:
        valid = valid[None]
    return features[None], valid, True


def _check_inputs(features: Tensor, valid: Tensor | None, d_model: int) -> Tensor:
    """Validate ``features [N, T, D]`` and return the valid-frame flags ``[N, T]`` (all True if None)."""
    check_float_tensor(features, "features", ndim=3)
    if features.shape[-1] != d_model:
        raise ValueError(f"features must have shape [N, T, {d_model}], got {tuple(features.shape)}")
    if valid is None:
        return torch.ones(features.shape[:2], dtype=torch.bool, device=features.device)
    if not isinstance(valid, Tensor) or valid.dtype != torch.bool or valid.shape != features.shape[:2]:
        shape = tuple(valid.shape) if isinstance(valid, Tensor) else type(valid).__name__
        raise ValueError(f"valid must be a bool tensor of shape {tuple(features.shape[:2])} (True = valid frame), "
                         f"got {shape}")
    return valid.to(features.device)


class TemporalContextAggregator(nn.Module):
    """TCA's Transformer encoder (TCA §3.3, Eq. 2): post-norm, ReLU, no positional encoding.

    ``frame_embeddings`` -> refined, L2-normalised frame descriptors ``[N, T, D]`` (TCA_f; padded frames are 0);
    ``forward`` -> valid-only mean over valid frames, L2-normalised ``[N, D]`` (TCA_c). Both take one video
    ``[T, D]`` too.

    Examples:
        >>> model = TemporalContextAggregator.preset("paper", d_model=16, nhead=2, dim_feedforward=32).eval()
        >>> model(torch.randn(4, 10, 16)).shape
        torch.Size([4, 16])
    """

    def __init__(self, d_model: int = 1024, nhead: int = 8, num_layers: int = 1, dim_feedforward: int = 2048,
                 dropout: float = 0.5) -> None:
        super().__init__()
        if d_model < 1 or nhead < 1 or d_model % nhead:
            raise ValueError(f"d_model must be a positive multiple of nhead, got d_model={d_model}, nhead={nhead}")
        if num_layers < 1 or dim_feedforward < 1:
            raise ValueError(f"num_layers and dim_feedforward must be >= 1, got {num_layers}, {dim_feedforward}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {dropout}")
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, batch_first=True,
                                           norm_first=False)
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.d_model = d_model

    @classmethod
    def preset(cls, name: str = "paper", **overrides: float | int) -> TemporalContextAggregator:
        """A model with the sizes of ``TCA_PRESETS[name]`` ("paper" or "released"), fields overridable.

        "paper" is TCA §4.1 (d = 1024, 8 heads, 1 layer, feed-forward 2048, dropout 0.5); "released" differs only
        in dropout 0.2. ``overrides`` are constructor keywords that replace preset fields (e.g. smaller sizes).

        Examples:
            >>> TCA_PRESETS["paper"]
            {'d_model': 1024, 'nhead': 8, 'num_layers': 1, 'dim_feedforward': 2048, 'dropout': 0.5}
            >>> model = TemporalContextAggregator.preset("released", d_model=16, nhead=2, dim_feedforward=32)
            >>> layer = model.encoder.layers[0]
            >>> model.d_model, layer.linear1.out_features, layer.dropout.p, len(model.encoder.layers)
            (16, 32, 0.2, 1)
        """
        if name not in TCA_PRESETS:
            raise ValueError(f"preset must be one of {sorted(TCA_PRESETS)}, got {name!r}")
        return cls(**{**TCA_PRESETS[name], **overrides})

    @classmethod
    def mean_subtracting(cls, d_model: int, k: float, nhead: int = 8, dim_feedforward: int | None = None,
                         ) -> TemporalContextAggregator:
        """The one-layer encoder set by hand to compute ``LayerNorm(x_t − k·mean(x))`` for every frame t.

        Query and key projections zero (so attention is exactly uniform over the clip's real frames), value
        projection the identity, output projection ``−k·I`` (so ``W_o W_v = −k·I``), every bias zero, the
        feed-forward block zeroed (its residual adds nothing), LayerNorms at their initial identity affine
        map, dropout 0. The solution of chapter 6's context benchmark that this encoder can express exactly;
        :func:`clip_mean_share` reads ``k`` back. ``dim_feedforward`` defaults to ``2·d_model``.

        Examples:
            >>> model = TemporalContextAggregator.mean_subtracting(8, 1.0, nhead=2).eval()
            >>> x = torch.randn(1, 5, 8)
            >>> expected = F.normalize(F.layer_norm(x - x.mean(1, keepdim=True), (8,)), dim=-1)
            >>> torch.allclose(model.frame_embeddings(x), expected, atol=1e-5)
            True
        """
        model = cls(d_model, nhead, 1, 2 * d_model if dim_feedforward is None else dim_feedforward, 0.0)
        layer = model.encoder.layers[0]
        with torch.no_grad():
            for module in (layer.self_attn.out_proj, layer.linear1, layer.linear2):
                module.weight.zero_()
                module.bias.zero_()
            layer.self_attn.in_proj_weight.zero_()
            layer.self_attn.in_proj_bias.zero_()
            layer.self_attn.in_proj_weight[2 * d_model:].copy_(torch.eye(d_model))
            layer.self_attn.out_proj.weight.copy_(-k * torch.eye(d_model))
        return model

    def _encode(self, features: Tensor, valid: Tensor | None) -> tuple[Tensor, Tensor]:
        valid = _check_inputs(features, valid, self.d_model)
        empty = ~valid.any(dim=1, keepdim=True)           # a video without frames would make attention NaN
        out = self.encoder(features, src_key_padding_mask=~(valid | empty))
        return out.masked_fill(~valid.unsqueeze(-1), 0.0), valid

    @renamed_keywords(mask="valid")
    def frame_embeddings(self, features: Tensor, valid: Tensor | None = None) -> Tensor:
        """Refined frame descriptors ``[N, T, D]``, each L2-normalised (TCA_f); padded frames are zero.

        ``features [N, T, D]`` float with ``valid [N, T]`` bool (True = real frame), or one video ``[T, D]``
        (valid ``[T]``) giving ``[T, D]``.

        Examples:
            >>> model = TemporalContextAggregator(d_model=8, nhead=2, dim_feedforward=16).eval()
            >>> model.frame_embeddings(torch.randn(3, 5, 8)).shape, model.frame_embeddings(torch.randn(5, 8)).shape
            (torch.Size([3, 5, 8]), torch.Size([5, 8]))
        """
        features, valid, single = _one_video(features, valid)
        out, _ = self._encode(features, valid)
        out = F.normalize(out, dim=-1)
        return out[0] if single else out

    @torch.no_grad()
    def attention_weights(self, features: Tensor, valid: Tensor | None = None) -> Tensor:
        """Self-attention weights ``[N, L, T, T]`` of each of the L layers, averaged over heads (TCA Eq. 2, Fig. 5).

        Row ``t`` of layer ``l`` is the softmax ``softmax(QKᵀ/√d)`` of frame t over the frames fed to that layer;
        padded frames get weight 0 and their rows are 0. The column mean over valid rows is the average
        attention a frame receives, the "response" of TCA Fig. 5. No gradient; dropout follows ``self.training``.

        Examples:
            >>> model = TemporalContextAggregator(d_model=8, nhead=2, num_layers=1, dim_feedforward=16).eval()
            >>> w = model.attention_weights(torch.randn(1, 4, 8), torch.tensor([[True, True, True, False]]))
            >>> tuple(w.shape), w[0, 0, :3].sum(-1).tolist(), float(w[0, 0, :, 3].abs().sum())
            ((1, 1, 4, 4), [1.0, 1.0, 1.0], 0.0)
        """
        valid = _check_inputs(features, valid, self.d_model)
        padding = ~(valid | ~valid.any(dim=1, keepdim=True))
        weights, x = [], features
        for layer in self.encoder.layers:
            _, w = layer.self_attn(x, x, x, key_padding_mask=padding, need_weights=True, average_attn_weights=True)
            weights.append(w.masked_fill(~valid.unsqueeze(-1), 0.0))
            x = layer(x, src_key_padding_mask=padding)
        return torch.stack(weights, dim=1)

    @renamed_keywords(mask="valid")
    def forward(self, features: Tensor, valid: Tensor | None = None) -> Tensor:
        """Video descriptor ``[N, D]``: mean of the encoder outputs over valid frames, L2-normalised (TCA_c).

        ``features [N, T, D]`` float with ``valid [N, T]`` bool (True = real frame), or one video ``[T, D]``
        (valid ``[T]``) giving ``[D]``.

        Examples:
            >>> model = TemporalContextAggregator(d_model=8, nhead=2, dim_feedforward=16).eval()
            >>> videos = torch.randn(2, 5, 8)
            >>> valid = torch.tensor([[True] * 5, [True, True, True, False, False]])
            >>> model(videos, valid).shape, model(videos[1, :3]).shape
            (torch.Size([2, 8]), torch.Size([8]))
            >>> torch.allclose(model(videos, valid)[1], model(videos[1, :3]), atol=1e-5)  # padding changes nothing
            True
        """
        features, valid, single = _one_video(features, valid)
        out, valid = self._encode(features, valid)
        mean = out.sum(dim=1) / valid.sum(dim=1, keepdim=True).clamp_min(1).to(out.dtype)
        out = F.normalize(mean, dim=-1)
        return out[0] if single else out


def _attention_value_output(layer: nn.TransformerEncoderLayer) -> Tensor:
    """``W_o W_v`` ``[D, D]`` of one encoder layer's self-attention (all heads: the value rows of the input
    projection, then the output projection)."""
    attention = layer.self_attn
    d = attention.embed_dim
    return attention.out_proj.weight @ attention.in_proj_weight[2 * d:]


def clip_mean_share(model: TemporalContextAggregator, layer: int = 0) -> float:
    """How much of the clip's mean frame layer ``layer`` subtracts from every frame: ``k = −trace(W_o W_v) / D``.

    With uniform attention (every frame weighs every frame of the clip by 1/T, as the trained encoders of
    chapter 6 do) the attention block adds ``W_o W_v·mean(x) + b`` to every frame, so the layer's residual sum
    is ``x_t + W_o W_v·mean(x) + b`` before its LayerNorm; with ``W_o W_v = −k·I`` that is
    ``x_t − k·mean(x) + b``.
    ``k`` is the share of the mean removed when ``W_o W_v`` is a multiple of the identity, and its trace-part
    (the isotropic component) otherwise; 0 when attention contributes no mean. A float; no gradient.

    Examples:
        >>> clip_mean_share(TemporalContextAggregator.mean_subtracting(16, 0.75, nhead=4))
        0.75
    """
    if not isinstance(model, TemporalContextAggregator):
        raise TypeError(f"model must be a TemporalContextAggregator, got {type(model).__name__}")
    if not 0 <= layer < len(model.encoder.layers):
        raise ValueError(f"layer must lie in [0, {len(model.encoder.layers)}), got {layer}")
    with torch.no_grad():
        product = _attention_value_output(model.encoder.layers[layer])
        return round(float(-torch.trace(product) / model.d_model), 12)


def mean_share_regression(features: Tensor, refined: Tensor, valid: Tensor | None = None) -> float:
    """The share k of the clip mean in refined frames, from the frames alone: fit ``y_t ≈ a x_t + b·mean(x) + c·1``.

    For every real frame, least squares of the refined frame ``refined [N, T, D]`` on its input ``x_t``
    (``features [N, T, D]``), the input clip's mean over real frames and the all-ones vector (which absorbs a
    LayerNorm's centring); ``k_t = −b / a`` is the share of the mean the map subtracts, since LayerNorm and L2
    normalisation only rescale and shift. Returns the median of ``k_t`` over real frames (a float). Exact for the
    hand-set layer of :meth:`TemporalContextAggregator.mean_subtracting` (feed-forward zeroed, LayerNorm at
    identity); about 0 for a per-frame map that is a multiple of the identity. Any aggregator with frame outputs.

    Examples:
        >>> _ = torch.manual_seed(0)
        >>> x = torch.randn(3, 6, 16)
        >>> model = TemporalContextAggregator.mean_subtracting(16, 1.25, nhead=4).eval()
        >>> round(mean_share_regression(x, model.frame_embeddings(x)), 6)
        1.25
    """
    features, valid, _ = _one_video(features, valid)
    refined = refined[None] if refined.ndim == 2 else refined
    valid = _check_inputs(features, valid, features.shape[-1])
    check_float_tensor(refined, "refined", ndim=3)
    if refined.shape != features.shape:
        raise ValueError(f"refined must have the shape of features {tuple(features.shape)}, got "
                         f"{tuple(refined.shape)}")
    with torch.no_grad():
        x, y = features.double(), refined.double()
        w = valid.unsqueeze(-1).double()
        mean = (x * w).sum(1, keepdim=True) / w.sum(1, keepdim=True).clamp_min(1)
        design = torch.stack([x, mean.expand_as(x), torch.ones_like(x)], dim=-1)    # [N, T, D, 3]
        coef = torch.linalg.lstsq(design[valid], y[valid].unsqueeze(-1)).solution[..., 0]   # [n, 3]
        return float((-coef[:, 1] / coef[:, 0]).median())
