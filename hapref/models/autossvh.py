"""AutoSSVH's networks: Grade-Net sampler, Gumbel top-K with straight-through, hashing Transformer, decoder.

Shapes: frame features ``[B, T, D]``; the sampler drops ``M`` of the ``T`` frames of each view
(AutoSSVH Eq. 4–5) and the hashing network sees the ``T - M`` kept frames in temporal order.
Sizes follow the released config (the released AutoSSVH code, https://github.com/EliSpectre/CVPR25-AutoSSVH): "small" = dim 256, 12 blocks, 6 heads,
decoder 192 / 2 blocks / 3 heads; "mini" is a CPU-sized stand-in.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from hapref.validation import check_float_tensor

__all__ = ["PRESETS", "AutoSSVHNet", "GradeNet", "HashPreset", "binarize_st", "drop_index", "gradient_reversal",
           "gumbel_noise", "gumbel_topk", "gumbel_topk_order", "hash_codes", "hiding_oracle_drop", "num_dropped",
           "plackett_luce_log_prob", "random_drop", "released_logits", "sinusoidal_positions", "soft_oracle_drop",
           "swap_pairs"]


@dataclass(frozen=True)
class HashPreset:
    """Encoder / decoder sizes of the hashing network.

    Examples:
        >>> PRESETS["mini"]
        HashPreset(dim=64, depth=2, heads=2, dec_dim=48, dec_depth=1, dec_heads=2)
    """

    dim: int
    depth: int
    heads: int
    dec_dim: int
    dec_depth: int
    dec_heads: int


PRESETS: dict[str, HashPreset] = {
    "mini": HashPreset(dim=64, depth=2, heads=2, dec_dim=48, dec_depth=1, dec_heads=2),
    # The released configs build "small" for all four datasets; the paper gives ActivityNet depth 6 and
    # dec_depth 1 (no preset here holds those sizes).
    "small": HashPreset(dim=256, depth=12, heads=6, dec_dim=192, dec_depth=2, dec_heads=3),
}


class _GradientReversal(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, scale: float) -> Tensor:  # type: ignore[override]
        ctx.scale = scale
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, None]:  # type: ignore[override]
        return -ctx.scale * grad, None


def gradient_reversal(x: Tensor, scale: float = 1.0) -> Tensor:
    """Identity forward, ``-scale ×`` gradient backward: the sampler ascends the loss the hasher descends (Eq. 18–19).

    Examples:
        >>> x = torch.tensor([1.0, 2.0], requires_grad=True)
        >>> gradient_reversal(x, scale=0.5).sum().backward()
        >>> x.grad
        tensor([-0.5000, -0.5000])
    """
    return _GradientReversal.apply(x, scale)


def gumbel_noise(shape: torch.Size | tuple[int, ...], eps: float = 1e-10, generator: torch.Generator | None = None,
                 device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> Tensor:
    """``G = -log(-log(U) + ε) + ε`` with ``U ~ U(0, 1)`` (AutoSSVH Eq. 3), a ``shape`` tensor of ``dtype``.

    Drawn in float32 (at least) and cast: ε = 1e-10 is 0 in float16, where log(0) would give inf and NaN.

    Examples:
        >>> noise = gumbel_noise((1000,), generator=torch.Generator().manual_seed(0), dtype=torch.float16)
        >>> noise.dtype, bool(torch.isfinite(noise).all()), round(noise.float().mean().item(), 1)  # mean ≈ 0.577
        (torch.float16, True, 0.6)
    """
    work = torch.promote_types(dtype, torch.float32)
    u = torch.rand(shape, generator=generator, dtype=work).to(device)
    return (-torch.log(-torch.log(u.clamp_min(eps)) + eps) + eps).to(dtype)


def released_logits(scores: Tensor, eps: float = 1e-10, generator: torch.Generator | None = None) -> Tensor:
    """The released code's perturbed scores (its ``get_gumbel``): ``z = S + G + 10·N``, standardised.

    ``G`` Gumbel(0, 1) as in :func:`gumbel_noise`, ``N ~ N(0, 1)``; ``z`` is then centred and divided by its
    standard deviation over the whole ``[B, T]`` tensor, ``(z − mean z) / std z``. The paper's Eq. 2 has
    ``S + δ·G`` instead; the released code has no δ and softmaxes ``z`` at temperature 0.5. ``N`` is drawn by
    Box–Muller from uniforms (``torch.randn`` rounds differently on different CPUs), in float64 and cast.

    Args:
        scores: [B, T] float frame scores.

    Returns:
        [B, T] perturbed scores of ``scores``'s dtype, mean 0 and standard deviation 1 over the tensor.

    Examples:
        >>> z = released_logits(torch.zeros(4, 25), generator=torch.Generator().manual_seed(0))
        >>> z.shape, round(z.mean().item(), 6) + 0.0, round(z.std().item(), 6)
        (torch.Size([4, 25]), 0.0, 1.0)
    """
    scores = check_float_tensor(scores, "scores", 2)
    u = torch.rand((2, *scores.shape), generator=generator, dtype=torch.float64)
    gauss = torch.sqrt(-2 * torch.log(u[0].clamp_min(eps))) * torch.cos(2 * torch.pi * u[1])
    g = gumbel_noise(scores.shape, eps, generator, scores.device, scores.dtype)
    z = scores + g + 10 * gauss.to(scores.device, scores.dtype)
    return (z - z.mean()) / z.std()


def gumbel_topk(scores: Tensor, k: int, delta: float = 1.0, temperature: float = 1.0, eps: float = 1e-10,
                generator: torch.Generator | None = None, noise: str = "gumbel") -> tuple[Tensor, Tensor]:
    """Differentiable top-``k`` frame choice (AutoSSVH Eq. 2 and 4) with a straight-through estimator.

    ``p = softmax((S + δ·G) / temperature)`` over the frames; the forward value is the exact k-hot
    vector of the ``k`` largest ``p`` and the backward pass uses the gradient of ``p``.

    Args:
        scores: [B, T] frame scores.
        k: frames to pick, 0 <= k <= T.
        delta: Gumbel noise scale δ (0 = deterministic top-k of the scores).
        noise: ``"gumbel"`` (the paper's ``S + δ·G``) or ``"released"`` (:func:`released_logits`, the
            released code's recipe, δ unused; it softmaxes at ``temperature`` 0.5).

    Returns:
        ``(hard, index)``: [B, T] k-hot (ST) and the [B, k] picked indices in temporal order.

    Examples:
        >>> hard, index = gumbel_topk(torch.tensor([[0.1, 0.9, 0.5, 0.2]]), k=2, delta=0.0)  # no noise: the top 2
        >>> hard, index
        (tensor([[0., 1., 1., 0.]]), tensor([[1, 2]]))
        >>> s, g = torch.tensor([[0.1, 0.9, 0.5, 0.2]]).expand(4000, -1), torch.Generator().manual_seed(0)
        >>> hard, _ = gumbel_topk(s, 2, generator=g)  # the paper's δ = 1: frame 1 dropped most often
        >>> [round(v, 1) for v in hard.detach().mean(0).tolist()]
        [0.4, 0.7, 0.5, 0.4]
        >>> hard, _ = gumbel_topk(s, 2, temperature=0.5, generator=g, noise="released")
        >>> [round(v, 1) for v in hard.detach().mean(0).tolist()]  # 10x Gaussian noise swamps the scores
        [0.5, 0.5, 0.5, 0.5]
    """
    scores = check_float_tensor(scores, "scores", 2)
    if noise not in ("gumbel", "released"):
        raise ValueError(f"noise must be 'gumbel' or 'released', got {noise!r}")
    if not 0 <= k <= scores.shape[1]:
        raise ValueError(f"k must lie in [0, T={scores.shape[1]}], got {k}")
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if noise == "released":
        logits = released_logits(scores, eps, generator)
    else:
        logits = scores + delta * gumbel_noise(scores.shape, eps, generator, scores.device, scores.dtype)
    soft = torch.softmax(logits / temperature, dim=-1)
    index = soft.topk(k, dim=-1).indices.sort(dim=-1).values
    hard = torch.zeros_like(soft).scatter(-1, index, 1.0)
    return hard - soft.detach() + soft, index


def gumbel_topk_order(scores: Tensor, k: int, delta: float = 1.0, eps: float = 1e-10,
                      generator: torch.Generator | None = None) -> Tensor:
    """The ``k`` frames of largest ``S + δ·G`` in the order they rank, ``[B, k]`` (no gradient).

    The same choice as :func:`gumbel_topk` (the ranking of ``softmax((S + δG)/τ)`` is that of ``S + δG``) but
    in rank order, not temporal order: the ordered sample whose probability
    :func:`plackett_luce_log_prob` gives (Gumbel top-k draws an ordered Plackett-Luce sample of logits
    ``S/δ``). A book diagnostic (chapter 7's score-function sampler), not part of the paper's method.

    Examples:
        >>> gumbel_topk_order(torch.tensor([[0.1, 0.9, 0.5, 0.2]]), 3, delta=0.0)   # no noise: by score
        tensor([[1, 2, 3]])
    """
    scores = check_float_tensor(scores, "scores", 2)
    if not 0 <= k <= scores.shape[1]:
        raise ValueError(f"k must lie in [0, T={scores.shape[1]}], got {k}")
    perturbed = scores.detach() + delta * gumbel_noise(scores.shape, eps, generator, scores.device, scores.dtype)
    return perturbed.topk(k, dim=-1).indices


def plackett_luce_log_prob(logits: Tensor, order: Tensor) -> Tensor:
    """Log-probability ``[B]`` of the ordered sample ``order [B, k]`` under Plackett-Luce with ``logits [B, T]``.

    ``log P(i_1, …, i_k) = Σ_j (θ_{i_j} − log Σ_{l ∉ {i_1, …, i_{j−1}}} e^{θ_l})``: the probability that
    :func:`gumbel_topk_order` draws ``i_1, …, i_k`` in that order when ``S/δ = θ``. Its gradient times a
    reward that depends only on the set ``{i_1, …, i_k}`` is an unbiased (score-function, REINFORCE) estimate
    of the gradient of the expected reward. A book diagnostic, not part of the paper's method.

    Examples:
        >>> theta = torch.zeros(1, 4)                       # uniform: 1/4 · 1/3 for any ordered pair
        >>> round(plackett_luce_log_prob(theta, torch.tensor([[2, 0]])).exp().item(), 6)
        0.083333
    """
    logits = check_float_tensor(logits, "logits", 2)
    if not isinstance(order, Tensor) or order.ndim != 2 or order.shape[0] != logits.shape[0] \
            or order.is_floating_point() or order.shape[1] > logits.shape[1]:
        raise ValueError(f"order must be [B={logits.shape[0]}, k <= T={logits.shape[1]}] integer frame indices, "
                         f"got {tuple(order.shape) if isinstance(order, Tensor) else type(order).__name__}")
    picked = logits.gather(1, order)                                                  # [B, k]
    taken = torch.zeros_like(logits, dtype=torch.bool)
    total = logits.new_zeros(logits.shape[0])
    for j in range(order.shape[1]):
        total = total + picked[:, j] - torch.logsumexp(logits.masked_fill(taken, float("-inf")), dim=-1)
        taken = taken.scatter(1, order[:, j:j + 1], True)
    return total


def _informative(informative: object, num_drop: object) -> Tensor:
    if not isinstance(informative, Tensor) or informative.dtype != torch.bool or informative.ndim != 2:
        raise ValueError(f"informative must be a bool [B, T] tensor, got "
                         f"{getattr(informative, 'dtype', type(informative).__name__)}")
    if not isinstance(num_drop, int) or not 0 <= num_drop < informative.shape[1]:
        raise ValueError(f"num_drop must be an int in [0, T={informative.shape[1]}), got {num_drop!r}")
    return informative


def hiding_oracle_drop(informative: Tensor, num_drop: int, generator: torch.Generator | None = None) -> Tensor:
    """The sampler that hides the content: drop the informative frames first, then random others, ``[B, M]``.

    A bound of the book (chapter 7), not the paper's method: with ``M`` at least the informative frames of a
    video, no view keeps any of them. ``informative`` bool ``[B, T]``; returns sorted int64 indices.

    Examples:
        >>> informative = torch.tensor([[False, True, False, True, False, False]])
        >>> drop = hiding_oracle_drop(informative, 3, torch.Generator().manual_seed(0))
        >>> informative.gather(1, drop).sum().item(), drop.shape
        (2, torch.Size([1, 3]))
    """
    informative = _informative(informative, num_drop)
    key = informative.double() + torch.rand(informative.shape, generator=generator, dtype=torch.float64)
    return key.topk(num_drop, dim=-1).indices.sort(-1).values


def soft_oracle_drop(informative: Tensor, num_drop: int, gap: float, delta: float = 1.0,
                     generator: torch.Generator | None = None) -> Tensor:
    """A noisy sampler that favours the content: drop the ``M`` largest ``−gap·[t informative] + δ·G``.

    Fixed keep-logits ``gap`` for informative frames and 0 for the others, Gumbel noise of scale ``δ``
    (:func:`gumbel_noise`) as the learned sampler has, so two views of a video still differ. ``gap = 0`` is a
    uniform random sampler. A bound of the book (chapter 7), not the paper's method. Returns ``[B, M]`` sorted.

    Examples:
        >>> informative = torch.tensor([[False, True, False, True, False, False]]).expand(2000, -1)
        >>> drop = soft_oracle_drop(informative, 3, gap=2.0, generator=torch.Generator().manual_seed(0))
        >>> kept = 2 - informative.gather(1, drop).sum(1).double().mean().item()    # of 2 informative frames
        >>> 1.5 < kept < 2
        True
    """
    informative = _informative(informative, num_drop)
    if not gap >= 0:
        raise ValueError(f"gap must be >= 0, got {gap}")
    logits = -gap * informative.double()
    logits = logits + delta * gumbel_noise(informative.shape, generator=generator, dtype=torch.float64)
    return logits.topk(num_drop, dim=-1).indices.sort(-1).values


def swap_pairs(drop: Tensor, informative: Tensor, generator: torch.Generator | None = None
               ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Per video, a kept uninformative frame and a dropped informative one, picked at random, and the swap.

    Returns ``(swapped [B, M], blank [B], content [B], valid [B] bool)``: ``swapped`` drops the blank frame
    instead of the content frame (sorted; rows that are not ``valid``, with no such pair, are ``drop``
    unchanged). The swap test of chapter 7 (a book diagnostic) compares an objective at ``drop`` and at
    ``swapped``.

    Examples:
        >>> informative = torch.tensor([[True, False, False, True]])
        >>> swapped, blank, content, valid = swap_pairs(torch.tensor([[0, 2]]), informative)
        >>> swapped, blank, content, valid
        (tensor([[1, 2]]), tensor([1]), tensor([0]), tensor([True]))
    """
    keep = torch.ones_like(informative).scatter(1, drop, False)
    blank_ok, content_ok = keep & ~informative, ~keep & informative
    valid = blank_ok.any(1) & content_ok.any(1)
    u = torch.rand((2, *informative.shape), generator=generator, dtype=torch.float64)
    blank = torch.where(blank_ok, u[0], -1.0).argmax(1)
    content = torch.where(content_ok, u[1], -1.0).argmax(1)
    swapped = torch.where(drop == content[:, None], blank[:, None], drop)
    swapped = torch.where(valid[:, None], swapped, drop).sort(-1).values
    return swapped, blank, content, valid


def drop_index(x: Tensor, drop: Tensor) -> tuple[Tensor, Tensor]:
    """DropIndex (AutoSSVH Eq. 5): remove frames ``drop`` [B, M] from ``x`` [B, T, ...].

    Returns the kept frames ``[B, T-M, ...]`` in temporal order and their indices ``[B, T-M]``.

    Examples:
        >>> x = torch.arange(5.0).view(1, 5, 1)
        >>> kept, keep = drop_index(x, torch.tensor([[1, 3]]))
        >>> kept.flatten(), keep
        (tensor([0., 2., 4.]), tensor([[0, 2, 4]]))
    """
    if not isinstance(drop, Tensor) or drop.ndim != 2 or drop.shape[0] != x.shape[0] or drop.is_floating_point():
        raise ValueError(f"drop must be [B={x.shape[0]}, M] integer frame indices, got "
                         f"{tuple(drop.shape) if isinstance(drop, Tensor) else type(drop).__name__}")
    if drop.numel() and (drop.min() < 0 or drop.max() >= x.shape[1]):
        raise ValueError(f"drop must hold frame positions in [0, T={x.shape[1]}), got values in "
                         f"[{int(drop.min())}, {int(drop.max())}]")
    keep_mask = torch.ones(x.shape[:2], dtype=torch.bool, device=x.device).scatter(1, drop, False)
    if (keep_mask.sum(1) != x.shape[1] - drop.shape[1]).any():
        raise ValueError("drop must hold distinct indices in every row")
    keep = keep_mask.nonzero()[:, 1].view(x.shape[0], -1)
    return _gather(x, keep), keep


def _gather(x: Tensor, index: Tensor) -> Tensor:
    return x.gather(1, index.view(*index.shape, *([1] * (x.ndim - 2))).expand(*index.shape, *x.shape[2:]))


def random_drop(batch: int, frames: int, num_drop: int, generator: torch.Generator | None = None,
                device: torch.device | str = "cpu", independent: bool = False) -> tuple[Tensor, Tensor]:
    """Random masks of two views.

    Default: ConMH-style (the released AutoSSVH code, https://github.com/EliSpectre/CVPR25-AutoSSVH): shuffle
    the frames once; view 1 drops the last ``num_drop`` shuffled frames, view 2 the first ``num_drop``, so the
    views share ``max(0, T − 2M)`` kept frames (none when M ≥ T/2). ``independent=True`` draws each view's
    dropped frames on its own, as the learned sampler's two Gumbel draws are: the views then share
    ``(T − M)²/T`` kept frames on average, which makes a like-for-like baseline for the learned sampler.

    Returns two [B, num_drop] index tensors, sorted.

    Examples:
        >>> g = torch.Generator().manual_seed(0)
        >>> d1, d2 = random_drop(1, 8, 4, g)
        >>> sorted(d1[0].tolist() + d2[0].tolist())  # complementary: every frame dropped exactly once
        [0, 1, 2, 3, 4, 5, 6, 7]
    """
    if not 0 <= num_drop < frames:
        raise ValueError(f"num_drop must lie in [0, frames={frames}), got {num_drop}")
    if independent:
        first = torch.rand(batch, frames, generator=generator).argsort(-1)[:, :num_drop]
        second = torch.rand(batch, frames, generator=generator).argsort(-1)[:, :num_drop]
        return first.sort(-1).values.to(device), second.sort(-1).values.to(device)
    perm = torch.rand(batch, frames, generator=generator).argsort(-1).to(device)
    return perm[:, frames - num_drop:].sort(-1).values, perm[:, :num_drop].sort(-1).values


def binarize_st(h: Tensor) -> Tensor:
    """``sgn(h)`` (0 -> +1) forward, identity gradient backward: the straight-through binary code (Eq. 7).

    Examples:
        >>> h = torch.tensor([-0.3, 0.0, 0.7], requires_grad=True)
        >>> b = binarize_st(h)
        >>> b.sum().backward()
        >>> b.detach(), h.grad
        (tensor([-1.,  1.,  1.]), tensor([1., 1., 1.]))
    """
    return h + (torch.where(h >= 0, 1.0, -1.0).to(h.dtype) - h).detach()


def hash_codes(frame_codes: Tensor) -> Tensor:
    """Binary video codes ``b = sgn(MeanPool(H))`` ∈ {±1}^K, ties -> +1 (AutoSSVH Eq. 7).

    Examples:
        >>> hash_codes(torch.tensor([[[0.5, -0.2], [-0.1, 0.2]]]))  # mean over frames, then the sign
        tensor([[1., 1.]])
    """
    return torch.where(frame_codes.mean(1) >= 0, 1.0, -1.0).to(frame_codes.dtype)


def sinusoidal_positions(length: int, dim: int) -> Tensor:
    """The fixed sine/cosine position table ``[length, dim]`` of the hashing encoder.

    Examples:
        >>> sinusoidal_positions(4, 6).shape
        torch.Size([4, 6])
    """
    pos = torch.arange(length, dtype=torch.float64)[:, None]
    freq = torch.pow(10000.0, -2 * (torch.arange(dim) // 2).double() / dim)
    angle = pos * freq
    return torch.where(torch.arange(dim) % 2 == 0, angle.sin(), angle.cos()).to(torch.get_default_dtype())


class _Block(nn.Module):
    """Pre-norm Transformer block; ``heads`` need not divide ``dim`` (attention width = heads·(dim // heads))."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        width = self.heads * self.head_dim
        self.norm1, self.norm2 = nn.LayerNorm(dim, eps=1e-6), nn.LayerNorm(dim, eps=1e-6)
        self.qkv, self.proj = nn.Linear(dim, 3 * width), nn.Linear(width, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: Tensor) -> Tensor:
        b, t, _ = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        x = x + self.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, -1))
        return x + self.mlp(self.norm2(x))


class GradeNet(nn.Module):
    """Per-frame score ``S = sigmoid(W4(LN(W2 σ(W1 V)) + V))`` ∈ (0, 1) (AutoSSVH Eq. 1).

    Examples:
        >>> scores = GradeNet(8)(torch.randn(2, 5, 8))
        >>> scores.shape, bool(((scores > 0) & (scores < 1)).all())
        (torch.Size([2, 5]), True)
    """

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.w1, self.w2, self.w4 = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, 1)
        self.norm = nn.LayerNorm(dim)

    def forward(self, tokens: Tensor) -> Tensor:
        """[B, T, dim] embedded frame tokens (float) -> [B, T] scores; another shape or size is a ``ValueError``.

        Examples:
            >>> GradeNet(8)(torch.randn(2, 5, 8)).shape
            torch.Size([2, 5])
            >>> GradeNet(8)(torch.randn(2, 5, 6))
            Traceback (most recent call last):
            ...
            ValueError: tokens must be [B, T, dim=8] embedded frame tokens, got shape (2, 5, 6)
        """
        tokens = check_float_tensor(tokens, "tokens", ndim=3)
        if tokens.shape[-1] != self.norm.normalized_shape[0]:
            raise ValueError(f"tokens must be [B, T, dim={self.norm.normalized_shape[0]}] embedded frame tokens, "
                             f"got shape {tuple(tokens.shape)}")
        return torch.sigmoid(self.w4(self.norm(self.w2(F.gelu(self.w1(tokens)))) + tokens)).squeeze(-1)


class AutoSSVHNet(nn.Module):
    """Grade-Net sampler + hashing Transformer + frame-reconstruction decoder (AutoSSVH Fig. 2).

    Examples:
        >>> net = AutoSSVHNet(feature_dim=12, nbits=16, frames=8).eval()
        >>> x = torch.randn(2, 8, 12)
        >>> codes = net.encode(x)
        >>> codes.shape, sorted(codes.unique().tolist())
        (torch.Size([2, 16]), [-1.0, 1.0])
        >>> kept, keep, drop = net.sample(x, num_drop=3, generator=torch.Generator().manual_seed(0))
        >>> h, b, recon = net.view(x, drop, kept)
        >>> h.shape, b.shape, recon.shape
        (torch.Size([2, 5, 16]), torch.Size([2, 16]), torch.Size([2, 3, 12]))
    """

    def __init__(self, feature_dim: int, nbits: int, frames: int, preset: str | HashPreset = "mini") -> None:
        super().__init__()
        if isinstance(preset, str):
            if preset not in PRESETS:
                raise ValueError(f"preset must be one of {tuple(PRESETS)} or a HashPreset, got {preset!r}")
            preset = PRESETS[preset]
        if nbits < 1 or frames < 2 or feature_dim < 1:
            raise ValueError(f"need nbits >= 1, frames >= 2, feature_dim >= 1; got {nbits}, {frames}, {feature_dim}")
        self.nbits, self.frames, self.preset = nbits, frames, preset
        self.embed = nn.Linear(feature_dim, preset.dim)
        self.register_buffer("pos", sinusoidal_positions(frames, preset.dim), persistent=False)
        self.grade = GradeNet(preset.dim)
        self.blocks = nn.Sequential(*(_Block(preset.dim, preset.heads) for _ in range(preset.depth)))
        self.norm = nn.LayerNorm(preset.dim, eps=1e-6)
        self.head = nn.Linear(preset.dim, nbits)
        self.dec_in = nn.Linear(nbits, preset.dec_dim, bias=False)
        self.dec_pos = nn.Parameter(torch.zeros(frames, preset.dec_dim))
        self.mask_token = nn.Parameter(torch.randn(preset.dec_dim) * 0.02)
        self.dec_blocks = nn.Sequential(*(_Block(preset.dec_dim, preset.dec_heads) for _ in range(preset.dec_depth)))
        self.dec_norm = nn.LayerNorm(preset.dec_dim, eps=1e-6)
        self.dec_out = nn.Linear(preset.dec_dim, feature_dim)

    def tokens(self, x: Tensor) -> Tensor:
        """Embedded frame tokens ``[B, T, dim]`` (projection + sinusoidal positions) of features ``x [B, T, D]``.

        ``T`` must equal the ``frames`` the net was built for; ``dim`` is the preset's width. These tokens feed
        both the Grade-Net (:meth:`scores`) and the hashing encoder (:meth:`frame_codes`).

        Examples:
            >>> _ = torch.manual_seed(0)
            >>> net, x = AutoSSVHNet(feature_dim=12, nbits=16, frames=8).eval(), torch.randn(2, 8, 12)
            >>> tokens = net.tokens(x)
            >>> tokens.shape, torch.allclose(tokens, net.embed(x) + sinusoidal_positions(8, net.preset.dim))
            (torch.Size([2, 8, 64]), True)
        """
        x = check_float_tensor(x, "x", ndim=None)
        if x.ndim != 3 or x.shape[1] != self.frames or x.shape[2] != self.embed.in_features:
            raise ValueError(f"x must be [B, T={self.frames}, D={self.embed.in_features}] frame features, "
                             f"got shape {tuple(x.shape)}")
        return self.embed(x) + self.pos

    def scores(self, x: Tensor) -> Tensor:
        """Grade-Net scores ``[B, T]`` ∈ (0, 1) of the frames of ``x [B, T, D]`` (Eq. 1); high = dropped first.

        Examples:
            >>> _ = torch.manual_seed(0)
            >>> net, x = AutoSSVHNet(feature_dim=12, nbits=16, frames=8).eval(), torch.randn(2, 8, 12)
            >>> scores = net.scores(x)
            >>> scores.shape, bool(((scores > 0) & (scores < 1)).all())
            (torch.Size([2, 8]), True)
            >>> torch.equal(scores, net.grade(net.tokens(x)))  # the Grade-Net applied to the embedded tokens
            True
        """
        return self.grade(self.tokens(x))

    def frame_codes(self, tokens: Tensor) -> Tensor:
        """Continuous per-frame codes ``H = tanh(Z)`` ``[B, T', nbits]`` ∈ (−1, 1) of (kept) tokens ``[B, T', dim]``
        (Eq. 6); the video code is the sign of their mean over frames (``hapref.models.autossvh.hash_codes``, Eq. 7).

        Examples:
            >>> _ = torch.manual_seed(0)
            >>> net, x = AutoSSVHNet(feature_dim=12, nbits=16, frames=8).eval(), torch.randn(2, 8, 12)
            >>> h = net.frame_codes(net.tokens(x)[:, :5])  # any number T' of tokens, e.g. the kept ones
            >>> h.shape, bool((h.abs() < 1).all())
            (torch.Size([2, 5, 16]), True)
            >>> torch.equal(hash_codes(net.frame_codes(net.tokens(x))), net.encode(x))  # all frames visible
            True
        """
        return torch.tanh(self.head(self.norm(self.blocks(tokens))))

    def sample(self, x: Tensor, num_drop: int, adversarial: bool = True, delta: float = 1.0,
               temperature: float = 1.0, generator: torch.Generator | None = None,
               noise: str = "gumbel") -> tuple[Tensor, Tensor, Tensor]:
        """Learned view: drop the ``num_drop`` highest Gumbel-perturbed Grade-Net frames (Eq. 2–5).

        With ``adversarial`` the scores pass a gradient-reversal layer, so training the whole net on
        the loss makes the Grade-Net *maximise* it (Eq. 18–19). Returns the kept tokens
        ``[B, T-M, dim]`` (multiplied by the ST keep indicator, value 1, so gradients reach the scores),
        the kept and the dropped indices, ``[B, T-M]`` and ``[B, M]`` long, each sorted.

        Examples:
            >>> _ = torch.manual_seed(0)
            >>> net, x = AutoSSVHNet(feature_dim=12, nbits=16, frames=8).eval(), torch.randn(2, 8, 12)
            >>> kept, keep, drop = net.sample(x, num_drop=3, delta=0.0)  # no noise: the 3 top-scored frames
            >>> kept.shape, keep.shape, torch.equal(drop, net.scores(x).topk(3).indices.sort().values)
            (torch.Size([2, 5, 64]), torch.Size([2, 5]), True)
            >>> torch.equal(kept, drop_index(net.tokens(x), drop)[0])  # value: the kept tokens unchanged
            True
            >>> def grade_grad(adversarial):  # gradient the Grade-Net gets from a loss on the kept tokens
            ...     net.zero_grad()
            ...     net.sample(x, 3, adversarial=adversarial, delta=0.0)[0].sum().backward()
            ...     return net.grade.w4.weight.grad.clone()
            >>> torch.allclose(grade_grad(True), -grade_grad(False))  # reversed: the sampler ascends the loss
            True
        """
        tokens = self.tokens(x)
        scores = self.grade(tokens)
        if adversarial:
            scores = gradient_reversal(scores)
        hard, drop = gumbel_topk(scores, num_drop, delta, temperature, generator=generator, noise=noise)
        kept, keep = drop_index(tokens * (1.0 - hard)[..., None], drop)
        return kept, keep, drop

    def view(self, x: Tensor, drop: Tensor, kept_tokens: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """Hash a view with frames ``drop`` removed and reconstruct them.

        Returns ``(H, b, recon)``: per-frame codes ``[B, T-M, nbits]``, the straight-through binary
        video code ``[B, nbits]`` and the decoded dropped frames ``[B, M, D]``. ``x [B, T, D]`` float, ``drop [B, M]``
        long; ``kept_tokens`` (from :meth:`sample`) replaces the tokens of the kept frames, to let gradients reach
        the sampler.

        Examples:
            >>> _ = torch.manual_seed(0)
            >>> net, x = AutoSSVHNet(feature_dim=12, nbits=16, frames=8).eval(), torch.randn(2, 8, 12)
            >>> kept, keep, drop = net.sample(x, num_drop=3, generator=torch.Generator().manual_seed(0))
            >>> h, b, recon = net.view(x, drop, kept)
            >>> h.shape, b.shape, recon.shape
            (torch.Size([2, 5, 16]), torch.Size([2, 16]), torch.Size([2, 3, 12]))
            >>> torch.equal(b, hash_codes(h)), torch.allclose(recon, net.view(x, drop)[2])  # same as from x alone
            (True, True)
            >>> hidden = x.clone()
            >>> hidden[torch.arange(2)[:, None], drop] = 100.0  # the dropped frames are never seen
            >>> torch.allclose(net.view(hidden, drop)[2], recon)
            True
        """
        if kept_tokens is None:
            kept_tokens, keep = drop_index(self.tokens(x), drop)
        else:
            keep_mask = torch.ones(x.shape[:2], dtype=torch.bool, device=x.device).scatter(1, drop, False)
            keep = keep_mask.nonzero()[:, 1].view(x.shape[0], -1)
        h = self.frame_codes(kept_tokens)
        return h, binarize_st(h.mean(1)), self.decode(h, keep, drop)

    def decode(self, h: Tensor, keep: Tensor, drop: Tensor) -> Tensor:
        """Reconstruct the dropped frames ``[B, M, D]`` from the kept frame codes (decoder of Fig. 2).

        ``h [B, T-M, nbits]`` are the kept frames' codes, ``keep [B, T-M]`` and ``drop [B, M]`` the (long) frame
        positions; dropped frames enter as a learned mask token plus their position embedding.

        Examples:
            >>> _ = torch.manual_seed(0)
            >>> net, x = AutoSSVHNet(feature_dim=12, nbits=16, frames=8).eval(), torch.randn(2, 8, 12)
            >>> drop = torch.tensor([[1, 4], [0, 7]])
            >>> kept, keep = drop_index(net.tokens(x), drop)
            >>> h = net.frame_codes(kept)
            >>> recon = net.decode(h, keep, drop)
            >>> recon.shape, torch.equal(recon, net.view(x, drop)[2])
            (torch.Size([2, 2, 12]), True)
            >>> loss = (recon - x[torch.arange(2)[:, None], drop]).pow(2).mean()  # the reconstruction loss
            >>> loss.shape
            torch.Size([])
        """
        b, m = drop.shape
        visible = self.dec_in(h) + self.dec_pos[keep]
        masked = self.mask_token + self.dec_pos[drop]
        out = self.dec_norm(self.dec_blocks(torch.cat([visible, masked], 1)))
        return self.dec_out(out[:, out.shape[1] - m:])

    @torch.no_grad()
    def encode(self, x: Tensor) -> Tensor:
        """Binary codes ``[B, nbits]`` ∈ {±1} of ``x [B, T, D]`` with every frame visible (Eq. 7; evaluation path).

        Runs without autograd; retrieval ranks database codes by Hamming distance ``(nbits − b_q·b_d) / 2``.

        Examples:
            >>> _ = torch.manual_seed(0)
            >>> net, x = AutoSSVHNet(feature_dim=12, nbits=16, frames=8).eval(), torch.randn(2, 8, 12)
            >>> codes = net.encode(x)
            >>> codes.shape, sorted(codes.unique().tolist()), codes.requires_grad
            (torch.Size([2, 16]), [-1.0, 1.0], False)
            >>> no_drop = torch.zeros(2, 0, dtype=torch.long)
            >>> torch.equal(codes, net.view(x, no_drop)[1])  # the training view with nothing dropped
            True
            >>> hamming = (16 - codes @ codes.T) / 2
            >>> hamming.diag().tolist()
            [0.0, 0.0]
        """
        return hash_codes(self.frame_codes(self.tokens(x)))


def num_dropped(frames: int, drop_ratio: float) -> int:
    """Frames dropped per view, ``int(T · ratio)`` as in the released masks (the released AutoSSVH code, https://github.com/EliSpectre/CVPR25-AutoSSVH).

    Examples:
        >>> num_dropped(25, 0.5)
        12
    """
    if not 0 <= drop_ratio < 1:
        raise ValueError(f"drop_ratio must lie in [0, 1), got {drop_ratio}")
    return min(int(frames * drop_ratio), frames - 1)
