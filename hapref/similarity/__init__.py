"""Video and embedding similarity: pairwise cosine, Chamfer and TopK-Chamfer, the ViSiL-style CNN."""

from hapref.similarity.pairwise import pairwise_cosine

__all__ = ["pairwise_cosine"]
