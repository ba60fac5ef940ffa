"""Nearest-neighbour search with FAISS: Hamming distance on packed codes, inner product on vectors.

:class:`HammingIndex` wraps FAISS's exact ``IndexBinaryFlat`` (or, with ``nlist``, the approximate
inverted-file ``IndexBinaryIVF`` for millions of codes); :class:`VectorIndex` wraps the exact
inner-product ``IndexFlatIP`` for video-level vectors (normalise them first for cosine similarity).
Both take torch tensors or numpy arrays and return torch tensors.

Ties: for equal distances FAISS returns the item with the smaller id first, so the k-th result of
a query is an arbitrary member of its tie group. Metrics that cut a ranking at N must count the whole
tie group at the boundary (see :func:`hapref.metrics.hamming_map_at_n`), not trust this order.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from hapref.search.codes import _as_tensor, as_packed
from hapref.validation import check_float_tensor


def _faiss():
    """FAISS, imported on first use."""
    import faiss
    return faiss


def _check_k(k: object, size: int) -> int:
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")
    if k > size:
        raise ValueError(f"k must be at most the number of indexed items ({size}), got {k}")
    return k


class HammingIndex:
    """Exact (or IVF) Hamming-distance search over binary codes with FAISS (AutoSSVH Sec. 4.2 retrieval).

    Args:
        codes: the database, [M, bytes] packed ``uint8`` codes (:func:`hapref.search.pack_codes`) or
            unpacked [M, bits] ±1 / 0-1 codes (bool, int or float); ``bits`` a multiple of 8.
        nlist: None for the exact ``IndexBinaryFlat``; an int for ``IndexBinaryIVF`` with that many
            lists, trained on ``codes`` (needs at least ``nlist`` codes; approximate).
        nprobe: lists visited per query by the IVF index.

    ``search(queries, k)`` returns ``(distances, indices)``, both ``[Q, k]`` int64 tensors, sorted by
    increasing distance in bits; equal distances come by increasing index (FAISS's order).
    An IVF index only scans ``nprobe`` lists: a query whose lists hold fewer than k codes gets index −1
    in the missing places (FAISS's convention).

    Examples:
        >>> import torch
        >>> db = torch.tensor([[1, 1, 1, 1, 1, 1, 1, 1], [1, -1, 1, 1, 1, 1, 1, 1], [-1] * 8])
        >>> index = HammingIndex(db)
        >>> len(index), index.bits
        (3, 8)
        >>> index.search(torch.tensor([[1, -1, 1, 1, 1, 1, 1, -1]]), k=2)
        (tensor([[1, 2]]), tensor([[1, 0]]))
    """

    def __init__(self, codes: object, nlist: int | None = None, nprobe: int = 8) -> None:
        packed = as_packed(codes, "codes")
        self.bits = 8 * packed.shape[1]
        faiss = _faiss()
        if nlist is None:
            self._index = faiss.IndexBinaryFlat(self.bits)
        else:
            if not isinstance(nlist, int) or isinstance(nlist, bool) or not 1 <= nlist <= packed.shape[0]:
                raise ValueError(f"nlist must be an int in [1, number of codes = {packed.shape[0]}], got {nlist!r}")
            if not isinstance(nprobe, int) or isinstance(nprobe, bool) or nprobe < 1:
                raise ValueError(f"nprobe must be a positive int, got {nprobe!r}")
            quantizer = faiss.IndexBinaryFlat(self.bits)
            self._index = faiss.IndexBinaryIVF(quantizer, self.bits, nlist)
            self._quantizer = quantizer  # keep the Python object alive with the index
            self._index.train(packed.numpy())
            self._index.nprobe = nprobe
        self._index.add(packed.numpy())

    @classmethod
    def _wrap(cls, index) -> HammingIndex:
        self = cls.__new__(cls)
        self._index, self.bits = index, index.d
        return self

    def __len__(self) -> int:
        return int(self._index.ntotal)

    def __repr__(self) -> str:
        return f"HammingIndex({len(self)} codes of {self.bits} bits, {type(self._index).__name__})"

    def add(self, codes: object) -> None:
        """Append codes (packed or unpacked, same bit count); they get the next indices.

        Args:
            codes: [M', bytes] packed ``uint8`` or [M', bits] unpacked ±1 / 0-1 codes, ``bits`` as the index.

        Examples:
            >>> index = HammingIndex(torch.tensor([[1] * 8]))
            >>> index.add(torch.tensor([[-1] * 8, [1, 1, 1, 1, 1, 1, 1, -1]]))
            >>> len(index), index.search(torch.tensor([[1, 1, 1, 1, 1, 1, -1, -1]]), k=3)[1]  # ids 1, 2 are new
            (3, tensor([[2, 0, 1]]))
        """
        self._index.add(as_packed(codes, "codes", self.bits // 8).numpy())

    def search(self, queries: object, k: int) -> tuple[Tensor, Tensor]:
        """The ``k`` nearest codes of each query: ``(distances in bits, indices)``, [Q, k] int64 each.

        Args:
            queries: [Q, bytes] packed or [Q, bits] unpacked codes, ``bits`` as the index.
            k: results per query, 1 ≤ k ≤ ``len(self)``.

        Examples:
            >>> from hapref.search import pack_codes
            >>> g = torch.Generator().manual_seed(0)
            >>> db, queries = torch.randint(0, 2, (50, 64), generator=g), torch.randint(0, 2, (4, 64), generator=g)
            >>> distances, ids = HammingIndex(pack_codes(db * 2 - 1)).search(queries, k=5)
            >>> brute = (queries[:, None, :] != db[None, :, :]).sum(-1)  # [Q, M] Hamming distances
            >>> torch.equal(distances, brute.sort(dim=1).values[:, :5])
            True
            >>> torch.equal(brute.gather(1, ids), distances)  # each id is at the distance reported
            True
        """
        q = as_packed(queries, "queries", self.bits // 8)
        k = _check_k(k, len(self))
        distances, indices = self._index.search(q.numpy(), k)
        return torch.from_numpy(distances.astype(np.int64)), torch.from_numpy(indices)

    def range_search(self, queries: object, radius: int) -> tuple[Tensor, Tensor, Tensor]:
        """Every code within ``radius`` bits (inclusive) of each query, in CSR form.

        Returns ``(offsets [Q+1], distances, indices)`` (int64): query ``i``'s results are
        ``distances[offsets[i]:offsets[i+1]]`` and the matching ``indices``, in no particular order.

        Args:
            queries: [Q, bytes] packed or [Q, bits] unpacked codes, ``bits`` as the index.
            radius: the largest Hamming distance kept, an int ≥ 0.

        Examples:
            >>> g = torch.Generator().manual_seed(0)
            >>> db, queries = torch.randint(0, 2, (50, 16), generator=g), torch.randint(0, 2, (2, 16), generator=g)
            >>> offsets, distances, ids = HammingIndex(db).range_search(queries, radius=5)
            >>> brute = (queries[:, None, :] != db[None, :, :]).sum(-1)  # [Q, M]
            >>> all(sorted(ids[offsets[i]:offsets[i + 1]].tolist()) == torch.nonzero(brute[i] <= 5).flatten().tolist()
            ...     for i in range(2))
            True
            >>> bool((distances <= 5).all()), offsets.shape
            (True, torch.Size([3]))
        """
        q = as_packed(queries, "queries", self.bits // 8)
        if not isinstance(radius, int) or isinstance(radius, bool) or radius < 0:
            raise ValueError(f"radius must be a non-negative int (bits), got {radius!r}")
        offsets, distances, indices = self._index.range_search(q.numpy(), radius + 1)  # FAISS: distance < radius
        return (torch.from_numpy(offsets.astype(np.int64)), torch.from_numpy(distances.astype(np.int64)),
                torch.from_numpy(indices.astype(np.int64)))

    def save(self, path: str | os.PathLike) -> None:
        """Write the index (codes included) to ``path`` in FAISS's format; read it back with :meth:`load`.

        Examples:
            >>> import tempfile
            >>> from pathlib import Path
            >>> index = HammingIndex(torch.tensor([[1] * 8, [-1] * 8]))
            >>> with tempfile.TemporaryDirectory() as tmp:
            ...     index.save(Path(tmp) / "codes.faiss")
            ...     print(HammingIndex.load(Path(tmp) / "codes.faiss"))
            HammingIndex(2 codes of 8 bits, IndexBinaryFlat)
        """
        _faiss().write_index_binary(self._index, str(Path(path)))

    @classmethod
    def load(cls, path: str | os.PathLike) -> HammingIndex:
        """Read an index written by :meth:`save`; it answers searches as the saved one did.

        Examples:
            >>> import tempfile
            >>> from pathlib import Path
            >>> g = torch.Generator().manual_seed(0)
            >>> index = HammingIndex(torch.randint(0, 2, (20, 32), generator=g))
            >>> queries = torch.randint(0, 2, (3, 32), generator=g)
            >>> with tempfile.TemporaryDirectory() as tmp:
            ...     index.save(Path(tmp) / "codes.faiss")
            ...     loaded = HammingIndex.load(Path(tmp) / "codes.faiss")
            >>> all(torch.equal(a, b) for a, b in zip(loaded.search(queries, k=4), index.search(queries, k=4)))
            True
        """
        if not Path(path).is_file():
            raise FileNotFoundError(f"no index file at {path}")
        return cls._wrap(_faiss().read_index_binary(str(Path(path))))


def _as_vectors(x: object, name: str, dim: int | None = None) -> np.ndarray:
    t = _as_tensor(x, name)
    check_float_tensor(t, name, ndim=2)
    if dim is not None and t.shape[1] != dim:
        raise ValueError(f"{name} must have {dim} dimensions per vector, got shape {tuple(t.shape)}")
    return np.ascontiguousarray(t.cpu().float().numpy())


class VectorIndex:
    """Exact inner-product search (FAISS ``IndexFlatIP``) over video-level vectors [M, D].

    The retrieval of TCA §4 and of video-level HAP-VR baselines: the database is ranked by
    ``<query, item>``; L2-normalise both sides for cosine similarity. Vectors are stored as float32.

    ``search(queries, k)`` returns ``(similarities float32, indices int64)``, [Q, k] each, by
    decreasing similarity.

    Examples:
        >>> import torch
        >>> index = VectorIndex(torch.tensor([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]]))
        >>> sims, ids = index.search(torch.tensor([[0.0, 1.0]]), k=2)
        >>> ids, sims
        (tensor([[2, 1]]), tensor([[1.0000, 0.8000]]))
    """

    def __init__(self, vectors: object) -> None:
        x = _as_vectors(vectors, "vectors")
        self.dim = x.shape[1]
        self._index = _faiss().IndexFlatIP(self.dim)
        self._index.add(x)

    @classmethod
    def _wrap(cls, index) -> VectorIndex:
        self = cls.__new__(cls)
        self._index, self.dim = index, index.d
        return self

    def __len__(self) -> int:
        return int(self._index.ntotal)

    def __repr__(self) -> str:
        return f"VectorIndex({len(self)} vectors of dimension {self.dim})"

    def add(self, vectors: object) -> None:
        """Append vectors [M', D] (float, D as the index); they get the next indices.

        Examples:
            >>> index = VectorIndex(torch.tensor([[1.0, 0.0]]))
            >>> index.add(torch.tensor([[0.0, 1.0], [0.6, 0.8]]))
            >>> len(index), index.search(torch.tensor([[0.0, 1.0]]), k=3)[1]  # ids 1, 2 are new
            (3, tensor([[1, 2, 0]]))
        """
        self._index.add(_as_vectors(vectors, "vectors", self.dim))

    def search(self, queries: object, k: int) -> tuple[Tensor, Tensor]:
        """The ``k`` items of largest inner product with each query: ``(similarities, indices)``.

        Args:
            queries: [Q, D] float vectors.
            k: results per query, 1 ≤ k ≤ ``len(self)``.

        Returns:
            ``similarities`` [Q, k] float32 (decreasing) and ``indices`` [Q, k] int64.

        Examples:
            >>> g = torch.Generator().manual_seed(0)
            >>> db, queries = torch.randn(30, 8, generator=g), torch.randn(4, 8, generator=g)
            >>> sims, ids = VectorIndex(db).search(queries, k=3)
            >>> brute = (queries @ db.T).topk(3, dim=1)  # [Q, M] inner products, best 3
            >>> torch.equal(ids, brute.indices), torch.allclose(sims, brute.values, atol=1e-5)
            (True, True)
        """
        q = _as_vectors(queries, "queries", self.dim)
        k = _check_k(k, len(self))
        sims, indices = self._index.search(q, k)
        return torch.from_numpy(sims), torch.from_numpy(indices)

    def save(self, path: str | os.PathLike) -> None:
        """Write the index (vectors included) to ``path`` in FAISS's format; read it back with :meth:`load`.

        Examples:
            >>> import tempfile
            >>> from pathlib import Path
            >>> with tempfile.TemporaryDirectory() as tmp:
            ...     VectorIndex(torch.eye(3)).save(Path(tmp) / "vectors.faiss")
            ...     print(VectorIndex.load(Path(tmp) / "vectors.faiss"))
            VectorIndex(3 vectors of dimension 3)
        """
        _faiss().write_index(self._index, str(Path(path)))

    @classmethod
    def load(cls, path: str | os.PathLike) -> VectorIndex:
        """Read an index written by :meth:`save`; it answers searches as the saved one did.

        Examples:
            >>> import tempfile
            >>> from pathlib import Path
            >>> g = torch.Generator().manual_seed(0)
            >>> index, queries = VectorIndex(torch.randn(20, 8, generator=g)), torch.randn(3, 8, generator=g)
            >>> with tempfile.TemporaryDirectory() as tmp:
            ...     index.save(Path(tmp) / "vectors.faiss")
            ...     loaded = VectorIndex.load(Path(tmp) / "vectors.faiss")
            >>> all(torch.equal(a, b) for a, b in zip(loaded.search(queries, k=4), index.search(queries, k=4)))
            True
        """
        if not Path(path).is_file():
            raise FileNotFoundError(f"no index file at {path}")
        return cls._wrap(_faiss().read_index(str(Path(path))))
