"""TCA ablations (Table 1a-1e analogues) on the book's copy-detection benchmark, several seeds per row (chapter 6).

    python benchmarks/tca_sweeps.py                        # quick profile, seeds 0-2 -> book/data/tca_sweeps.json
    python benchmarks/tca_sweeps.py --profile smoke --seeds 0 --out /tmp/s.json

Every distinct configuration of :data:`TABLES` is trained once per seed with :func:`hapref.train.fit` (one
torch thread, so a run is reproducible bit for bit on one machine). Stored per run: DSVR mAP / μAP of
TCA_c (and of TCA_f / TCA_sym where the aggregator has frame outputs), the final loss and, for the first
seed, the training loss every few steps. The training-free baselines of both frame features are stored too.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared benchmark helpers
from measure import write_sweep  # noqa: E402

from hapref.train import fit
from hapref.train.tca import TCATask, Variant, baseline_metrics, config_for

#: The paper's configuration at this scale: Transformer, L3-iRMAC, Circle loss (γ 256, m 0.25), the profile's bank.
DEFAULT = Variant()
#: TCA Table 1 analogues. (a) aggregators on iMAC with video-level descriptors; (b) feature; (c) loss;
#: (d) memory-bank size, with the triplet baseline (hardest in-batch negative, no bank); (e) momentum
#: key encoder with a queue (0 = the memory bank of the current encoder's keys).
TABLES: dict[str, dict[str, Variant]] = {
    "1a_aggregator": {name: Variant(aggregator=name, pooling="imac")
                      for name in ("netvlad", "lstm", "gru", "transformer")},
    "1b_feature": {"iMAC": Variant(pooling="imac"), "L3-iRMAC": DEFAULT},
    "1c_loss": {"InfoNCE τ=0.07": Variant(loss="infonce", temperature=0.07),
                "InfoNCE τ=1/256": Variant(loss="infonce", temperature=1 / 256), "Circle γ=256": DEFAULT},
    "1d_bank": {"triplet (no bank)": Variant(loss="triplet", bank_size=0), "bank 0": Variant(bank_size=0),
                "bank 16": Variant(bank_size=16), "bank 32": Variant(bank_size=32), "bank 128": DEFAULT},
    "1e_momentum": {"0 (bank)": DEFAULT, **{f"{m:g}": Variant(momentum=m) for m in (0.9, 0.99, 0.999)}},
}
CURVE_EVERY = 5


#: The orderings chapter 6 asserts, each separated by every seed (weak: three seeds, gaps of 0.003-0.022). Rows are
#: "<table>/<row>" of TABLES; a claim holds when better - worse > 0 for every seed and the mean gap >= margin.
CLAIMS = [
    {"better": "1b_feature/L3-iRMAC", "worse": "1b_feature/iMAC", "metric": "mAP", "margin": 0.0},
    {"better": "1c_loss/InfoNCE τ=0.07", "worse": "1c_loss/InfoNCE τ=1/256", "metric": "mAP", "margin": 0.0},
    {"better": "1d_bank/bank 32", "worse": "1d_bank/bank 0", "metric": "mAP", "margin": 0.0},
]

def variant_key(v: Variant) -> str:
    return "|".join(f"{k}={val}" for k, val in sorted(asdict(v).items()))


def run_one(profile: str, variant: Variant, seed: int, curve: bool = False) -> dict:
    """Train one configuration with one seed; the stored row (metrics rounded to 6 d.p., loss to 4)."""
    result = fit(TCATask(profile, variant, seed), config_for(profile, seed), progress=False)
    row = {"seed": seed, **{k: round(float(v), 6) for k, v in result.metrics.items()},
           "final_loss": round(result.history[-1]["loss"], 4)}
    if curve:
        row["curve"] = [[h["step"], round(h["loss"], 4)] for h in result.history if h["step"] % CURVE_EVERY == 0]
    return row


def run_sweep(profile: str = "quick", seeds: tuple[int, ...] = (0, 1, 2, 3, 4), progress: bool = True) -> dict:
    """Every distinct configuration × seed; the results as plain data."""
    torch.set_num_threads(1)
    variants = {variant_key(v): v for table in TABLES.values() for v in table.values()}
    configs = {}
    for i, (key, variant) in enumerate(sorted(variants.items())):
        runs = [run_one(profile, variant, seed, curve=seed == seeds[0]) for seed in seeds]
        configs[key] = {"variant": asdict(variant), "runs": runs}
        if progress:
            maps = " ".join(f"{r['mAP']:.4f}" for r in runs)
            print(f"[{i + 1}/{len(variants)}] {key}: mAP {maps}", file=sys.stderr, flush=True)
    untrained = {pooling: {m: {k: round(v, 6) for k, v in vals.items()}
                           for m, vals in baseline_metrics(profile, pooling).items()}
                 for pooling in ("imac", "l3irmac")}
    return {"profile": profile, "seeds": list(seeds), "steps": config_for(profile).steps, "task": "DSVR",
            "configs": configs, "untrained": untrained,
            "tables": {name: {row: variant_key(v) for row, v in table.items()} for name, table in TABLES.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="quick", choices=("smoke", "quick", "full"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "book" / "data" / "tca_sweeps.json"))
    args = parser.parse_args(argv)
    def sweep() -> dict:
        return {**run_sweep(args.profile, tuple(args.seeds)), "claims": CLAIMS}

    out = write_sweep(args.profile, args.out, sweep, threads=None)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
