"""Nearest-neighbour search with FAISS: Hamming distance on packed codes, inner product on vectors.

:class:`HammingIndex` wraps FAISS's exact ``IndexBinaryFlat`` (or, with ``nlist``, the approximate
inverted-file ``IndexBinaryIVF`` for millions of codes); :class:`VectorIndex` wraps the exact
inner-product ``IndexFlatIP`` for video-level vectors (normalise them first for cosine similarity), or
any FAISS ``index_factory`` string such as ``"IVF64,Flat"`` or ``"HNSW32"`` for approximate search.
Both take torch tensors or NumPy arrays and answer in the queries' kind (NumPy in, NumPy out). With
``ids=`` (FAISS ``IndexIDMap``) results are your ids, e.g. video numbers, instead of row positions.

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


def _out(like: object, *arrays: np.ndarray) -> tuple:
    """NumPy results for NumPy queries, torch tensors otherwise."""
    return tuple(arrays) if isinstance(like, np.ndarray) else tuple(torch.from_numpy(a) for a in arrays)


def _check_ids(ids: object, count: int) -> np.ndarray:
    if isinstance(ids, range):
        ids = list(ids)
    kind = getattr(getattr(ids, "dtype", None), "kind", None)
    if isinstance(ids, (list, tuple)):
        bad = next((v for v in ids if isinstance(v, bool) or not isinstance(v, (int, np.integer))), None)
    else:
        bad = next(iter(np.asarray(ids).ravel()[:1]), None) if kind in ("U", "S", "O") else None
    if bad is not None or kind in ("U", "S", "O"):
        raise ValueError(f"ids must be non-negative integers (FAISS maps int64 ids), got {type(bad).__name__} "
                         f"{bad!r}: keep your names in a list and pass ids=range(len(names)) (or any ints >= 0); "
                         "a result id i is then names[i]")
    t = torch.as_tensor(ids) if isinstance(ids, (list, tuple)) else _as_tensor(ids, "ids")
    if t.ndim != 1 or t.shape[0] != count or t.is_floating_point() or t.dtype == torch.bool:
        raise ValueError(f"ids must be a 1-D integer array with one id per item ({count}), got "
                         f"{t.dtype} {tuple(t.shape)}")
    if t.numel() and int(t.min()) < 0:
        raise ValueError("ids must be non-negative (FAISS reports a missing result as -1)")
    return np.ascontiguousarray(t.cpu().numpy().astype(np.int64))


def _check_k(k: object) -> int:
    """``k`` a positive int; beyond the index's size FAISS pads the results (id −1, a sentinel distance)."""
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")
    return int(k)


def _check_nprobe(nprobe: object) -> int:
    if not isinstance(nprobe, (int, np.integer)) or isinstance(nprobe, bool) or nprobe < 1:
        raise ValueError(f"nprobe must be a positive int, got {nprobe!r}")
    return int(nprobe)


class _IdMapped:
    """What both indexes share about ids: FAISS's ``Index(Binary)IDMap`` around the index, or none."""

    _index: object
    _item = "item"  # "code" or "vector", for messages

    @property
    def has_ids(self) -> bool:
        """Whether results are user ids (built with ``ids=``) rather than row positions.

        Examples:
            >>> HammingIndex(torch.ones(2, 8), ids=[7, 9]).has_ids, HammingIndex(torch.ones(2, 8)).has_ids
            (True, False)
            >>> VectorIndex(torch.eye(2), ids=[10, 20]).search(torch.tensor([[0.0, 1.0]]), k=1)[1]
            tensor([[20]])
        """
        return "IDMap" in type(self._index).__name__

    def _ivf(self):
        """The inverted-file index inside (through an id map or a pre-transform), or None."""
        faiss = _faiss()
        index = self._index
        binary = isinstance(index, faiss.IndexBinary)
        if self.has_ids:
            index = faiss.downcast_IndexBinary(index.index) if binary else faiss.downcast_index(index.index)
        if binary:
            return index if hasattr(index, "nprobe") else None
        try:
            return faiss.extract_index_ivf(index)
        except RuntimeError:
            return None

    @property
    def nprobe(self) -> int | None:
        """Inverted lists an IVF index visits per query (None for other indexes); settable at any time,
        as ``index.nprobe = n`` is in FAISS.

        Examples:
            >>> index = VectorIndex(torch.randn(64, 4, generator=torch.Generator().manual_seed(0)), "IVF4,Flat")
            >>> index.nprobe
            8
            >>> index.nprobe = 1
            >>> index.nprobe, VectorIndex(torch.eye(2)).nprobe
            (1, None)
        """
        ivf = self._ivf()
        return None if ivf is None else int(ivf.nprobe)

    @nprobe.setter
    def nprobe(self, value: int) -> None:
        value = _check_nprobe(value)
        ivf = self._ivf()
        if ivf is None:
            kind = type(self._index).__name__
            raise ValueError(f"nprobe applies to an inverted-file (IVF) index; this one is {kind} "
                             "(build it with nlist= / an 'IVF...' factory string)")
        ivf.nprobe = value

    def _add(self, items: np.ndarray, ids: object | None) -> None:
        if self.has_ids:
            if ids is None:
                raise ValueError(f"this index maps ids (built with ids=): add({self._item}s, ids=...) needs one id "
                                 f"per {self._item}")
            self._index.add_with_ids(items, _check_ids(ids, items.shape[0]))
        else:
            if ids is not None:
                raise ValueError("ids given to an index built without ids: build it with ids= to map ids")
            self._index.add(items)


