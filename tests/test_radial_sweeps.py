"""benchmarks/radial_sweeps.py: the stored layout, append-and-resume, and the training-free embeddings."""

from __future__ import annotations

import json

import torch
from conftest import load_benchmark


def _script():
    return load_benchmark("radial_sweeps")


def test_sweep_layout_and_resume(tmp_path, capsys):
    sweeps = _script()
    out = tmp_path / "s.json"
    args = ["--profile", "smoke", "--steps", "2", "--seeds", "0", "1", "--out", str(out),
            "--variants", "radial", "untrained_network", "radial_c2"]
    dtype, threads = torch.get_default_dtype(), torch.get_num_threads()
    assert sweeps.main(args) == 0
    assert (torch.get_default_dtype(), torch.get_num_threads()) == (dtype, threads)   # restored
    data = json.loads(out.read_text())
    assert set(data["runs"]) == {"radial", "untrained_network", "radial_c2"}
    for rows in data["runs"].values():
        assert [(r["seed"], r["data_seed"]) for r in rows] == [(0, 0), (1, 0)]
        assert all(set(sweeps.METRICS) <= set(r) and 0 <= r["fine_MAP"] <= 1 for r in rows)
    assert set(data["untrained"]["0"]) == set(sweeps.TRAINING_FREE) >= {"mean_pool", "halves", "mean+trend"}
    assert data["claims"] == sweeps.CLAIMS and data["dtype"] == "float64" and data["threads"] == 1
    assert data["runs"]["radial"] != data["runs"]["untrained_network"]
    wall = data["wall_seconds"]
    assert sweeps.main(args) == 0                                   # everything stored: nothing re-run
    assert json.loads(out.read_text())["wall_seconds"] == wall
    assert sweeps.main([*args[:-3], "radial", "--data-seed", "1"]) == 0
    data = json.loads(out.read_text())
    assert [(r["seed"], r["data_seed"]) for r in data["runs"]["radial"]] == [(0, 0), (1, 0), (0, 1), (1, 1)]
    assert set(data["untrained"]) == {"0", "1"}


def test_halves_is_order_aware_and_mean_pool_is_not():
    from hapref.features.frames import FeatureSplit

    sweeps = _script()
    feats = torch.randn(1, 6, 5, dtype=torch.float64)
    split = FeatureSplit(torch.cat([feats, feats.flip(1)]), torch.tensor([6, 6]), torch.tensor([0, 0]),
                         torch.tensor([0, 1]))
    pooled, halves = sweeps.mean_pool(split), sweeps.halves(split)
    assert torch.allclose(pooled[0], pooled[1]) and not torch.allclose(halves[0], halves[1])


def test_descriptors_were_tuned_on_the_validation_instance_only():
    import json as json_
    from pathlib import Path

    sweeps = _script()
    stored = json_.loads((Path(__file__).resolve().parents[1] / "book" / "data" / "radial_sweeps.json").read_text())
    rows = stored["validation"]["grid"]
    assert stored["validation"]["data_seed"] == sweeps.VALIDATION_DATA_SEED
    used = {r["data_seed"] for runs in stored["runs"].values() for r in runs} | set(map(int, stored["untrained"]))
    assert sweeps.VALIDATION_DATA_SEED not in used                     # used for nothing else
    assert len(rows) == sum(map(len, sweeps.DESCRIPTOR_GRID.values())) * len(sweeps.WEIGHTS)
    assert sweeps.chosen(rows) == sweeps.TUNED                          # the stored grid picks the constants
    assert sweeps.chosen(rows, class_safe=True)["differences"] == sweeps.TUNED_SAFE
    best = max(r["fine_MAP"] for r in rows if r["descriptor"] == "trend")
    assert [r for r in rows if r["descriptor"] == "trend" and r["fine_MAP"] == best][0]["weight"] == 1.0


def test_tune_and_chosen_on_the_smoke_profile():
    sweeps = _script()
    with sweeps.sweep_arithmetic(threads=1):
        rows = sweeps.tune("smoke", data_seed=3)
    assert len(rows) == sum(map(len, sweeps.DESCRIPTOR_GRID.values())) * len(sweeps.WEIGHTS)
    picks = sweeps.chosen(rows)
    for name, (options, weight) in picks.items():
        mine = [r for r in rows if r["descriptor"] == name]
        top = max(r["fine_MAP"] for r in mine)
        first = next(r for r in mine if r["fine_MAP"] == top)               # ties: first in grid order
        assert (first["options"], first["weight"]) == (options, weight)
    for name, (options, weight) in sweeps.chosen(rows, class_safe=True).items():
        assert next(r for r in rows if r["descriptor"] == name and r["options"] == options
                    and r["weight"] == weight)["MAP"] == 1.0


def test_curves_are_stored_and_added_to_old_rows(tmp_path):
    sweeps = _script()
    out = tmp_path / "c.json"
    base = ["--profile", "smoke", "--steps", "4", "--seeds", "0", "--out", str(out)]
    assert sweeps.main([*base, "--variants", "radial", "untrained_network"]) == 0
    data = json.loads(out.read_text())
    row = data["runs"]["radial"][0]
    assert "curve" not in data["runs"]["untrained_network"][0]
    assert row["curve"][-1] == [4, row["fine_MAP"]]                      # the last point is the stored run
    del row["curve"]                                                      # a row stored before curves existed
    out.write_text(json.dumps(data))
    assert sweeps.main([*base, "--variants", "radial", "--curves"]) == 0
    assert json.loads(out.read_text())["runs"]["radial"][0] == {**row, "curve": [[4, row["fine_MAP"]]]}
    row["fine_MAP"] += 0.1                                                # a re-run that differs is refused
    out.write_text(json.dumps(data))
    try:
        sweeps.main([*base, "--variants", "radial", "--curves"])
        raise AssertionError("a differing re-run must stop the sweep")
    except SystemExit as stop:
        assert "differs" in str(stop)


def test_head_variants_store_train_curves_and_probes_and_old_rows_rerun(tmp_path):
    sweeps = _script()
    out, keep = tmp_path / "h.json", tmp_path / "old.json"
    base = ["--profile", "smoke", "--steps", "4", "--seeds", "0", "--out", str(out)]
    assert sweeps.main([*base, "--variants", "linear_radial", "meandiff_triplet", "weighting_radial", "radial"]) == 0
    data = json.loads(out.read_text())
    for variant in ("linear_radial", "meandiff_triplet", "weighting_radial", "radial"):
        row = data["runs"][variant][0]
        assert row["curve"][-1] == [4, row["fine_MAP"]] and len(row["train_curve"]) == 1
        assert -1 <= row["reversal_cos"] <= 1 and -1 <= row["last_cos"] <= 1
    assert data["runs"]["linear_radial"][0] != data["runs"]["radial"][0]   # another head, another run
    old = dict(data["runs"]["radial"][0])
    for key in ("train_curve", "reversal_cos", "last_cos"):               # a row stored before train curves
        del data["runs"]["radial"][0][key]
    data["runs"]["radial"][0]["fine_MAP"] += 0.1
    out.write_text(json.dumps(data))
    assert sweeps.main([*base, "--variants", "radial", "--rerun-old", str(keep)]) == 0
    assert json.loads(out.read_text())["runs"]["radial"] == [old]             # trained again, same digits
    assert json.loads(keep.read_text())["radial"][0]["fine_MAP"] == old["fine_MAP"] + 0.1
