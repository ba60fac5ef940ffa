import itertools

import pytest
import torch

from hapref.losses import frame_pseudo_labels, positive_overlap, teacher_frame_similarity


def test_centred_teacher_similarity_matches_a_literal_transcription():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(2, 5, 7, generator=g), torch.randn(3, 6, 7, generator=g)
    got = teacher_frame_similarity(a, b, center=True)
    for i, j in itertools.product(range(2), range(3)):
        x, y = a[i] - a[i].mean(0), b[j] - b[j].mean(0)
        for s, t in itertools.product(range(5), range(6)):
            want = torch.nn.functional.cosine_similarity(x[s], y[t], dim=0)
            assert torch.isclose(got[i, j, s, t], want, atol=1e-6)
    with pytest.raises(TypeError, match="center"):
        teacher_frame_similarity(a, center=1)


def test_positive_overlap_matches_pairwise_jaccard():
    g = torch.Generator().manual_seed(1)
    pos, _ = frame_pseudo_labels(torch.rand(4, 9, 12, generator=g), 0.3, 0.3)
    want = []
    for v in range(4):
        sets = [set(torch.nonzero(pos[v, a]).flatten().tolist()) for a in range(9)]
        want += [len(sets[a] & sets[b]) / len(sets[a] | sets[b]) for a in range(9) for b in range(9) if a != b]
    assert positive_overlap(pos).item() == pytest.approx(sum(want) / len(want), abs=1e-6)
    with pytest.raises(TypeError, match="bool"):
        positive_overlap(pos.float())


def test_centring_separates_the_positives_of_a_shared_content_teacher():
    # two views = a large per-view offset (colour, photo) + the same frame-specific parts: uncentred, the offsets
    # make every query frame rank the same target frames first; centred, each query frame finds its counterpart
    g = torch.Generator().manual_seed(2)
    specific = torch.randn(1, 16, 32, generator=g)
    x = 10 * torch.randn(1, 1, 32, generator=g) + specific
    y = 10 * torch.randn(1, 1, 32, generator=g) + specific + 0.3 * torch.randn(1, 16, 32, generator=g)
    raw, _ = frame_pseudo_labels(teacher_frame_similarity(x, y)[0, 0], 0.35, 0.35)
    cen, _ = frame_pseudo_labels(teacher_frame_similarity(x, y, center=True)[0, 0], 0.35, 0.35)
    assert positive_overlap(raw) > 0.8 and positive_overlap(cen) < 0.3
    assert cen.diagonal().all() and not raw.diagonal().all()
