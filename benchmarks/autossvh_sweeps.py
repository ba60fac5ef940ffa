"""AutoSSVH ablations and training-free codes on the book's fine-grained video set, seeds × data seeds (chapter 7).

    python benchmarks/autossvh_sweeps.py --seeds 0 1 2 3 4 --data-seed 0 --variants autossvh random_independent fresh
    python benchmarks/autossvh_sweeps.py --seeds 0 1 2 --data-seed 0 --variants autossvh_no_fr autossvh_no_vc ...
    python benchmarks/autossvh_sweeps.py --seeds 0 --data-seed 0 --variants --delta-curve
    python benchmarks/autossvh_sweeps.py --profile smoke --steps 2 --seeds 0 --variants autossvh --out /tmp/s.json

Each finished run is appended to ``--out`` (default ``book/data/autossvh_sweeps.json``) through
``benchmarks/measure.SweepFile``; re-running with the same profile resumes, skipping the (variant, seed, data
seed) runs already stored. ``--data-seed N`` builds another instance of the benchmark from the same design (the
fine-grained generator with seed N, the profile's ``data_seed``). Everything runs in float64
(``hapref.utils.portable_precision``) on one torch thread, so a run is reproducible bit for bit.

Stored (the book's sweep layout):

* ``runs[variant]``: one row per (seed, data seed): tie-aware mAP@N in both conventions, GMAP, the final loss
  terms and ``shared_frames`` (mean kept frames the two training views of a video share). Variants are the
  losses of :data:`hapref.train.autossvh.LOSSES` plus ``fresh``: the **untrained network** (the hashing network
  as initialised by the run's seed, evaluated without a training step). It depends on the seed, so it is stored
  as a variant with one row per (seed, data seed), paired with the trained runs, not averaged.
* ``untrained[data seed]``: the training-free codes of the mean frame feature of each video (the same
  resampled 8 frames the network sees, the same 16 bits, queries and database, evaluated by the pipeline's own
  :func:`hapref.train.autossvh.hashing_metrics`): ``"LSH"`` (:func:`hapref.search.lsh_codes`, centred on the
  training videos' mean; every metric the mean over the projection seeds 0-9) and ``"PCA sign"``
  (:func:`hapref.search.pca_sign_codes`, PCA fitted on the training videos).
* ``delta_curve``: the paper's variant trained with seed 0 at Gumbel scales δ ∈ {0, 0.1, 0.3, 1}: how far the
  trained sampler's kept frames are from uniform (``keep_deviation`` = mean over test videos and frames of
  |P(kept) − (T−M)/T|, 1 000 Gumbel draws per video at the run's δ; ``differs_from_topk`` = mean fraction of
  kept frames that are not among the T−M lowest-scored frames, i.e. what the noise changes against δ = 0)
  and the GMAP of the trained codes.
* ``claims``: :data:`CLAIMS`, each checked by ``hapref.stats.claim_holds`` (``tests/test_sweep_claims.py``).

Rows III-V of the paper's Table 3 (AttMask, AdaMAE and ADIOS samplers) are absent: each is a separate
published masking method (attention-guided masking of a ViT, an adaptive token sampler, an adversarial
occlusion network) that hapref does not implement; the random rows (II) stand for the non-learned samplers.

Designs tried (step 2 of issue 31; GMAP over N ≤ 80, seed 0 unless stated, quick profile, one thread):

==========================================================  =========  =========  ==============  ===========
design                                                       PCA sign   LSH (0-2)  autossvh        no_fr
==========================================================  =========  =========  ==============  ===========
quick, 150 steps, data seed 0 (the sweep before issue 31)     0.799      0.54-0.66  0.798           0.833
quick, 150 steps, data seed 1                                 0.541      0.48-0.52  0.650 / 0.760   0.795/0.674
padded: every shot among 8-24 static grey frames, 150 steps   0.538      0.53-0.60  0.550 / 0.568   0.532/0.532
quick, 400 steps, data seed 0 (chosen)                        0.799      0.54-0.66  0.873 / 0.960   0.808/0.850
quick, 400 steps, data seed 1                                 0.541      0.48-0.52  0.717 / 0.763   --
==========================================================  =========  =========  ==============  ===========

(x / y = seeds 0 / 1.) At 150 steps the training-free PCA sign ties the trained codes on data seed 0. Padding
the shots with static frames (so that which frames a view keeps matters, and the mean feature is diluted by a
varying share of blank frames) hurt the trained codes as much as the training-free ones; it was dropped (no
generator option kept). Training longer (400 steps, the quick profile now) lets the paper's variant clear the
best training-free codes on both data seeds.

Redundant-frame benchmark (``--profile redundant``, issue 31 item 1; ``book/data/autossvh_redundant_sweeps.json``,
same layout, ``claims`` = :data:`REDUNDANT_CLAIMS`). The quick profile's videos cut to 3 informative frames and
padded to 12 by :func:`hapref.data.redundant.pad_with_title_cards`; 9 of 12 frames dropped per view (the paper's
FCVID ratio 0.75), so a uniform sampler keeps 0.75 informative frames per view and none in 84 of 220 draws. Each
row also stores ``informative_kept`` (:func:`hapref.train.autossvh.informative_kept`). Designs tried (GMAP over
N <= 80, seed 0, data seed 0, 400 steps):

==============================================================  ========  =====  ========  ==========  =========
padding of the 9 non-informative frames                          PCA sign  LSH    autossvh  random ind  random_mask
==============================================================  ========  =====  ========  ==========  =========
per-video title card at the frames' scale (card_scale 1)         0.139     0.065  0.092     0.104       0.088
per-video title card at 0.3 of that scale                        0.458     0.238  0.083     0.073       --
blank: the split's mean frame + 5 % jitter (card_scale 0, kept)  0.672     0.541  0.367     0.384       --
==============================================================  ========  =====  ========  ==========  =========

The title card (a per-video random direction repeated on every padding frame) gives the view contrast a
shortcut: two views of a video share it, so the codes learn the card and not the content; every trained variant,
learned sampler included, fell to the level of the untrained network (0.058). It was dropped for the blank
padding, where training still learns the content. Budget: one redundant run took 20-24 s on one thread with the
machine lightly shared, 160 s under the load of five agents on 2 cores; the sweep (4 variants x 5 seeds x 2 data
seeds + the untrained network) ran as 4 processes (data seed x seeds 0-2 / 3-4), merged into one file: its
``wall_seconds`` (7 120 s) is the sum over the 4 processes, about 35 min elapsed; ``cpu_seconds`` 679 s.

Result (mean over 10 runs, GMAP): training-free PCA sign / LSH 0.672 / 0.541 (data seed 0) and 0.428 / 0.459
(data seed 1); autossvh 0.402 / 0.306, random_independent 0.404 / 0.387, random_mask 0.352 / 0.317, autossvh_no_grl
(row I) 0.526 / 0.431, untrained network 0.162 / 0.151. Informative frames kept per view (uniform 0.75):
autossvh 0.28-0.63, random 0.69-0.81, autossvh_no_grl 0.98-1.25 (the sigmoid bound at δ = 1 is 1.56). The
learned adversarial sampler ties both random samplers (GMAP gap to independent views -0.041 on average, positive
on 3 of 10; to complementary masks +0.020, positive on 7 of 10): no claim either way.

Budget (measured before sweeping: one quick run of 400 steps ≈ 9 s wall on one thread while another agent's
experiments share the 2 cores; feature extraction ≈ 8 s per data seed and process; the training-free codes and
an untrained network well under 1 s):

==============================================  =====  ===========
rows                                             runs   est. wall
==============================================  =====  ===========
autossvh, random_independent: 5 seeds × 2 data   20     180 s
fresh (untrained network): 5 seeds × 2 data      10     5 s
7 other variants: 3 seeds × data seed 0          21     190 s
delta curve: 4 trainings                         4      40 s
features + training-free codes, 2 data seeds     --     30 s
total                                            55     ≈ 450 s (limit 90 min)
==============================================  =====  ===========
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared benchmark helpers
from measure import SweepFile, sweep_arithmetic  # noqa: E402

from hapref.models.autossvh import gumbel_topk
from hapref.search import lsh_codes, pca_sign_codes
from hapref.train import fit
from hapref.train.autossvh import (LOSSES, PROFILES, AutoSSVHTask, hashing_metrics, informative_kept,
                                   view_overlap)
from hapref.train.loop import TrainConfig

#: Every variant the sweep knows: the losses and the untrained network.
VARIANTS = (*LOSSES, "fresh")
#: Training-free codes stored per data seed; ``LSH`` averages its metrics over these projection seeds.
UNTRAINED = ("LSH", "PCA sign")
LSH_SEEDS = tuple(range(10))
#: Gumbel scales of the δ curve (the paper's variant, seed 0).
DELTAS = (0.0, 0.1, 0.3, 1.0)
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "book" / "data" / "autossvh_sweeps.json"
#: ``--profile redundant`` (frame choice matters) writes its own file, in the same layout.
REDUNDANT_OUT = DEFAULT_OUT.with_name("autossvh_redundant_sweeps.json")

#: The orderings chapter 7 states; each holds on every stored (seed, data seed) run with mean gap >= margin.
CLAIMS = [
    *({"better": "autossvh", "worse": worse, "metric": "GMAP", "margin": 0.05}
      for worse in ("untrained:PCA sign", "untrained:LSH", "fresh")),
    # row VII collapses; paired over the 3 seeds of data seed 0 (claim_gaps pairs equal run sets, so the two
    # headline variants with 5 seeds x 2 data seeds are left out of these claims)
    *({"better": loss, "worse": "autossvh_no_vc", "metric": m, "margin": 0.1}
      for loss in LOSSES if loss not in ("autossvh_no_vc", "autossvh", "random_independent")
      for m in ("mAP@5", "mAP@20", "GMAP") if (loss, m) != ("random_mask", "mAP@5")),   # mean gap 0.097 < 0.1
]


#: The orderings chapter 7 states on the redundant-frame benchmark (``--profile redundant``), each on all 10 runs
#: (5 seeds x 2 data seeds): row I's cooperative sampler keeps more informative frames than random views, the
#: adversarial one fewer, and row I's codes beat the paper's variant; the training-free codes beat the paper's
#: variant and ConMH's masks; trained random views beat the untrained network.
REDUNDANT_CLAIMS: list[dict] = [
    {"better": "autossvh_no_grl", "worse": "autossvh", "metric": "GMAP", "margin": 0.1},
    {"better": "autossvh_no_grl", "worse": "autossvh", "metric": "mAP@5", "margin": 0.05},
    {"better": "autossvh_no_grl", "worse": "random_independent", "metric": "informative_kept", "margin": 0.1},
    {"better": "random_independent", "worse": "autossvh", "metric": "informative_kept", "margin": 0.1},
    {"better": "untrained:PCA sign", "worse": "autossvh", "metric": "GMAP", "margin": 0.05},
    {"better": "untrained:LSH", "worse": "autossvh", "metric": "GMAP", "margin": 0.05},
    {"better": "untrained:PCA sign", "worse": "random_mask", "metric": "GMAP", "margin": 0.05},
    {"better": "random_independent", "worse": "fresh", "metric": "GMAP", "margin": 0.05},
    {"better": "random_mask", "worse": "fresh", "metric": "GMAP", "margin": 0.05},
]


def settings(profile: str, data_seed: int, steps: int | None = None, delta: float | None = None) -> dict:
    """The profile's settings with ``data_seed`` (and optionally ``steps`` / Gumbel ``delta``) replaced."""
    s = {**PROFILES[profile], "data_seed": data_seed}
    if steps is not None:
        s["steps"] = steps
    if delta is not None:
        s["delta"] = delta
    return s


