"""Every variant named in a stored ``book/data/*_sweeps.json`` still builds and takes one training step with the
current code, so a stored result always names something the sweep script can still produce.

TCA (three files) is checked at the stored profile's own settings, read from the file (bank size, keys per step,
batch, schedule), because the checks that can refuse a variant (keys per step against the bank, the loss against
the aggregator) depend on them; the data are the smallest profile of the same kind (drawn descriptors or pixels).
The other pipelines' sweep scripts are driven through their own ``run_one`` on their smoke profile, one step.
"""

from __future__ import annotations

import json
from dataclasses import fields, replace
from pathlib import Path

import pytest
import torch
from conftest import load_benchmark

from hapref.train.tca import PROFILES, TCAProfile, TCATask

ROOT = Path(__file__).resolve().parents[1]
STORED = sorted((ROOT / "book" / "data").glob("*_sweeps.json"))
#: Stored file -> the sweep script that writes it.
SCRIPTS = {"tca_sweeps": "tca_sweeps", "tca_stock_sweeps": "tca_sweeps", "tca_context_sweeps": "tca_sweeps",
           "hapvr_sweeps": "hapvr_sweeps", "radial_sweeps": "radial_sweeps", "autossvh_sweeps": "autossvh_sweeps",
           "autossvh_redundant_sweeps": "autossvh_sweeps", "autossvh_redundant_iid_sweeps": "autossvh_sweeps",
           "autossvh_paper_regime_sweeps": "autossvh_sweeps",
           "hapvr_scale_vb32_sweeps": "hapvr_sweeps", "hapvr_scale_vb64_sweeps": "hapvr_sweeps",
           "hapvr_scale_vb64_s400_sweeps": "hapvr_sweeps"}
#: TCA: the smallest profile with the same kind of data as each stored profile.
TCA_SMALL = {"edits": "edits-smoke", "context": "context-smoke", "stock": "smoke"}
#: Sizes that make the data small; everything else (bank, keys per step, batch, model, schedule) is the stored one.
DATA_FIELDS = ("benchmark", "train_clips", "distractor_clips", "frames", "stride", "eval_stride", "strong_views",
               "whiten_dim", "nhead", "dim_feedforward", "descriptors", "backbone")


def _stored(path: Path) -> dict:
    return json.loads(path.read_text())


def _variants() -> list[tuple[str, str]]:
    return [(path.stem, variant) for path in STORED for variant in sorted(_stored(path).get("runs", {}))]


def test_every_stored_file_has_a_script() -> None:
    assert {path.stem for path in STORED} <= set(SCRIPTS), "a new sweep file: add its script to SCRIPTS"


def _tca_step(stem: str, variant: str) -> None:
    script = load_benchmark("tca_sweeps")
    stored = _stored(ROOT / "book" / "data" / f"{stem}.json")
    settings = {f.name: stored["settings"][f.name] for f in fields(TCAProfile) if f.name in stored["settings"]}
    small = PROFILES[TCA_SMALL[stored["profile"]]]
    profile = replace(TCAProfile(**settings), **{k: getattr(small, k) for k in DATA_FIELDS})
    profile = replace(profile, distractor_clips=max(small.distractor_clips, profile.distractors_per_step))
    v = script.VARIANTS[variant]
    if variant in script.TUNED:               # trained on the validation's schedule, stored in the file
        chosen = stored["validation"]["frame_schedule"]
        profile = replace(profile, **{k: chosen[k] for k in ("dropout", "lr")})
    task = TCATask(profile, v, seed=0)         # the checks against the stored settings run here
    torch.manual_seed(0)
    model = task.build_model()
    if variant == "untrained_network":
        return
    batch = task.batch(0, torch.device("cpu"))
    loss = task.loss(model, batch)["loss"]
    loss.backward()
    assert torch.isfinite(loss)


def _other_step(stem: str, variant: str) -> None:
    script = load_benchmark(SCRIPTS[stem])
    if SCRIPTS[stem] == "autossvh_sweeps":
        s = script.settings("smoke", 0, 1)
        if "redundant" in stem or "paper_regime" in stem:   # the oracles need informative frames: a small design
            s = {**s, "frames": 8, "drop_ratio": 0.75, "oracle_gap": 2.0,
                 "redundant": dict(informative=2, jitter=1.0, card_scale=0.0)}
        row = script.run_one(s, variant, 0)
    else:
        row = script.run_one("smoke", variant, 0, 0, 1)
    assert row["seed"] == 0


@pytest.mark.parametrize(("stem", "variant"), _variants())
def test_every_stored_variant_takes_one_step(stem: str, variant: str) -> None:
    with torch.random.fork_rng():
        if SCRIPTS[stem] == "tca_sweeps":
            _tca_step(stem, variant)
        else:
            _other_step(stem, variant)
