"""Search with FAISS: packed binary codes and a Hamming index, an inner-product index for vectors.

``pack_codes`` / ``unpack_codes`` convert ±1 codes to the packed bytes FAISS stores (32× smaller than
float32); ``HammingIndex`` ranks a database of codes by Hamming distance (exact ``IndexBinaryFlat``,
or ``IndexBinaryIVF`` with ``nlist``); ``VectorIndex`` ranks video-level vectors by inner product.
``lsh_codes`` (random projections) and ``pca_sign_codes`` (PCA hashing) are training-free codes of mean
frame features, the baselines of learned hashing.
"""

from hapref.search.codes import lsh_codes, pack_codes, pca_sign_codes, unpack_codes
from hapref.search.index import HammingIndex, VectorIndex

__all__ = ["HammingIndex", "VectorIndex", "lsh_codes", "pack_codes", "pca_sign_codes", "unpack_codes"]

# classic unsupervised hashing of any feature (ITQ, spectral hashing), the same call as pca_sign_codes
from hapref.search.unsupervised import itq_codes, itq_rotation, spectral_hashing_codes, spectral_modes  # noqa: E402

__all__ += ["itq_codes", "itq_rotation", "spectral_hashing_codes", "spectral_modes"]
