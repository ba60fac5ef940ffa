"""The package's figures are readable at the size the book shows them (issue 33).

The book's text column is 676 px wide at a 1280-px window, and matplotlib's inline figures are 100 dpi, so
a figure ``w`` inches wide is shown at ``min(1, 6.76 / w)`` of its size. For every plotting function of
``hapref.plotting`` that draws its own figure, drawn from a small input, this asserts that

- every tick label, axis label and legend entry is at least ``MIN_POINTS`` (9 pt) once scaled to that
  displayed size (a 10-inch figure needs 13.3 pt text);
- every axis that shows numeric tick labels has a label (colour bars included), so no number on a figure
  is without its meaning; a row of panels may share the label of its first panel's y axis (and a column
  its x label), and an axis whose tick labels are names (bars per method) needs none.

A failure lists the function, the element and its displayed size.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

COLUMN_INCHES = 6.76  # 676 px at matplotlib's 100 dpi
MIN_POINTS = 9.0


def displayed_scale(fig: Figure) -> float:
    """The fraction of its size at which the book shows ``fig`` (1 for a figure up to 6.76 in wide)."""
    return min(1.0, COLUMN_INCHES / fig.get_size_inches()[0])


def _visible(text) -> bool:
    return text.get_visible() and bool(text.get_text().strip())


def _numeric(text: str) -> bool:
    try:
        float(text.replace("\u2212", "-").replace("%", "").replace("$", "").replace("{", "").replace("}", ""))
    except ValueError:
        return False
    return True


def _labelled_elsewhere(fig: Figure, ax, which: str) -> bool:
    """A panel in the same row (y) or column (x) as ``ax`` labels that axis for the row or column."""
    here = ax.get_position()
    for other in fig.axes:
        if other is ax or not other.get_visible() or not other.axison:
            continue
        there = other.get_position()
        if which == "y" and abs(there.y0 - here.y0) < 0.02 and abs(there.y1 - here.y1) < 0.02:
            if other.yaxis.label.get_text().strip():
                return True
        if which == "x" and abs(there.x0 - here.x0) < 0.02 and abs(there.x1 - here.x1) < 0.02:
            if other.xaxis.label.get_text().strip():
                return True
    return False


def typography_problems(fig: Figure) -> list[str]:
    """What a reader could not read on ``fig`` at its displayed size, or where an axis has no label."""
    fig.canvas.draw()
    scale = displayed_scale(fig)
    problems = []

    def check(kind: str, texts) -> None:
        for t in texts:
            if _visible(t) and t.get_fontsize() * scale < MIN_POINTS - 1e-9:
                problems.append(f"{kind} {t.get_text()[:30]!r}: {t.get_fontsize():.1f} pt, shown at "
                                f"{t.get_fontsize() * scale:.1f} pt (< {MIN_POINTS:g})")
                return  # one per kind and axes is enough to find it

    for i, ax in enumerate(fig.axes):
        if not ax.get_visible() or not ax.axison:
            continue
        name = f"axes {i}" + (f" ({ax.get_title()[:30]!r})" if ax.get_title() else "")
        for axis, which in ((ax.xaxis, "x"), (ax.yaxis, "y")):
            if not axis.get_visible():
                continue
            ticks = [t for t in axis.get_ticklabels() if _visible(t)]
            check(f"{name} {which} tick label", ticks)
            check(f"{name} {which} axis label", [axis.label])
            numeric = [t for t in ticks if _numeric(t.get_text())]
            if numeric and not axis.label.get_text().strip() and not _labelled_elsewhere(fig, ax, which):
                problems.append(f"{name}: the {which} axis shows tick labels but has no label")
        legend = ax.get_legend()
        if legend is not None and legend.get_visible():
            check(f"{name} legend", legend.get_texts())
    for legend in fig.legends:
        check("figure legend", legend.get_texts())
    return problems


def _quadlet_points():
    return {"q": [0.0, 0.0], "p": [1.0, 0.0], "i": [0.0, 1.0], "n": [0.5, 0.5]}


def _figure(result) -> Figure:
    """The figure of whatever a plotting function returns (a Figure, an Axes or a sequence of Axes)."""
    if isinstance(result, Figure):
        return result
    if isinstance(result, (list, tuple, np.ndarray)):
        return np.asarray(result, dtype=object).flat[0].figure
    return result.figure


def _cases():
    """(name, function drawing one figure from a small input) for every plotting function of the package."""
    from hapref.losses import frame_pseudo_labels
    from hapref.plotting import losses, pseudo_labels, radial, ranking, similarity, tca, training

    gen = torch.Generator().manual_seed(0)
    rng = np.random.default_rng(0)
    cases = {
        "losses.plot_surrogates": lambda: losses.plot_surrogates(),
        "losses.plot_surrogate_explorer": lambda: losses.plot_surrogate_explorer(),
        "losses.plot_misranked_gradients": lambda: losses.plot_misranked_gradients(_ranking_losses()),
        "losses.plot_ap_curves": lambda: losses.plot_ap_curves(
            {"Smooth-AP": [0.5, 0.7, 0.8], "MSE": [0.5, 0.6, 0.65]},
            {"Smooth-AP": "list-wise", "MSE": "point-wise"}, "mAP during training"),
        "radial.plot_quadlet_gradients": lambda: radial.plot_quadlet_gradients(_quadlet_points()),
        "radial.plot_theorem_geometry": lambda: radial.plot_theorem_geometry(c=3.0),
        "radial.plot_violation_sweep": lambda: _violation_sweep(radial),
        "radial.plot_distance_curve": lambda: _distance_curve(radial),
        "radial.plot_ranked_lists": lambda: _ranked_lists(radial),
        "ranking.plot_pairwise_vs_listwise": lambda: ranking.plot_pairwise_vs_listwise(
            {"A": [1, 0, 1, 0, 0], "B": [0, 1, 1, 0, 0]}),
        "ranking.plot_rank_sweep": lambda: ranking.plot_rank_sweep(8, [1, 4], 3),
        "similarity.plot_similarity_matrices": lambda: similarity.plot_similarity_matrices(
            [torch.eye(6), torch.rand(6, 7, generator=gen)], ["copy", "other"]),
        "similarity.plot_topk_curves": lambda: similarity.plot_topk_curves(
            torch.linspace(0, 1, 5), {"copy": 1 - torch.linspace(0, 1, 5) / 2}),
        "similarity.plot_score_bars": lambda: similarity.plot_score_bars(
            {"chamfer": {"mAP": 0.8, "uAP": 0.7}, "mean": {"mAP": 0.6, "uAP": 0.5}}),
        "tca.plot_negative_weights": lambda: tca.plot_negative_weights(),
        "tca.plot_pooling_regions": lambda: tca.plot_pooling_regions(),
        "similarity.show_frames": lambda: similarity.show_frames(
            {"query": torch.zeros(8, 16, 16, 3, dtype=torch.uint8),
             "copy": torch.zeros(8, 16, 16, 3, dtype=torch.uint8)}, num_frames=6),
        "similarity.plot_region_grid": lambda: similarity.plot_region_grid(
            torch.zeros(32, 32, 3, dtype=torch.uint8)),
        "pseudo_labels.plot_pseudo_labels": lambda: pseudo_labels.plot_pseudo_labels(
            {"teacher": torch.rand(8, 10, generator=gen)},
            {"labels": frame_pseudo_labels(torch.rand(8, 10, generator=gen), 0.3, 0.3)}),
        "training.plot_history": lambda: training.plot_history(
            {"run": [{"step": s, "loss": 1 / s} for s in range(1, 6)]}),
        "training.plot_metric_bars": lambda: training.plot_metric_bars(
            {"QuadLinear-AP": {"mAP": [0.8, 0.82], "uAP": [0.7, 0.72]},
             "Smooth-AP": {"mAP": [0.7, 0.75], "uAP": [0.6, 0.65]}}, baseline={"mAP": 0.75, "uAP": 0.6}),
        "training.plot_metric_bars(stack)": lambda: training.plot_metric_bars(
            {"QuadLinear-AP": {"mAP": [0.8, 0.82], "uAP": [0.7, 0.72]}}, stack=True),
        "training.plot_scale_curves": lambda: training.plot_scale_curves(
            {"trained": [[(25, 0.5), (50, 0.7)], [(25, 0.55), (50, 0.72)]]}, baseline=0.5),
        "training.plot_similarity_distributions": lambda: training.plot_similarity_distributions(
            {"model": (rng.uniform(0.5, 1, 50), rng.uniform(0, 0.6, 200))}),
        "training.plot_similarity_heatmaps": lambda: training.plot_similarity_heatmaps(
            {f"m{i}": rng.uniform(size=(5, 5)) for i in range(3)}),
    }
    return cases


def _ranking_losses():
    from hapref.losses import QuadLinearAP, SmoothAP

    return {"Smooth-AP": SmoothAP(), "QuadLinear-AP": QuadLinearAP()}


def _violation_sweep(radial):
    from hapref.radial_theory import violation_rates

    cs = [1.0, 2.0, 3.0]
    return radial.plot_violation_sweep(cs, {"random": violation_rates(cs, dim=4, count=200)})


def _distance_curve(radial):
    from hapref.data.highlights import make_highlight_video

    video = make_highlight_video(num_clips=2, clip_frames=(12, 12), size=16)
    return radial.plot_distance_curve(torch.rand(17, generator=torch.Generator().manual_seed(0)), video,
                                      detected_cuts=[12], window=8)


def _ranked_lists(radial):
    thumb = np.zeros((8, 8, 3))
    rows = {f"{name}\nNDCG 0.99{k}" if k == 1 else f"{name}, NDCG 0.99{k}": ([thumb] * 8, [2, 1, 0, 2, 1, 0, 2, 1])
            for k, name in enumerate(("triplet", "quadlet", "radial"))}
    return radial.plot_ranked_lists(thumb, rows)


CASES = _cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_figure_is_readable_at_its_displayed_size(name):
    fig = _figure(CASES[name]())
    try:
        problems = typography_problems(fig)
        width = fig.get_size_inches()[0]
        assert not problems, (f"{name} ({width:.1f} in wide, shown at {displayed_scale(fig):.2f}):\n"
                              + "\n".join(problems))
    finally:
        plt.close(fig)


def test_the_check_sees_small_text_and_missing_labels():
    fig, ax = plt.subplots(figsize=(13.52, 3))  # shown at half size
    ax.plot([0, 1], [0, 1], label="a line")
    ax.legend(fontsize=16)
    ax.tick_params(labelsize=16)
    ax.set_xlabel("x", fontsize=16)
    problems = typography_problems(fig)
    plt.close(fig)
    assert any("legend" in p and "8.0 pt" in p for p in problems), problems
    assert any("y axis shows tick labels but has no label" in p for p in problems), problems
    fig, ax = plt.subplots(figsize=(6.0, 3))
    ax.plot([0, 1], [0, 1])
    ax.set(xlabel="x", ylabel="y")
    ax.tick_params(labelsize=10)
    assert typography_problems(fig) == []
    plt.close(fig)


def test_ranked_lists_texts_overlap_nothing():
    """Radial Fig. 4 (fig-05-ranked): no text overlaps another text or a thumbnail, and every text is >= 9 pt."""
    from hapref.plotting import radial

    fig = _ranked_lists(radial)
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        ax = fig.axes[0]
        texts = [t for t in ax.texts if _visible(t)] + list(fig.legends[0].get_texts())
        boxes = [t.get_window_extent(renderer) for t in texts]
        images = [im.get_window_extent(renderer) for im in ax.images]
        assert len(images) == 1 + 3 * 8
        for k, (text, bbox) in enumerate(zip(texts, boxes)):
            assert text.get_fontsize() * displayed_scale(fig) >= MIN_POINTS, text.get_text()
            for other in boxes[k + 1:] + images:
                assert not bbox.overlaps(other), text.get_text()
            assert fig.bbox.contains(bbox.x0, bbox.y0) and fig.bbox.contains(bbox.x1, bbox.y1), text.get_text()
    finally:
        plt.close(fig)


def test_ranked_lists_refuse_rows_of_unequal_length():
    from hapref.plotting import radial

    thumb = np.zeros((8, 8, 3))
    with pytest.raises(ValueError, match="rows"):
        radial.plot_ranked_lists(thumb, {"a": ([thumb] * 3, [2, 1, 0]), "b": ([thumb] * 2, [2, 1])})
    with pytest.raises(ValueError, match="rows"):
        radial.plot_ranked_lists(thumb, {})
