import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from hapref.losses import frame_pseudo_labels  # noqa: E402
from hapref.plotting.pseudo_labels import LABEL_COLORS, minmax_rescale, plot_pseudo_labels  # noqa: E402


def test_minmax_rescale_keeps_order_and_spans_unit_interval():
    x = np.random.default_rng(0).normal(3.0, 2.0, 200)
    y = minmax_rescale(x)
    assert y.min() == 0.0 and y.max() == 1.0
    assert (np.argsort(x, kind="stable") == np.argsort(y, kind="stable")).all()
    assert np.allclose(y, (x - x.min()) / (x.max() - x.min()))
    with pytest.raises(ValueError, match="constant"):
        minmax_rescale(np.ones(4))


def test_label_panel_shows_the_three_states_with_a_legend():
    sim = torch.rand(8, 10, generator=torch.Generator().manual_seed(0))
    pos, neg = frame_pseudo_labels(sim, 0.3, 0.3)
    fig = plot_pseudo_labels({}, {"labels": (pos, neg)})
    shown = fig.axes[0].images[0].get_array()
    assert set(np.unique(shown)) == {0, 1, 2}
    assert (shown == 2).sum() == pos.sum() and (shown == 0).sum() == neg.sum()
    assert [t.get_text() for t in fig.legends[0].get_texts()] == list(LABEL_COLORS)
    plt.close(fig)
    with pytest.raises(ValueError, match="bool"):
        plot_pseudo_labels({}, {"labels": (pos.int(), neg)})


def test_true_matches_are_outlined_on_every_panel():
    sim = torch.rand(6, 6, generator=torch.Generator().manual_seed(1))
    labels = frame_pseudo_labels(sim, 0.35, 0.35)
    matches = torch.eye(6, dtype=torch.bool)
    fig = plot_pseudo_labels({"teacher": sim}, {"labels": labels}, stack=True, matches=matches)
    panels = [ax for ax in fig.axes if ax.images and ax.get_label() != "<colorbar>"]
    for ax in panels:
        corners = sorted((p.get_y() + 0.5, p.get_x() + 0.5) for p in ax.patches)
        assert corners == [(i, i) for i in range(6)]          # (row, column) of each outline
    assert "true match" in [t.get_text() for t in fig.legends[0].get_texts()]
    plt.close(fig)
    with pytest.raises(ValueError, match="matches"):
        plot_pseudo_labels({"teacher": sim}, {}, matches=torch.eye(5, dtype=torch.bool))
    with pytest.raises(ValueError, match="matches"):
        plot_pseudo_labels({"teacher": sim}, {}, matches=torch.eye(6))
