"""HAP-VR ablations on the book's copy-detection benchmark: Tables 2, 3 and 4 with several seeds.

    python benchmarks/hapvr_sweeps.py                      # quick profile, seeds 0-2 -> book/data/hapvr_sweeps.json
    python benchmarks/hapvr_sweeps.py --profile smoke --seeds 0 --out /tmp/s.json

Every distinct configuration is trained once per seed with :func:`hapref.train.fit`; the JSON file holds
the DSVR mAP / μAP of every run, the training-free baselines and (seed 0) the query × database similarity
matrices of the Table 2 losses for the heatmaps of chapter 4. Deterministic on one machine (CPU).

Benchmark designs tried for a setting where training pays (issue: trained HAP-VR must beat the best
training-free similarity by >= 0.05 DSVR mAP on every seed). All float64, one seed (0), data seed 0, the full
objective at lr 1e-3 unless said; "curve" = mAP after 50, 100, ..., 300 steps. None reached it, so the stored
file is still the quick-profile ablation below, and chapter 4 says so.

* quick benchmark, batch 4, 300 steps (pool of 12 view batches): Chamfer 0.741; full 0.679 0.660 0.672 0.683
  0.672 0.661; L_base 0.671 0.700 0.703 0.675 0.707 0.675. The network with its initial ψ: 0.236 ± 0.371
  over seeds 0-2 (chapter 4), 0.19 on "channels" below. Max-pooling the frame matrix by 2 or 4 before Chamfer (what ψ's resolution allows)
  scores 0.741 / 0.743, so ψ's 4x downsampling is not what caps the trained network.
* "events" (BenchmarkConfig(same_scene_per_query=6, train_scenes=4): six more cameras at every query's place,
  an unlabeled collection of four places so that batches of 8 hold several clips of one place), batch 8, pool
  24: cosine 0.485, Chamfer 0.536, symmetric Chamfer 0.492, TopK-Chamfer 0.525; full 0.554 0.554 0.536 0.559
  0.529 0.526. A strong view's 50-100 % crop looks like another camera at the same place, so the views teach
  the network to match both.
* "channels" (benchmark PROFILES["channels"]: three publishing channels whose banners cover half of every
  frame, copies re-uploaded by another channel, a third of the distractors from the query's channel), batch 8,
  pool 16: cosine 0.646, Chamfer 0.701, symmetric Chamfer 0.691, TopK-Chamfer 0.705; full 0.644 0.626 0.630
  0.629 0.629 0.631 (lr 1e-4: 0.623 ... 0.636; lr 3e-3: 0.649 ... 0.640). Chamfer's errors there are still the
  same-place videos and other queries' copies (5 of 53 misrankings are same-channel distractors); the trained
  network makes more of every kind, most on copies with temporal edits (14 vs 5 distractors above them).
* more data, quick benchmark: 256 training clips, a pool of 64 view batches of 8 clips, 400 steps (prep 13 min on
  a loaded machine): full 0.685 0.679 0.667 0.666 0.666 0.673 0.662 0.668 (every 50 steps), still below Chamfer.
One suspected cause, not tested: a quarter of the S2VS strong views reorder the clip (``shuffle_dropout`` is drawn
with probability 0.5 and shuffles its 4-16-frame segments with probability 0.5, ``hapref.data.augment``), and
more drop or blank segments, so the positives teach ψ that frame order matters little, the one thing ψ can see
and Chamfer cannot.
In every design the trained mAP is reached by step 50 and stays flat to step 300: the self-supervised
objective is solved on the pool without the network becoming better than Chamfer at DSVR.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared benchmark helpers
from measure import write_sweep  # noqa: E402

from hapref.metrics import map_and_micro_ap
from hapref.models.hapvr import VIDEO_LOSSES
from hapref.train import fit
from hapref.train.hapvr import HAPVRTask, Variant, config_for, prepare_data, untrained_scores

#: Video loss combined with L_base only (HAP-VR Table 2), TopK-Chamfer on, no frame-level term.
TABLE2: dict[str, Variant] = {name: Variant(video_loss=name, frame_ap=False) for name in VIDEO_LOSSES}
#: Modules added one at a time (HAP-VR Table 3).
TABLE3: dict[str, Variant] = {
    "L_base (Chamfer)": Variant(video_loss="none", frame_ap=False, temporal_k=0.0),
    "+ TopK-Chamfer": Variant(video_loss="none", frame_ap=False),
    "+ video-level AP": Variant(video_loss="quadlinear_ap", frame_ap=False),
    "+ frame-level AP": Variant(video_loss="quadlinear_ap", frame_ap=True),
}
#: Temporal rate k_t of the full model (HAP-VR Table 4): 0 = Chamfer, 1 = mean pooling.
TABLE4: dict[str, Variant] = {f"k_t={k:g}": Variant(temporal_k=k) for k in (0.0, 0.03, 0.5, 0.75, 1.0)}
TABLES = {"table2": TABLE2, "table3": TABLE3, "table4": TABLE4}
UNTRAINED = {"Chamfer": ("chamfer", 0.0), "TopK-Chamfer k=0.5": ("chamfer", 0.5), "mean": ("mean", 1.0)}
HEATMAP_QUERIES = 4
HEATMAP_ITEMS = 24


#: The orderings chapter 4 asserts, each separated by every seed (weak: three seeds, gaps under 0.03). Rows are
#: "<table>/<row>" of TABLES; a claim holds when better - worse > 0 for every seed and the mean gap >= margin.
CLAIMS = [
    {"better": "table2/listwise_ap", "worse": "table2/quadlinear_ap", "metric": "uAP", "margin": 0.0},
    {"better": "table2/listwise_ap", "worse": "table2/smooth_ap", "metric": "uAP", "margin": 0.0},
    *({"better": f"table4/k_t={k}", "worse": "table4/k_t=0.5", "metric": m, "margin": 0.0}
      for k in ("0", "0.03") for m in ("mAP", "uAP")),
    *({"better": f"table4/k_t={k}", "worse": "table4/k_t=1", "metric": "uAP", "margin": 0.0} for k in ("0", "0.03")),
]

def variant_key(v: Variant) -> str:
    return f"{v.video_loss}|frame={int(v.frame_ap)}|k={v.temporal_k:g}|{v.weights}"


def heatmap_columns(relevance: torch.Tensor) -> list[int]:
    """Database items for the heatmaps: the relevant items of the first queries, then distractors."""
    rel = relevance[:HEATMAP_QUERIES]
    relevant = [j for q in range(rel.shape[0]) for j in rel[q].nonzero().flatten().tolist()]
    others = [j for j in range(relevance.shape[1]) if not relevance[:, j].any()]
    return (relevant + others)[:HEATMAP_ITEMS]


def run_sweep(profile: str = "quick", seeds: tuple[int, ...] = (0, 1, 2), steps: int | None = None,
              progress: bool = True) -> dict:
    """Train every distinct configuration of :data:`TABLES` for every seed; return the results as plain data."""
    data = prepare_data(profile)
    columns = heatmap_columns(data.relevance)
    variants = {variant_key(v): v for table in TABLES.values() for v in table.values()}
    configs = {}
    heatmaps = {}
    for i, (key, variant) in enumerate(sorted(variants.items())):
        runs = []
        for seed in seeds:
            task = HAPVRTask(profile, variant, seed)
            config = config_for(profile, seed, **({} if steps is None else {"steps": steps,
                                                                            "warmup_steps": min(steps, 1)}))
            result = fit(task, config, progress=False)
            runs.append({"seed": seed, **{k: round(v, 6) for k, v in result.metrics.items()},
                         "final_loss": round(result.history[-1]["loss"], 4)})
            if seed == seeds[0] and not variant.frame_ap and variant.temporal_k == Variant().temporal_k:
                with torch.no_grad():
                    scores = task.scores(result.model.eval())
                heatmaps[variant.video_loss] = [[round(float(x), 4) for x in row]
                                                for row in scores[:HEATMAP_QUERIES, columns]]
            if progress:
                print(f"[{i + 1}/{len(variants)}] {key} seed={seed}: mAP={runs[-1]['mAP']:.4f} "
                      f"uAP={runs[-1]['uAP']:.4f}", file=sys.stderr, flush=True)
        configs[key] = {"variant": asdict(variant), "runs": runs}
    untrained = {name: {k: round(v, 6) for k, v in map_and_micro_ap(untrained_scores(profile, m, k), data.relevance).items()}
                 for name, (m, k) in UNTRAINED.items()}
    config = config_for(profile)
    return {
        "profile": profile, "seeds": list(seeds), "steps": steps or config.steps, "lr": config.lr,
        "task": "DSVR", "configs": configs, "untrained": untrained,
        "tables": {name: {row: variant_key(v) for row, v in table.items()} for name, table in TABLES.items()},
        "heatmaps": heatmaps, "heatmap_relevance": data.relevance[:HEATMAP_QUERIES, columns].int().tolist(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="quick", choices=("smoke", "quick", "full"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=None, help="override the profile's training steps")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "book" / "data" / "hapvr_sweeps.json"))
    args = parser.parse_args(argv)
    def sweep() -> dict:
        return {**run_sweep(args.profile, tuple(args.seeds), args.steps), "claims": CLAIMS}

    # one thread, as chapter 4's quick runs, which must reproduce the stored rows
    out = write_sweep(args.profile, args.out, sweep, threads=1)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
