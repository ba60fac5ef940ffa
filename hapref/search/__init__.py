"""Search with FAISS: packed binary codes and a Hamming index, an inner-product index for vectors.

``pack_codes`` / ``unpack_codes`` convert ±1 codes to the packed bytes FAISS stores (32× smaller than
float32); ``HammingIndex`` ranks a database of codes by Hamming distance (exact ``IndexBinaryFlat``,
or ``IndexBinaryIVF`` with ``nlist``); ``VectorIndex`` ranks video-level vectors by inner product.
"""

from hapref.search.codes import pack_codes, unpack_codes
from hapref.search.index import HammingIndex, VectorIndex

__all__ = ["HammingIndex", "VectorIndex", "pack_codes", "unpack_codes"]
