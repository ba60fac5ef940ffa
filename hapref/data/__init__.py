"""hapref.data — an offline video copy-detection benchmark, training augmentations and real-dataset loaders.

Benchmark (deterministic from a seed, cached under ``$HAPREF_DATA`` or ``~/.cache/hapref``)::

    from hapref.data import build_copy_benchmark
    bench = build_copy_benchmark("quick", seed=0)      # "smoke" (CI), "quick" (chapters, CPU), "full" (GPU)
    bench.queries[0]        # {"id": "q000", "index": 0, "frames": uint8 [T, H, W, 3]}
    bench.database          # VideoDataset of copies, same-scene videos and distractors (shuffled)
    bench.relevance("DSVR") # bool [Q, N_db]: near-duplicates + partial copies; "CSVR" adds same-scene videos
    bench.levels            # int8 [Q, N_db]: 3 ND, 2 DS (partial copy), 1 CS (same scene), 0 distractor
    bench.info["q000_copy01"]  # role, scene, source query, edit family, transformations with parameters
    bench.video("q000")     # frames of any video by id
    bench.edited_with("codec")  # bool [N_db]: edit family or transformation, for per-family analysis
    bench.train[i]          # unlabeled clip uint8 [T_train, H, W, 3] (distractor scenes only, rendered on demand)

Training views (S2VS weak/strong, one random transform per clip, batched on the clips' device)::

    from hapref.data import ClipAugmenter, video_in_video
    g = torch.Generator().manual_seed(0)
    weak = ClipAugmenter("weak", num_frames=16)(clips, g)      # clips uint8 [B, T, H, W, 3] -> [B, 16, H, W, 3]
    strong = ClipAugmenter("strong", num_frames=16)(clips, g)
    strong, overlap = video_in_video(strong, g)                # overlap [B, B]: identity + λ for mixed clips

Drawn frame descriptors (chapter 6: edits inside a subspace that whitening cannot see, shared stock shots)::

    from hapref.data import generate_descriptor_benchmark
    bench = generate_descriptor_benchmark("edits", seed=0)   # train [C, V, T, D], queries, database, relevance

Real benchmarks from local files (nothing downloads here; ``data_scripts/`` fetch them), all with the same
``relevance(task)``: ``load_fivr`` (DSVR/CSVR/ISVR/DAVR), ``load_evve``, ``load_svd``, ``load_cc_web_video``,
``load_vcdb``; features ``HDF5Features(path, ids, min_len)`` -> float ``[T, R, D]``; frames
``FramesDirectory(root)`` -> uint8 ``[T, H, W, 3]``. ``hapref.data.download``: ``download`` (resumable,
checksummed) and ``extract`` (safe); ``hapref.data.unpickle.load_pickle`` (built-in values only). The published
evaluation protocols on these files: :func:`hapref.evaluation.evaluate`.

Use ``torch.utils.data.DataLoader(bench.database, batch_size=8, collate_fn=collate_videos)`` for padded batches
with a valid-frame flag.
"""

from __future__ import annotations

from hapref.data.augment import ClipAugmenter, video_in_video
from hapref.data.benchmark import (COPY_FAMILIES, LEVELS, PROFILES, TASKS, BenchmarkConfig, CopyBenchmark,
                                   TrainClips, build_copy_benchmark, generate_copy_benchmark)
from hapref.data.loaders import (FramesDirectory, HDF5Features, RetrievalAnnotations, load_cc_web_video,
                                 load_evve, load_fivr, load_svd, load_vcdb, tile_to_min_len)
from hapref.data.cache import FORMAT_VERSION, data_root
from hapref.data.descriptors import DescriptorBenchmark, DescriptorBenchmarkConfig, generate_descriptor_benchmark
from hapref.data.datasets import VideoDataset, collate_videos
from hapref.data.sources import decode_video
from hapref.data.transforms import FAMILIES
from hapref.data.temporal_edits import TEMPORAL_EDIT_SPLITS, edit_indices, temporal_edit_split

__all__ = [
    "BenchmarkConfig", "build_copy_benchmark", "ClipAugmenter", "collate_videos", "COPY_FAMILIES", "CopyBenchmark",
    "data_root", "decode_video", "DescriptorBenchmark", "DescriptorBenchmarkConfig", "FAMILIES", "FORMAT_VERSION",
    "FramesDirectory", "generate_copy_benchmark", "generate_descriptor_benchmark",
    "HDF5Features", "LEVELS", "load_cc_web_video", "load_evve", "load_fivr", "load_svd", "load_vcdb", "PROFILES",
    "RetrievalAnnotations", "TASKS", "tile_to_min_len", "TrainClips", "video_in_video", "VideoDataset",
    "TEMPORAL_EDIT_SPLITS", "edit_indices", "temporal_edit_split",
]
