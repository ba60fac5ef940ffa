"""Binary hash codes as packed bytes: ±1 (or 0/1) codes <-> ``uint8`` rows, 8 bits a byte.

Bit layout (the one of ``numpy.packbits(..., bitorder="little")`` and of FAISS's ``fvecs2bitvecs``):
bit ``j`` of a code is bit ``j % 8`` (least significant first) of byte ``j // 8``, and a bit is 1
where the code is +1 (or 1) and 0 where it is −1 (or 0). The Hamming distance of two codes is the
number of differing bits, i.e. ``(bits − <b1, b2>) / 2`` for ±1 codes (AutoSSVH Sec. 4.2 ranks the
database by it). A 64-bit code takes 8 bytes packed instead of 256 bytes as float32: 32× smaller.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from hapref.validation import check_float_tensor


def _as_tensor(x: object, name: str) -> Tensor:
    """A torch view of a tensor or numpy array, else TypeError naming the argument."""
    if isinstance(x, Tensor):
        return x.detach()
    if isinstance(x, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(x))
    raise TypeError(f"{name} must be a torch.Tensor or a numpy array, got {type(x).__name__}")


def code_bits(codes: object, name: str = "codes") -> Tensor:
    """Unpacked codes ``[N, bits]`` as a bool tensor (True = +1), after checking their values.

    Accepts bool, integer or float tensors / arrays holding only {−1, +1} or only {0, 1}.

    Examples:
        >>> code_bits(torch.tensor([[1.0, -1.0, 1.0]]))
        tensor([[ True, False,  True]])
        >>> code_bits(torch.tensor([[0.5, -1.0]]))
        Traceback (most recent call last):
        ...
        ValueError: codes must hold only ±1 or only 0/1 values (binarise with sign() first)
    """
    x = _as_tensor(codes, name)
    if x.ndim != 2:
        raise ValueError(f"{name} must be a 2-D [N, bits] array of codes, got shape {tuple(x.shape)}")
    if x.dtype == torch.bool:
        return x
    if x.is_floating_point():
        check_float_tensor(x, name)
    elif x.is_complex():
        raise TypeError(f"{name} must be real ±1 or 0/1 codes, got dtype {x.dtype}")
    pos, neg, zero = x == 1, x == -1, x == 0
    if not (pos | neg | zero).all():
        hint = " (packed bytes? pass packed=True)" if x.dtype == torch.uint8 else " (binarise with sign() first)"
        raise ValueError(f"{name} must hold only ±1 or only 0/1 values{hint}")
    if neg.any() and zero.any():
        raise ValueError(f"{name} mixes −1 and 0: use ±1 codes or 0/1 codes, not both")
    return pos


def pack_codes(codes: object) -> Tensor:
    """Pack binary codes ``[N, bits]`` into bytes ``[N, bits // 8]`` (``torch.uint8``), the form FAISS stores.

    The codes of AutoSSVH Eq. 20 (``sign`` of the hash layer) or of any hashing model. Bit ``j`` of a
    code goes to bit ``j % 8`` (least significant first) of byte ``j // 8``; +1 (or 1) gives a set bit.

    Args:
        codes: [N, bits] torch tensor or numpy array; bool, integer or float holding only {−1, +1} or
            only {0, 1}. ``bits`` must be a multiple of 8 (FAISS binary indexes work on whole bytes).

    Returns:
        [N, bits // 8] uint8 tensor on the CPU.

    Examples:
        >>> import torch
        >>> codes = torch.tensor([[1., -1, -1, -1, -1, -1, -1, 1], [-1, 1, -1, -1, -1, -1, -1, -1]])
        >>> pack_codes(codes)
        tensor([[129],
                [  2]], dtype=torch.uint8)
    """
    return _pack(codes, "codes")


def _pack(codes: object, name: str) -> Tensor:
    bits = code_bits(codes, name)
    if bits.shape[1] == 0 or bits.shape[1] % 8:
        raise ValueError(f"{name} must have a positive number of bits that is a multiple of 8 (FAISS binary "
                         f"indexes store whole bytes), got {bits.shape[1]} bits")
    return torch.from_numpy(np.packbits(bits.cpu().numpy(), axis=1, bitorder="little"))


def unpack_codes(packed: object, bits: int | None = None, signed: bool = True) -> Tensor:
    """Inverse of :func:`pack_codes`: bytes ``[N, B]`` back to ``[N, bits]`` float32 codes.

    Args:
        packed: [N, B] uint8 torch tensor or numpy array (e.g. from :func:`pack_codes`).
        bits: number of bits to keep (default ``8·B``).
        signed: True gives ±1 codes, False gives 0/1.

    Returns:
        [N, bits] float32 tensor.

    Examples:
        >>> import torch
        >>> unpack_codes(torch.tensor([[129]], dtype=torch.uint8))
        tensor([[ 1., -1., -1., -1., -1., -1., -1.,  1.]])
        >>> unpack_codes(torch.tensor([[2]], dtype=torch.uint8), bits=4, signed=False)
        tensor([[0., 1., 0., 0.]])
    """
    x = check_packed(packed, "packed")
    total = 8 * x.shape[1]
    if bits is None:
        bits = total
    if not isinstance(bits, int) or isinstance(bits, bool) or not 0 < bits <= total:
        raise ValueError(f"bits must be an int in [1, {total}] for {x.shape[1]} bytes per code, got {bits!r}")
    out = torch.from_numpy(np.unpackbits(x.numpy(), axis=1, bitorder="little")[:, :bits].astype(np.float32))
    return out * 2 - 1 if signed else out


def check_packed(packed: object, name: str, nbytes: int | None = None) -> Tensor:
    """``packed`` as a contiguous CPU uint8 tensor ``[N, B]`` (checked), else a clear error.

    Examples:
        >>> check_packed(torch.zeros(2, 4, dtype=torch.uint8), "packed").shape
        torch.Size([2, 4])
        >>> check_packed(torch.zeros(2, 4), "packed")
        Traceback (most recent call last):
        ...
        TypeError: packed must be packed codes of dtype uint8 (see pack_codes), got torch.float32
    """
    x = _as_tensor(packed, name)
    if x.dtype != torch.uint8:
        raise TypeError(f"{name} must be packed codes of dtype uint8 (see pack_codes), got {x.dtype}")
    if x.ndim != 2 or x.shape[1] == 0:
        raise ValueError(f"{name} must be a 2-D [N, bytes] array of packed codes, got shape {tuple(x.shape)}")
    if nbytes is not None and x.shape[1] != nbytes:
        raise ValueError(f"{name} must have {nbytes} bytes ({8 * nbytes} bits) per code, got {x.shape[1]}")
    return x.cpu().contiguous()


def as_packed(codes: object, name: str = "codes", nbytes: int | None = None, packed: bool = False) -> Tensor:
    """Packed bytes of codes: unpacked ±1 / 0-1 codes are packed (:func:`pack_codes`), ``packed=True`` codes checked.

    Nothing is guessed from the dtype: ``uint8`` 0/1 codes are unpacked codes unless ``packed=True`` says they
    are bytes.

    Examples:
        >>> codes = torch.ones(2, 16)
        >>> torch.equal(as_packed(codes), as_packed(pack_codes(codes), packed=True))
        True
        >>> as_packed(torch.ones(2, 16, dtype=torch.uint8)).shape  # 16 unpacked bits -> 2 bytes
        torch.Size([2, 2])
    """
    if not isinstance(packed, bool):
        raise TypeError(f"packed must be True (bytes from pack_codes) or False (±1 / 0-1 codes), got {packed!r}")
    if packed:
        return check_packed(codes, name, nbytes)
    x = _pack(codes, name)
    if nbytes is not None and x.shape[1] != nbytes:
        raise ValueError(f"{name} must have {8 * nbytes} bits per code (as the index), got {8 * x.shape[1]}"
                         + (" (packed bytes? pass packed=True)" if _as_tensor(codes, name).dtype == torch.uint8
                            and _as_tensor(codes, name).shape[1] == nbytes else ""))
    return x


def _mean_features(features: object, name: str) -> Tensor:
    """``features`` as a float64 ``[N, F]`` tensor, checked (finite, two dimensions, at least one row)."""
    x = _as_tensor(features, name)
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(f"{name} must be a 2-D [N, F] array of (mean frame) features, got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must hold floating-point features, got dtype {x.dtype}")
    check_float_tensor(x, name)
    return x.to(torch.float64)


def _check_bits(bits: object, limit: int | None = None) -> int:
    if not isinstance(bits, int) or isinstance(bits, bool) or bits < 1 or (limit is not None and bits > limit):
        raise ValueError(f"bits must be a positive int{'' if limit is None else f' <= {limit}'}, got {bits!r}")
    return bits


def _signs(x: Tensor) -> Tensor:
    """±1 of ``x`` with ties (exact zeros) to +1, as the hash codes of AutoSSVH Eq. 7."""
    return torch.where(x >= 0, 1.0, -1.0).to(torch.float64)


def lsh_codes(features: object, bits: int, seed: int = 0, mean: object = None) -> Tensor:
    """Random-projection hashing (sign LSH, Charikar 2002): ``sign((x − μ) W)`` with Gaussian ``W [F, bits]``.

    A training-free baseline for learned video hashing: the codes of mean frame features under a random
    hyperplane projection. Two codes differ in a bit with probability θ/π, θ the angle between the centred
    features, so Hamming distance estimates that angle. ``W`` is drawn in float64 from a generator seeded with
    ``seed`` (the same ``W`` on every machine, whatever the default dtype); ``μ`` is ``mean`` (e.g. the mean of
    the training videos' features, so that database and queries share one centre) or, when omitted, the mean
    of ``features``. Ties (a projection of exactly 0) go to +1.

    Args:
        features: ``[N, F]`` float tensor or numpy array (one row per video, e.g. its mean frame feature).
        bits: code length K.
        seed: seed of the projection.
        mean: ``[F]`` centre μ, default ``features.mean(0)``.

    Returns:
        ``[N, bits]`` float64 tensor of ±1 codes.

    Examples:
        >>> x = torch.tensor([[1.0, 0.0], [0.9, 0.1], [-1.0, 0.0]])
        >>> codes = lsh_codes(x, 16, seed=0, mean=torch.zeros(2))
        >>> codes.shape, codes.dtype, codes.unique().tolist()
        (torch.Size([3, 16]), torch.float64, [-1.0, 1.0])
        >>> int((codes[0] != codes[2]).sum())      # opposite directions: every bit differs
        16
        >>> torch.equal(codes, lsh_codes(x, 16, seed=0, mean=torch.zeros(2)))
        True
    """
    x = _mean_features(features, "features")
    _check_bits(bits)
    centre = x.mean(0) if mean is None else _mean_features(_as_tensor(mean, "mean").reshape(1, -1), "mean")[0]
    if centre.shape[0] != x.shape[1]:
        raise ValueError(f"mean must have {x.shape[1]} entries (one per feature), got {centre.shape[0]}")
    generator = torch.Generator().manual_seed(seed)
    projection = torch.randn(x.shape[1], bits, generator=generator, dtype=torch.float64)
    return _signs((x - centre) @ projection)


def pca_sign_codes(train_features: object, features: object, bits: int) -> Tensor:
    """PCA hashing (PCAH, e.g. Gong & Lazebnik 2011's baseline): ``sign((x − μ) V_K)``, PCA fitted on training rows.

    ``μ`` and the top-``bits`` principal directions ``V_K [F, bits]`` (the right singular vectors of the
    centred ``train_features`` with the largest singular values, computed in float64) come from the training
    videos only; ``features`` (database or queries) are projected on them and binarised, ties to +1. A
    principal direction is defined up to sign and flipping a bit of every code leaves all Hamming distances
    unchanged; for reproducible codes each direction is oriented so that its largest-magnitude entry is
    positive.

    Args:
        train_features: ``[N_train, F]`` float tensor or numpy array the PCA is fitted on
            (``bits <= min(N_train, F)``).
        features: ``[N, F]`` rows to encode.
        bits: code length K (number of principal components).

    Returns:
        ``[N, bits]`` float64 tensor of ±1 codes.

    Examples:
        >>> train = torch.tensor([[2.0, 0.1], [-2.0, -0.1], [0.0, 1.0], [0.0, -1.0]])
        >>> pca_sign_codes(train, torch.tensor([[3.0, 0.5], [-1.0, 0.5]]), 2)
        tensor([[ 1.,  1.],
                [-1.,  1.]], dtype=torch.float64)
    """
    train = _mean_features(train_features, "train_features")
    x = _mean_features(features, "features")
    _check_bits(bits, min(train.shape))
    if x.shape[1] != train.shape[1]:
        raise ValueError(f"features have {x.shape[1]} dimensions, train_features {train.shape[1]}")
    centre, directions = _pca(train, bits)
    return _signs((x - centre) @ directions)


def _pca(train: Tensor, components: int) -> tuple[Tensor, Tensor]:
    """``(μ [F], W [F, components])``: the centre and the oriented top principal directions of ``train``."""
    centre = train.mean(0)
    _, _, vh = torch.linalg.svd(train - centre, full_matrices=False)
    top = vh[:components]                                                     # [components, F]
    flip = top.gather(1, top.abs().argmax(1, keepdim=True)).sign()
    return centre, (top * flip).T
