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
