"""Retrieval metrics in vectorised PyTorch (any device, float32/float64), checked against scikit-learn.

AP / mAP / μAP (HAP-VR), mAP@N (also tie-aware, from a FAISS Hamming index) and GMAP (AutoSSVH), NDCG,
quadlet and triplet precision (Radial loss), and the score-threshold precision-recall curve.
Scores are similarities: higher = ranked earlier.
"""

from hapref.metrics.ap import average_precision, map_and_micro_ap, mean_average_precision, micro_average_precision
from hapref.metrics.curves import precision_recall_curve
from hapref.metrics.hamming import hamming_map_at_n, hamming_map_at_ns, map_at_n_tie_aware
from hapref.metrics.hashing import gmap, map_at_n
from hapref.metrics.ndcg import ndcg
from hapref.metrics.order import quadlet_precision, triplet_precision

__all__ = [
    "average_precision",
    "gmap",
    "hamming_map_at_n",
    "hamming_map_at_ns",
    "map_and_micro_ap",
    "map_at_n",
    "map_at_n_tie_aware",
    "mean_average_precision",
    "micro_average_precision",
    "ndcg",
    "precision_recall_curve",
    "quadlet_precision",
    "triplet_precision",
]
