"""Issue 44 item 3: what a training run tells the person watching it."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from hapref.plotting.training import plot_history  # noqa: E402


def test_plot_history_saved_png_keeps_its_axis_labels(tmp_path):
    ax = plot_history({"run": [{"step": s, "loss": 1 / s} for s in range(1, 50)]})
    path = tmp_path / "curves.png"
    ax.figure.savefig(path)                  # a plain savefig, no bbox_inches="tight"
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    figure_box = fig.bbox
    for label in (ax.xaxis.label, ax.yaxis.label):
        box = label.get_window_extent(renderer)
        assert label.get_text() and box.y0 >= figure_box.y0 - 0.5 and box.x0 >= figure_box.x0 - 0.5, label
        assert box.y1 <= figure_box.y1 + 0.5 and box.x1 <= figure_box.x1 + 0.5, label
    assert path.stat().st_size > 0
    plt.close(fig)
