"""Video and embedding similarity: pairwise cosine, Chamfer and TopK-Chamfer, the ViSiL-style CNN, fast inner products."""

from hapref.similarity.chamfer import (
    chamfer_similarity,
    mean_pooled_similarity,
    mean_similarity,
    pair_valid,
    reduce_topk_chamfer,
    symmetric_chamfer,
    topk_chamfer,
)
from hapref.similarity.comparator import VideoComparator, similarity_regularization, squash
from hapref.similarity.network import (
    MEASURES,
    RegionAttention,
    VideoSimilarityNetwork,
    frame_to_frame,
    pad_videos,
    video_similarity_matrix,
)
from hapref.similarity.pairwise import GRADIENT_EPS, NORMALIZE_EPS, l2_normalize, pairwise_cosine
from hapref.similarity.products import dot_products
from hapref.similarity.alignment import (ALIGNMENTS, WARPS, alignment_similarity_matrix, diagonal_band_similarity,
                                         dp_alignment, dtw_similarity, hough_voting, temporal_network, warp_search,
                                         warp_target)

__all__ = [
    "GRADIENT_EPS", "MEASURES", "NORMALIZE_EPS", "l2_normalize", "RegionAttention", "VideoComparator", "VideoSimilarityNetwork", "chamfer_similarity",
    "dot_products", "frame_to_frame", "mean_pooled_similarity", "mean_similarity", "pad_videos", "pair_valid", "pairwise_cosine",
    "reduce_topk_chamfer", "similarity_regularization", "squash", "symmetric_chamfer", "topk_chamfer",
    "video_similarity_matrix",
    "ALIGNMENTS", "alignment_similarity_matrix", "diagonal_band_similarity", "dp_alignment", "dtw_similarity",
    "hough_voting", "temporal_network", "WARPS", "warp_search", "warp_target",
]
from hapref.similarity.temporal_match_kernel import temporal_match_kernel, tmk_offset_scores, tmk_weights  # noqa: E402
from hapref.similarity.score_normalization import (SCORE_NORMALIZATIONS, background_normalize,  # noqa: E402
                                                   normalize_scores, zscore_rows)

__all__ += ["temporal_match_kernel", "tmk_offset_scores", "tmk_weights"]
__all__ += ["SCORE_NORMALIZATIONS", "background_normalize", "normalize_scores", "zscore_rows"]
