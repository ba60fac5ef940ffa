"""hapref.search (FAISS indexes, packed codes) and the tie-aware mAP@N, against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from hapref.metrics import map_at_n
from hapref.metrics.hamming import expected_ap_at_n, hamming_map_at_n, hamming_map_at_ns, map_at_n_tie_aware
from hapref.search import HammingIndex, VectorIndex, pack_codes, unpack_codes


def random_codes(n: int, bits: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 2, (n, bits), generator=g).float() * 2 - 1


def brute_hamming(q: torch.Tensor, db: torch.Tensor) -> torch.Tensor:
    """Hamming distances of ±1 codes from the dense float product: (bits − <q, d>) / 2."""
    return ((q.shape[1] - q @ db.T) / 2).round().long()


# ---------------------------------------------------------------- packing

def test_pack_unpack_round_trip_and_bit_order():
    codes = random_codes(50, 48, 0)
    packed = pack_codes(codes)
    assert packed.dtype == torch.uint8 and packed.shape == (50, 6)
    assert torch.equal(unpack_codes(packed), codes)
    assert torch.equal(unpack_codes(packed, signed=False), (codes > 0).float())
    # documented layout: bit j -> bit j % 8 (LSB first) of byte j // 8
    weights = 2 ** torch.arange(8)
    manual = ((codes > 0).long().view(50, 6, 8) * weights).sum(-1)
    assert torch.equal(packed.long(), manual)
    # 0/1 codes, bool codes and numpy input give the same bytes
    assert torch.equal(pack_codes((codes > 0).long()), packed)
    assert torch.equal(pack_codes((codes > 0).numpy()), packed)
    assert torch.equal(unpack_codes(packed, bits=5), codes[:, :5])


@pytest.mark.parametrize("bad, error, text", [
    (torch.ones(3, 12), ValueError, "multiple of 8"),
    (torch.full((3, 8), 0.5), ValueError, "±1 or only 0/1"),
    (torch.tensor([[1., -1, 0, 1, 1, 1, 1, 1]]), ValueError, "mixes"),
    (torch.ones(8), ValueError, "2-D"),
    (torch.full((2, 8), 7, dtype=torch.uint8), ValueError, "packed=True"),
    ([[1, -1]], TypeError, "numpy array"),
])
def test_pack_codes_rejects_bad_input(bad, error, text):
    with pytest.raises(error, match=text):
        pack_codes(bad)


def test_unpack_codes_rejects_bad_input():
    with pytest.raises(TypeError, match="uint8"):
        unpack_codes(torch.ones(2, 1))
    with pytest.raises(ValueError, match="bits"):
        unpack_codes(torch.ones(2, 1, dtype=torch.uint8), bits=9)


# ---------------------------------------------------------------- HammingIndex

@pytest.mark.parametrize("packed_input", [True, False])
def test_hamming_index_matches_brute_force(packed_input):
    db, q = random_codes(3000, 64, 1), random_codes(40, 64, 2)
    index = HammingIndex(pack_codes(db), packed=True) if packed_input else HammingIndex(db)
    assert len(index) == 3000 and index.bits == 64
    k = 25
    dist, ids = index.search(pack_codes(q) if packed_input else q, k)
    assert dist.dtype == torch.int64 and ids.dtype == torch.int64 and dist.shape == (40, k)
    full = brute_hamming(q, db)
    assert torch.equal(dist, full.sort(dim=1).values[:, :k])            # distances equal brute force
    assert torch.equal(full.gather(1, ids), dist)                        # and belong to the returned ids
    # FAISS's tie order: equal distances by ascending id (what metrics must not rely on)
    key = full * len(db) + torch.arange(len(db))
    assert torch.equal(ids, key.argsort(dim=1)[:, :k])


def test_hamming_index_add_save_load_range_search(tmp_path):
    db, q = random_codes(600, 32, 3), random_codes(7, 32, 4)
    index = HammingIndex(db[:400])
    index.add(db[400:])
    assert len(index) == 600
    path = tmp_path / "codes.faiss"
    index.save(path)
    loaded = HammingIndex.load(path)
    assert len(loaded) == 600 and loaded.bits == 32
    d1, i1 = index.search(q, 10)
    d2, i2 = loaded.search(q, 10)
    assert torch.equal(d1, d2) and torch.equal(i1, i2)
    full = brute_hamming(q, db)
    offsets, dist, ids = index.range_search(q, 12)
    for row in range(len(q)):
        sl = slice(int(offsets[row]), int(offsets[row + 1]))
        expected = torch.nonzero(full[row] <= 12).flatten()
        assert torch.equal(ids[sl].sort().values, expected)
        assert torch.equal(dist[sl], full[row, ids[sl]])


def test_hamming_ivf_with_all_lists_probed_is_exact():
    db, q = random_codes(2000, 64, 5), random_codes(10, 64, 6)
    index = HammingIndex(db, nlist=16, nprobe=16)
    dist, ids = index.search(q, 10)
    full = brute_hamming(q, db)
    assert torch.equal(dist, full.sort(dim=1).values[:, :10])
    assert torch.equal(full.gather(1, ids), dist)


def test_hamming_index_rejects_bad_input(tmp_path):
    index = HammingIndex(random_codes(20, 16, 7))
    with pytest.raises(ValueError, match="multiple of 8"):
        index.search(torch.zeros(1, 3, dtype=torch.uint8), 1)
    with pytest.raises(ValueError, match="16 bits per code"):
        index.search(torch.zeros(1, 8, dtype=torch.uint8), 1)
    with pytest.raises(ValueError, match="positive int"):
        index.search(random_codes(1, 16, 8), 0)
    with pytest.raises(ValueError, match="multiple of 8"):
        HammingIndex(torch.ones(4, 10))
    with pytest.raises(ValueError, match="nlist"):
        HammingIndex(random_codes(20, 16, 7), nlist=50)
    with pytest.raises(FileNotFoundError):
        HammingIndex.load(tmp_path / "missing")


# ---------------------------------------------------------------- VectorIndex

def test_vector_index_matches_brute_force(tmp_path):
    g = torch.Generator().manual_seed(9)
    db, q = torch.randn(500, 24, generator=g), torch.randn(12, 24, generator=g)
    index = VectorIndex(db[:300].numpy())
    index.add(db[300:])
    sims, ids = index.search(q, 15)
    top = (q @ db.T).topk(15, dim=1)
    assert torch.equal(ids, top.indices)
    torch.testing.assert_close(sims, top.values, rtol=1e-5, atol=1e-5)
    index.save(tmp_path / "v.faiss")
    loaded = VectorIndex.load(tmp_path / "v.faiss")
    assert len(loaded) == 500 and torch.equal(loaded.search(q, 15)[1], ids)
    with pytest.raises(ValueError, match="24 dimensions"):
        index.search(torch.randn(2, 5), 3)
    with pytest.raises(ValueError, match="floating"):
        VectorIndex(torch.ones(3, 2, dtype=torch.long))


# ---------------------------------------------------------------- tie-aware mAP@N

def literal_ap_at_n(rel_in_order: list[bool], n: int, convention: str) -> float:
    """AP@N of one fixed order, transcribed from the definition."""
    hits, total = 0, 0.0
    for r, rel in enumerate(rel_in_order[:n], start=1):
        if rel:
            hits += 1
            total += hits / r
    if convention == "autossvh":
        return total / n
    return total / hits if hits else 0.0


def brute_expected_ap(distances: list[int], relevant: list[bool], n: int, convention: str) -> float:
    """Mean AP@N over every order that sorts the distances (all orders of each tie group, equally likely)."""
    values = []
    for perm in itertools.permutations(range(len(distances))):
        if all(distances[a] <= distances[b] for a, b in zip(perm, perm[1:])):
            values.append(literal_ap_at_n([relevant[i] for i in perm], n, convention))
    return float(np.mean(values))


@pytest.mark.parametrize("convention", ["standard", "autossvh"])
def test_expected_ap_at_n_matches_enumeration_of_tie_orders(convention):
    rng = np.random.default_rng(0)
    for _ in range(60):
        m = int(rng.integers(1, 8))
        distances = rng.integers(0, 3, m).tolist()
        relevant = (rng.random(m) < 0.5).tolist()
        for n in (1, 2, 3, 5, 9):
            got = expected_ap_at_n(np.array(distances), np.array(relevant), n, convention)
            assert got == pytest.approx(brute_expected_ap(distances, relevant, n, convention), abs=1e-12)


def test_tie_aware_equals_map_at_n_without_ties_and_differs_with_them():
    g = torch.Generator().manual_seed(11)
    scores = torch.randn(6, 30, generator=g)                      # distinct: no ties
    relevance = torch.rand(6, 30, generator=g) < 0.3
    for convention in ("standard", "autossvh"):
        expected = map_at_n(scores, relevance, 10, convention)
        got = map_at_n_tie_aware(-scores, relevance, 10, convention)
        assert float(got) == pytest.approx(float(expected), abs=1e-6)
    # ties: the relevant item shares the boundary distance with an irrelevant one of lower index
    distances = torch.tensor([[0, 1, 1]])
    relevance = torch.tensor([[False, False, True]])
    assert float(map_at_n(-distances.float(), relevance, 2)) == 0.0             # database order drops it
    assert float(map_at_n_tie_aware(distances, relevance, 2)) == pytest.approx(0.25)


def test_map_at_n_tie_aware_ignore_and_errors():
    distances = torch.tensor([[0, 1, 1, 2], [2, 2, 0, 1]])
    relevance = torch.tensor([[True, False, True, False], [False, True, False, False]])
    ignore = torch.tensor([[False, True, False, False], [False, False, False, False]])
    per_row = [expected_ap_at_n(np.array([0, 1, 2]), np.array([True, True, False]), 2),
               expected_ap_at_n(np.array([2, 2, 0, 1]), np.array([False, True, False, False]), 2)]
    assert float(map_at_n_tie_aware(distances, relevance, 2, ignore=ignore)) == pytest.approx(np.mean(per_row))
    with pytest.raises(ValueError, match="n must be"):
        map_at_n_tie_aware(distances, relevance, 0)
    with pytest.raises(ValueError, match="convention"):
        map_at_n_tie_aware(distances, relevance, 2, convention="x")
    with pytest.raises(ValueError, match="relevance must have shape"):
        map_at_n_tie_aware(distances, relevance[:, :2], 2)
    with pytest.raises(ValueError, match="no relevant"):
        map_at_n_tie_aware(distances, torch.zeros_like(relevance), 2)


@pytest.mark.parametrize("multi_label", [False, True])
@pytest.mark.parametrize("convention", ["standard", "autossvh"])
def test_hamming_map_at_n_equals_dense_tie_aware(multi_label, convention):
    """16-bit codes rank 800 items in ~17 distances: big tie groups at every cut-off."""
    g = torch.Generator().manual_seed(12)
    db, q = random_codes(800, 16, 13), random_codes(30, 16, 14)
    if multi_label:
        db_labels, q_labels = torch.rand(800, 6, generator=g) < 0.2, torch.rand(30, 6, generator=g) < 0.2
        relevance = (q_labels.float() @ db_labels.float().T) > 0
    else:
        db_labels, q_labels = torch.randint(0, 8, (800,), generator=g), torch.randint(0, 9, (30,), generator=g)
        relevance = q_labels[:, None] == db_labels[None, :]
    index = HammingIndex(pack_codes(db), packed=True)
    full = brute_hamming(q, db)
    keep = relevance.any(1)
    for n in (1, 20, 100, 1000):
        dense = map_at_n_tie_aware(full[keep], relevance[keep], n, convention)
        got = hamming_map_at_n(index, pack_codes(q), q_labels, db_labels, n, convention)
        assert float(got) == pytest.approx(float(dense), abs=1e-12)
    several = hamming_map_at_ns(index, pack_codes(q), q_labels, db_labels, [5, 20, 100], convention)
    for value, n in zip(several.tolist(), (5, 20, 100)):
        assert value == pytest.approx(float(map_at_n_tie_aware(full[keep], relevance[keep], n, convention)), abs=1e-12)


def test_hamming_map_at_n_rejects_bad_input():
    index = HammingIndex(random_codes(10, 8, 15))
    q = random_codes(2, 8, 16)
    with pytest.raises(ValueError, match="database_labels must have one row"):
        hamming_map_at_n(index, q, torch.tensor([0, 1]), torch.tensor([0, 1]), 3)
    with pytest.raises(ValueError, match="query_labels must have one row"):
        hamming_map_at_n(index, q, torch.tensor([0]), torch.zeros(10, dtype=torch.long), 3)
    with pytest.raises(ValueError, match="both be class ids"):
        hamming_map_at_n(index, q, torch.tensor([0, 1]), torch.zeros(10, 3, dtype=torch.bool), 3)
    with pytest.raises(TypeError, match="HammingIndex"):
        hamming_map_at_n(q, q, torch.tensor([0, 1]), torch.zeros(10, dtype=torch.long), 3)


# ------------------------------------------------------------ FAISS idioms: no guessing, NumPy, ids, approximate
def test_uint8_zero_one_codes_are_codes_not_bytes():
    rng = np.random.default_rng(0)
    np01 = rng.integers(0, 2, (500, 64)).astype(np.uint8)          # the [N, 64] 0/1 codes of a NumPy user
    index = HammingIndex(np01)
    assert index.bits == 64 and len(index) == 500
    dist, ids = index.search(np01[:3], 1)
    assert isinstance(dist, np.ndarray) and isinstance(ids, np.ndarray)  # NumPy in, NumPy out
    assert ids[:, 0].tolist() == [0, 1, 2] and dist[:, 0].tolist() == [0, 0, 0]
    packed = HammingIndex(pack_codes(np01).numpy(), packed=True)       # bytes only when declared
    assert packed.bits == 64 and np.array_equal(packed.search(pack_codes(np01[:3]).numpy(), 1)[1], ids)
    with pytest.raises(ValueError, match="packed=True"):
        HammingIndex(pack_codes(np01).numpy())                          # bytes given as codes: refused, not read


def test_ids_are_returned_and_survive_save_and_load(tmp_path):
    db = random_codes(40, 16, 21)
    video_ids = np.arange(1000, 1040) * 7
    index = HammingIndex(db, ids=video_ids)
    _, got = index.search(db[:5], 1)
    assert got[:, 0].tolist() == video_ids[:5].tolist()
    index.add(random_codes(2, 16, 22), ids=[5, 6])
    with pytest.raises(ValueError, match="needs one id per code"):
        index.add(random_codes(1, 16, 23))
    index.save(tmp_path / "codes.faiss")
    loaded = HammingIndex.load(tmp_path / "codes.faiss")
    assert all(torch.equal(a, b) for a, b in zip(loaded.search(db[:5], 3), index.search(db[:5], 3)))
    vectors = torch.nn.functional.normalize(torch.randn(30, 8, generator=torch.Generator().manual_seed(0)), dim=1)
    vindex = VectorIndex(vectors.numpy(), ids=np.arange(30) + 100)
    sims, ids = vindex.search(vectors[:4].numpy(), 1)
    assert isinstance(ids, np.ndarray) and ids[:, 0].tolist() == [100, 101, 102, 103]
    with pytest.raises(ValueError, match="one id per item"):
        VectorIndex(vectors, ids=[1, 2])


@pytest.mark.parametrize("factory, nprobe, floor", [("IVF32,Flat", 8, 0.9), ("HNSW32", 8, 0.95)])
def test_approximate_vector_index_recall_against_exact(factory, nprobe, floor):
    g = torch.Generator().manual_seed(1)
    centres = torch.randn(50, 32, generator=g)
    db = torch.nn.functional.normalize(centres[torch.randint(0, 50, (5000,), generator=g)]
                                       + 0.5 * torch.randn(5000, 32, generator=g), dim=1)
    queries = torch.nn.functional.normalize(centres[torch.randint(0, 50, (200,), generator=g)]
                                            + 0.5 * torch.randn(200, 32, generator=g), dim=1)
    _, exact = VectorIndex(db).search(queries, 10)
    _, approx = VectorIndex(db, factory, nprobe=nprobe).search(queries, 10)
    recall = np.mean([len(set(a.tolist()) & set(e.tolist())) / 10 for a, e in zip(approx, exact)])
    assert floor <= recall <= 1.0, recall
    with pytest.raises(ValueError, match="index_factory"):
        VectorIndex(db, "NoSuchIndex")


# ---------------------------------------------------------------- FAISS conventions (issue 44)

def test_k_beyond_the_index_is_padded_as_faiss_pads():
    import faiss
    codes, vectors = random_codes(5, 16, 1), torch.randn(5, 4, generator=torch.Generator().manual_seed(1))
    for index, raw, pad in [(HammingIndex(codes), faiss.IndexBinaryFlat(16), 2**31 - 1),
                            (VectorIndex(vectors), faiss.IndexFlatIP(4), -np.finfo(np.float32).max),
                            (VectorIndex(vectors, ids=[10, 11, 12, 13, 14]), None, -np.finfo(np.float32).max)]:
        queries = codes[:2] if isinstance(index, HammingIndex) else vectors[:2]
        distances, ids = index.search(queries, k=8)
        assert distances.shape == ids.shape == (2, 8)
        assert (ids[:, 5:] == -1).all() and (ids[:, :5] >= 0).all()
        assert (distances[:, 5:] == pad).all()
        first, _ = index.search(queries, k=5)
        assert torch.equal(distances[:, :5], first)
        if raw is not None:                                           # FAISS itself, on the same items
            raw.add(pack_codes(codes).numpy() if isinstance(index, HammingIndex) else vectors.numpy())
            want = raw.search(pack_codes(queries).numpy() if isinstance(index, HammingIndex) else queries.numpy(), 8)
            assert np.array_equal(distances.numpy(), want[0]) and np.array_equal(ids.numpy(), want[1])


def test_nprobe_is_settable_after_construction():
    g = torch.Generator().manual_seed(3)
    vectors = torch.nn.functional.normalize(torch.randn(600, 16, generator=g), dim=1)
    queries = vectors[:40] + 0.3 * torch.randn(40, 16, generator=g)
    exact = VectorIndex(vectors).search(queries, 10)[1]
    for ids in (None, list(range(100, 700))):
        index = VectorIndex(vectors, "IVF32,Flat", nprobe=32, ids=ids)
        offset = 0 if ids is None else 100
        full = index.search(queries, 10)[1] - offset
        index.nprobe = 1
        assert index.nprobe == 1
        one = index.search(queries, 10)[1]
        assert torch.equal(full, exact) and not torch.equal(one - offset, exact)   # fewer lists: other results
        index.nprobe = 32
        assert torch.equal(index.search(queries, 10)[1] - offset, exact)
    codes = random_codes(400, 32, 4)
    for ids in (None, list(range(400))):
        hamming = HammingIndex(codes, nlist=16, nprobe=16, ids=ids)
        exact_d = hamming.search(codes[:20], 10)[0]
        hamming.nprobe = 1
        assert hamming.nprobe == 1 and not torch.equal(hamming.search(codes[:20], 10)[0], exact_d)
    with pytest.raises(ValueError, match="nprobe must be a positive int"):
        hamming.nprobe = 0
    assert VectorIndex(vectors).nprobe is None and HammingIndex(codes).nprobe is None
    with pytest.raises(ValueError, match="nprobe applies to an inverted-file .IVF. index; this one is IndexFlatIP"):
        VectorIndex(vectors).nprobe = 4


@pytest.mark.parametrize("ids", [["a", "b", "c"], np.array(["a", "b", "c"]), [0, 1, "2"], [0.0, 1.0, 2.0],
                                 np.array([1, 2, 3], dtype=object).astype(str)])
def test_non_integer_ids_are_refused_saying_what_is_accepted(ids):
    with pytest.raises(ValueError, match=r"ids must be .*integer"):
        VectorIndex(torch.eye(3), ids=ids)
    with pytest.raises(ValueError, match=r"ids must be .*integer"):
        HammingIndex(random_codes(3, 8, 0), ids=ids)


def test_string_ids_message_names_the_mapping_to_use():
    with pytest.raises(ValueError, match=r"got str 'a': .*ids=range\(len\(names\)\)"):
        VectorIndex(torch.eye(2), ids=["a", "b"])
    assert VectorIndex(torch.eye(2), ids=range(2)).search(torch.eye(2), k=1)[1].flatten().tolist() == [0, 1]
    assert VectorIndex(torch.eye(2), ids=np.array([4, 5])).search(torch.eye(2), k=1)[1].flatten().tolist() == [4, 5]