def train(s: dict, loss: str, seed: int):
    """One training run as :func:`hapref.train.autossvh.build` configures it: (task, fit result)."""
    task = AutoSSVHTask(s, loss, seed)
    config = TrainConfig(steps=s["steps"], lr=s["lr"], weight_decay=0.0, warmup_steps=s["steps"] // 10, seed=seed)
    return task, fit(task, config, progress=False)


def _rounded(metrics: dict) -> dict:
    return {k: round(float(v), 6) for k, v in metrics.items()}


def run_one(s: dict, variant: str, seed: int) -> dict:
    """One stored row: a trained variant, or ``fresh`` (the network as the seed initialises it)."""
    row = {"seed": seed, "data_seed": s["data_seed"]}
    if variant == "fresh":
        task = AutoSSVHTask(s, "autossvh", seed)
        torch.manual_seed(seed)
        return {**row, **_rounded(task.evaluate(task.build_model()))}
    task, result = train(s, variant, seed)
    last = result.history[-1]
    return {**row, **_rounded(result.metrics),
            **{f"final_{k}": round(float(last[k]), 4) for k in ("loss", "fr", "vc", "p2set") if k in last},
            "shared_frames": round(view_overlap(task, result.model), 4),
            **({"informative_kept": round(informative_kept(task, result.model), 4)} if task.informative is not None
               else {})}


def training_free(s: dict) -> dict:
    """The training-free codes' metrics on one instance of the benchmark: ``{name: {metric: value}}``."""
    task = AutoSSVHTask(s, "autossvh", 0)
    train_mean, test_mean = task.train_x.mean(1), task.test_x.mean(1)
    bits, labels = s["nbits"], (task.test_labels, task.train_labels)
    lsh = [hashing_metrics(lsh_codes(test_mean, bits, p, train_mean.mean(0)),
                           lsh_codes(train_mean, bits, p, train_mean.mean(0)), *labels) for p in LSH_SEEDS]
    pca = hashing_metrics(pca_sign_codes(train_mean, test_mean, bits), pca_sign_codes(train_mean, train_mean, bits),
                          *labels)
    return {"LSH": _rounded({k: sum(m[k] for m in lsh) / len(lsh) for k in lsh[0]}), "PCA sign": _rounded(pca)}


@torch.no_grad()
def sampler_departure(task: AutoSSVHTask, model, delta: float, draws: int = 1000) -> dict:
    """How far the trained sampler's kept frames are from uniform at Gumbel scale ``delta`` (test videos)."""
    model.eval()
    scores = model.scores(task.test_x)                                     # [V, T]
    frames, drop = scores.shape[1], task.num_drop
    generator = torch.Generator().manual_seed(0)
    hard, _ = gumbel_topk(scores.repeat(draws, 1), drop, delta=delta, generator=generator)
    kept = 1 - hard.view(draws, *scores.shape)                             # [draws, V, T], 1 = kept
    top, _ = gumbel_topk(scores, drop, delta=0.0)                          # δ = 0: the deterministic choice
    uniform = (frames - drop) / frames
    return {"keep_deviation": round(float((kept.mean(0) - uniform).abs().mean()), 4),
            "differs_from_topk": round(float((kept * top[None]).sum(-1).mean() / (frames - drop)), 4)}


def delta_curve(s: dict, seed: int = 0) -> dict:
    points = []
    for delta in DELTAS:
        task, result = train({**s, "delta": delta}, "autossvh", seed)
        points.append({"delta": delta, **sampler_departure(task, result.model, delta),
                       **{k: round(float(result.metrics[k]), 6) for k in ("GMAP", "mAP@5", "mAP@20") if k in result.metrics}})
    return {"variant": "autossvh", "seed": seed, "data_seed": s["data_seed"], "points": points}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="quick", choices=("smoke", "quick", "redundant", "full"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--data-seed", type=int, default=0)
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument("--steps", type=int, default=None, help="override the profile's training steps (tests)")
    parser.add_argument("--delta-curve", action="store_true", help="also measure the δ curve (seed = first seed)")
    parser.add_argument("--out", default=None, help="default: book/data/autossvh[_redundant]_sweeps.json")
    args = parser.parse_args(argv)
    redundant = args.profile == "redundant"
    args.out = args.out or str(REDUNDANT_OUT if redundant else DEFAULT_OUT)

    with sweep_arithmetic(threads=1) as dtype:
        s = settings(args.profile, args.data_seed, args.steps)
        fixed = {k: v for k, v in s.items() if k != "data_seed"}
        meta = json.loads(json.dumps({"profile": args.profile, "settings": fixed, "lsh_seeds": list(LSH_SEEDS),
                                      "dtype": str(dtype).removeprefix("torch.")}))
        sweep = SweepFile(args.out, meta, REDUNDANT_CLAIMS if redundant else CLAIMS)
        sweep.ensure_untrained(args.data_seed, lambda: training_free(s))
        sweep.run_missing(args.variants, args.seeds, args.data_seed, lambda variant, seed: run_one(s, variant, seed),
                          lambda row: f"GMAP={row['GMAP']:.4f}")
        if args.delta_curve and "delta_curve" not in sweep.data:
            value, wall, cpu = sweep.timed(lambda: delta_curve(s, args.seeds[0]))
            sweep.add("delta_curve", value, wall, cpu)
        sweep.write()
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
