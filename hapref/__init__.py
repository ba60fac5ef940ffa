"""hapref: AP-oriented video retrieval in PyTorch.

Reference implementations of four papers, each documented in the companion book:
HAP-VR (hierarchical AP learning), the Radial loss, TCA (temporal context aggregation)
and AutoSSVH (automated frame sampling for video hashing).

Subpackages are imported on demand: ``from hapref.metrics import mean_average_precision``.
"""

__version__ = "0.1.0"