class HammingIndex(_IdMapped):
    """Exact (or IVF) Hamming-distance search over binary codes with FAISS (AutoSSVH Sec. 4.2 retrieval).

    Args:
        codes: the database, unpacked [M, bits] ±1 / 0-1 codes (bool, int, uint8 or float; ``bits`` a
            multiple of 8), or with ``packed=True`` [M, bytes] ``uint8`` bytes (:func:`hapref.search.pack_codes`).
        nlist: None for the exact ``IndexBinaryFlat``; an int for ``IndexBinaryIVF`` with that many
            lists, trained on ``codes`` (needs at least ``nlist`` codes; approximate).
        nprobe: lists visited per query by the IVF index (``index.nprobe = n`` changes it later).
        packed: whether ``codes`` (and later queries) are packed bytes; never guessed from the dtype.
        ids: optional [M] non-negative int ids returned instead of row positions (FAISS ``IndexBinaryIDMap``);
            then :meth:`add` needs ids too. Strings are refused: pass ``range(len(names))`` and index ``names``.

    ``search(queries, k)`` returns ``(distances, indices)``, both ``[Q, k]`` int64 tensors, sorted by
    increasing distance in bits; equal distances come by increasing index (FAISS's order).
    Missing places are padded as FAISS pads them, with index −1 and distance ``2**31 − 1`` (int32's largest):
    every place beyond ``len(self)`` when ``k`` exceeds it, and, for an IVF index that only scans ``nprobe``
    lists, those a query's lists cannot fill.

    Examples:
        >>> import torch
        >>> db = torch.tensor([[1, 1, 1, 1, 1, 1, 1, 1], [1, -1, 1, 1, 1, 1, 1, 1], [-1] * 8])
        >>> index = HammingIndex(db)
        >>> len(index), index.bits
        (3, 8)
        >>> index.search(torch.tensor([[1, -1, 1, 1, 1, 1, 1, -1]]), k=2)
        (tensor([[1, 2]]), tensor([[1, 0]]))
    """

    _item = "code"

    def __init__(self, codes: object, nlist: int | None = None, nprobe: int = 8, *, packed: bool = False,
                 ids: object | None = None) -> None:
        self.packed = packed
        codes = as_packed(codes, "codes", packed=packed)
        self.bits = 8 * codes.shape[1]
        faiss = _faiss()
        if nlist is None:
            self._index = faiss.IndexBinaryFlat(self.bits)
        else:
            if not isinstance(nlist, int) or isinstance(nlist, bool) or not 1 <= nlist <= codes.shape[0]:
                raise ValueError(f"nlist must be an int in [1, number of codes = {codes.shape[0]}], got {nlist!r}")
            nprobe = _check_nprobe(nprobe)
            quantizer = faiss.IndexBinaryFlat(self.bits)
            self._index = faiss.IndexBinaryIVF(quantizer, self.bits, nlist)
            self._quantizer = quantizer  # keep the Python object alive with the index
            self._index.train(codes.numpy())
            self._index.nprobe = nprobe
        if ids is not None:
            self._inner = self._index  # keep the wrapped index alive with the map
            self._index = faiss.IndexBinaryIDMap(self._inner)
        self._add(codes.numpy(), ids)

    @classmethod
    def _wrap(cls, index) -> HammingIndex:
        self = cls.__new__(cls)
        self._index, self.bits, self.packed = index, index.d, False
        return self

    def __len__(self) -> int:
        return int(self._index.ntotal)

    def __repr__(self) -> str:
        return f"HammingIndex({len(self)} codes of {self.bits} bits, {type(self._index).__name__})"

    def add(self, codes: object, ids: object | None = None) -> None:
        """Append codes (same bit count and packing as the index); they get the next indices, or ``ids``.

        Args:
            codes: [M', bits] unpacked ±1 / 0-1 codes, or [M', bytes] bytes for an index built with ``packed=True``.
            ids: [M'] ids, required exactly when the index was built with ``ids=``.

        Examples:
            >>> index = HammingIndex(torch.tensor([[1] * 8]))
            >>> index.add(torch.tensor([[-1] * 8, [1, 1, 1, 1, 1, 1, 1, -1]]))
            >>> len(index), index.search(torch.tensor([[1, 1, 1, 1, 1, 1, -1, -1]]), k=3)[1]  # ids 1, 2 are new
            (3, tensor([[2, 0, 1]]))
        """
        self._add(as_packed(codes, "codes", self.bits // 8, packed=self.packed).numpy(), ids)

    def search(self, queries: object, k: int, packed: bool | None = None) -> tuple[Tensor, Tensor]:
        """The ``k`` nearest codes of each query: ``(distances in bits, indices or ids)``, [Q, k] int64 each.

        Args:
            queries: codes in the index's packing (``packed=``), ``bits`` as the index; a NumPy array gives
                NumPy results.
            k: results per query, ≥ 1; places beyond ``len(self)`` hold index −1 and distance ``2**31 − 1``.
            packed: override the index's packing for these queries (None: as the index was built).

        Examples:
            >>> from hapref.search import pack_codes
            >>> g = torch.Generator().manual_seed(0)
            >>> db, queries = torch.randint(0, 2, (50, 64), generator=g), torch.randint(0, 2, (4, 64), generator=g)
            >>> distances, ids = HammingIndex(db).search(queries, k=5)
            >>> brute = (queries[:, None, :] != db[None, :, :]).sum(-1)  # [Q, M] Hamming distances
            >>> torch.equal(distances, brute.sort(dim=1).values[:, :5])
            True
            >>> torch.equal(brute.gather(1, ids), distances)  # each id is at the distance reported
            True
        """
        q = as_packed(queries, "queries", self.bits // 8, packed=self.packed if packed is None else packed)
        k = _check_k(k)
        distances, indices = self._index.search(q.numpy(), k)
        return _out(queries, distances.astype(np.int64), indices.astype(np.int64))

    def range_search(self, queries: object, radius: int, packed: bool | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """Every code within ``radius`` bits (inclusive) of each query, in CSR form.

        Returns ``(offsets [Q+1], distances, indices)`` (int64): query ``i``'s results are
        ``distances[offsets[i]:offsets[i+1]]`` and the matching ``indices``, in no particular order.

        Args:
            queries: codes in the index's packing, ``bits`` as the index (NumPy in, NumPy out).
            radius: the largest Hamming distance kept, an int ≥ 0.
            packed: override the index's packing for these queries (None: as the index was built).

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
        q = as_packed(queries, "queries", self.bits // 8, packed=self.packed if packed is None else packed)
        if not isinstance(radius, int) or isinstance(radius, bool) or radius < 0:
            raise ValueError(f"radius must be a non-negative int (bits), got {radius!r}")
        offsets, distances, indices = self._index.range_search(q.numpy(), radius + 1)  # FAISS: distance < radius
        return _out(queries, offsets.astype(np.int64), distances.astype(np.int64), indices.astype(np.int64))

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
    def load(cls, path: str | os.PathLike, packed: bool = False) -> HammingIndex:
        """Read an index written by :meth:`save` (ids included); it answers searches as the saved one did.

        ``packed`` says how later queries and codes are given (FAISS's file does not record it).

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
        try:
            raw = _faiss().read_index_binary(str(Path(path)))
        except RuntimeError as err:  # FAISS names neither the file nor what it expected
            raise ValueError(f"path {path} is not a binary FAISS index written by HammingIndex.save "
                             f"({str(err).splitlines()[-1].split(': ', 1)[-1]})") from err
        index = cls._wrap(raw)
        index.packed = packed
        return index


def _as_vectors(x: object, name: str, dim: int | None = None) -> np.ndarray:
    t = _as_tensor(x, name)
    check_float_tensor(t, name, ndim=2)
    if dim is not None and t.shape[1] != dim:
        raise ValueError(f"{name} must have {dim} dimensions per vector, got shape {tuple(t.shape)}")
    return np.ascontiguousarray(t.cpu().float().numpy())


class VectorIndex(_IdMapped):
    """Inner-product search over video-level vectors [M, D]: exact (``IndexFlatIP``) or approximate (FAISS factory).

    The retrieval of TCA §4 and of video-level HAP-VR baselines: the database is ranked by
    ``<query, item>``; L2-normalise both sides for cosine similarity. Vectors are stored as float32.

    Args:
        vectors: [M, D] float database.
        factory: a FAISS ``index_factory`` string with the inner-product metric: ``"Flat"`` (exact, the default),
            ``"IVF64,Flat"`` (inverted lists, trained on ``vectors``), ``"HNSW32"`` (graph), ...
        nprobe: lists an IVF index visits per query (ignored otherwise; ``index.nprobe = n`` changes it later).
        ids: optional [M] non-negative int ids returned instead of row positions (FAISS ``IndexIDMap``).

    ``search(queries, k)`` returns ``(similarities float32, indices int64)``, [Q, k] each, by
    decreasing similarity; an approximate index may miss true neighbours (``tests/test_search.py`` measures
    its recall against the exact one).

    Examples:
        >>> import torch
        >>> index = VectorIndex(torch.tensor([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]]))
        >>> sims, ids = index.search(torch.tensor([[0.0, 1.0]]), k=2)
        >>> ids, sims
        (tensor([[2, 1]]), tensor([[1.0000, 0.8000]]))
    """

    _item = "vector"

    def __init__(self, vectors: object, factory: str = "Flat", nprobe: int = 8, *, ids: object | None = None) -> None:
        x = _as_vectors(vectors, "vectors")
        self.dim = x.shape[1]
        faiss = _faiss()
        if not isinstance(factory, str):
            raise TypeError(f"factory must be a FAISS index_factory string such as 'Flat' or 'HNSW32', got {factory!r}")
        if factory == "Flat":
            index = faiss.IndexFlatIP(self.dim)
        else:
            try:
                index = faiss.index_factory(self.dim, factory, faiss.METRIC_INNER_PRODUCT)
            except RuntimeError as err:
                raise ValueError(f"factory {factory!r} is not a FAISS index_factory string: {err}") from None
        if not index.is_trained:
            index.train(x)
        if hasattr(index, "nprobe"):
            index.nprobe = _check_nprobe(nprobe)
        self.factory = factory
        if ids is not None:
            self._inner, index = index, faiss.IndexIDMap(index)
        self._index = index
        self._add(x, ids)

    @classmethod
    def _wrap(cls, index) -> VectorIndex:
        self = cls.__new__(cls)
        self._index, self.dim, self.factory = index, index.d, type(index).__name__
        return self

    def __len__(self) -> int:
        return int(self._index.ntotal)

    def __repr__(self) -> str:
        return f"VectorIndex({len(self)} vectors of dimension {self.dim})"

    def add(self, vectors: object, ids: object | None = None) -> None:
        """Append vectors [M', D] (float, D as the index); they get the next indices, or ``ids`` (see ``ids=``).

        Examples:
            >>> index = VectorIndex(torch.tensor([[1.0, 0.0]]))
            >>> index.add(torch.tensor([[0.0, 1.0], [0.6, 0.8]]))
            >>> len(index), index.search(torch.tensor([[0.0, 1.0]]), k=3)[1]  # ids 1, 2 are new
            (3, tensor([[1, 2, 0]]))
        """
        self._add(_as_vectors(vectors, "vectors", self.dim), ids)

    def search(self, queries: object, k: int) -> tuple[Tensor, Tensor]:
        """The ``k`` items of largest inner product with each query: ``(similarities, indices)``.

        Args:
            queries: [Q, D] float vectors (a NumPy array gives NumPy results).
            k: results per query, ≥ 1; places beyond ``len(self)`` (or an IVF index's probed lists) hold
                index −1 and similarity ``−3.4028235e38`` (−FLT_MAX), as FAISS pads them.

        Returns:
            ``similarities`` [Q, k] float32 (decreasing) and ``indices`` (or ids) [Q, k] int64.

        Examples:
            >>> g = torch.Generator().manual_seed(0)
            >>> db, queries = torch.randn(30, 8, generator=g), torch.randn(4, 8, generator=g)
            >>> sims, ids = VectorIndex(db).search(queries, k=3)
            >>> brute = (queries @ db.T).topk(3, dim=1)  # [Q, M] inner products, best 3
            >>> torch.equal(ids, brute.indices), torch.allclose(sims, brute.values, atol=1e-5)
            (True, True)
        """
        q = _as_vectors(queries, "queries", self.dim)
        k = _check_k(k)
        sims, indices = self._index.search(q, k)
        return _out(queries, sims, indices.astype(np.int64))

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
        try:
            raw = _faiss().read_index(str(Path(path)))
        except RuntimeError as err:  # FAISS names neither the file nor what it expected
            raise ValueError(f"path {path} is not a FAISS index written by VectorIndex.save "
                             f"({str(err).splitlines()[-1].split(': ', 1)[-1]})") from err
        return cls._wrap(raw)
