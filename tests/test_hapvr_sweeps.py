"""The HAP-VR sweep script runs every variant (smoke profile, 2 steps), resumes, and the stored file follows the
book's sweep layout (runs per variant over seeds × data seeds, every training-free similarity, claims)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import load_benchmark

from hapref.stats import claim_holds

ROOT = Path(__file__).resolve().parents[1]


def load_script():
    return load_benchmark("hapvr_sweeps")


def test_smoke_sweep_runs_every_variant_and_resumes(tmp_path) -> None:
    sweeps = load_script()
    out = tmp_path / "s.json"
    args = ["--profile", "smoke", "--seeds", "0", "--steps", "2", "--out", str(out), "--long-targets",
            "--variants", *sweeps.VARIANTS]
    assert sweeps.main(args) == 0
    results = json.loads(out.read_text())
    assert set(results["runs"]) == set(sweeps.VARIANTS)
    for variant, (run,) in results["runs"].items():
        assert (run["seed"], run["data_seed"]) == (0, 0)
        assert all(0.0 <= run[m] <= 1.0 for m in ("mAP", "uAP", "mAP_shuffled"))
        assert (run["curve"] == []) == (variant == "untrained_network")
    assert set(results["untrained"]["0"]) == set(sweeps.TRAINING_FREE)
    curve = results["clip_curve"]["0"]                       # one training-free point per clip count
    assert set(curve) == {str(n) for n in sweeps.CLIP_CURVE}
    assert all(set(point) == {"distinct_clips", *sweeps.TRAINING_FREE} for point in curve.values())
    long = results["long_targets"]["0"]
    assert set(long["rates"]) == {str(k) for k in sweeps.K_RATES}
    columns = [long["rates"][str(k)]["columns"] for k in sweeps.K_RATES]
    assert columns == sorted(columns) and columns[0] == 1        # rate 0 keeps one column: Chamfer
    assert long["rates"]["0.0"]["training_free"]["mAP"] > 0
    before = out.read_text()
    assert sweeps.main(args) == 0                          # everything stored: nothing retrained
    assert json.loads(out.read_text())["runs"] == json.loads(before)["runs"]


def test_stored_sweep_layout_and_claims() -> None:
    sweeps = load_script()
    stored = json.loads((ROOT / "book" / "data" / "hapvr_sweeps.json").read_text())
    assert stored["profile"] == sweeps.PROFILE and stored["claims"] == sweeps.CLAIMS
    assert stored["wall_seconds"] > 0 and stored["cpu_seconds"] > 0
    assert set(stored["runs"]) <= set(sweeps.VARIANTS)
    data_seeds = {r["data_seed"] for r in stored["runs"]["hapvr"]}
    assert len(data_seeds) >= 2 and len({r["seed"] for r in stored["runs"]["hapvr"]}) >= 5
    for seed in data_seeds:
        assert set(stored["untrained"][str(seed)]) == set(sweeps.TRAINING_FREE) | set(sweeps.ALIGNMENT)
    tuning = stored["alignment_tuning"]                       # chosen on an instance no run is scored on
    assert tuning["data_seed"] == sweeps.VALIDATION_SEED and str(sweeps.VALIDATION_SEED) not in stored["untrained"]
    assert sweeps.VALIDATION_SEED not in {r["data_seed"] for rows in stored["runs"].values() for r in rows}
    for name, (method, params) in sweeps.ALIGNMENT.items():
        entry = tuning["methods"][name]
        assert entry["method"] == method and entry["best"] == params
        assert [r["params"] for r in entry["settings"]] == sweeps.ALIGNMENT_GRID[name][1]
        assert max(r["mAP"] for r in entry["settings"]) == next(r["mAP"] for r in entry["settings"]
                                                                if r["params"] == params)
    points = sorted(int(n) for n in stored["clip_curve"]["0"])   # the clip curve, on instance 0
    own = stored["settings"]["train_clips"]                       # the profile's own: the headline rows
    assert own in points and len(points) >= 2 and set(points) - {own} <= set(sweeps.CLIP_CURVE)
    for n in points:                                              # 3 seeds, its own Chamfer line
        for v in ("hapvr", "L_base"):
            rows = stored["runs"][v if n == own else f"{v}_clips{n}"]
            assert len({r["seed"] for r in rows if r["data_seed"] == 0}) >= 3, (v, n)
        assert set(stored["clip_curve"]["0"][str(n)]) == {"distinct_clips", *sweeps.TRAINING_FREE}
    distinct = [stored["clip_curve"]["0"][str(n)]["distinct_clips"] for n in points]
    assert distinct == sorted(distinct) and all(d <= n for d, n in zip(distinct, points))
    rates = stored["long_targets"]["0"]["rates"]
    assert [rates[str(k)]["columns"] for k in sweeps.K_RATES][0] == 1 and rates["0.3"]["columns"] > 3
    for claim in stored["claims"]:
        assert claim_holds(stored, claim), claim
        if claim["worse"].startswith("untrained:") and claim["worse"] != "untrained:best":   # named: the best
            name, metric = claim["worse"].split(":", 1)[1], claim["metric"]
            for methods in stored["untrained"].values():
                assert methods[name][metric] == max(m[metric] for m in methods.values())


def test_smoke_alignment_is_tuned_on_the_validation_instance_and_appended(tmp_path) -> None:
    sweeps = load_script()
    out = tmp_path / "a.json"
    assert sweeps.main(["--profile", "smoke", "--tune-alignment", "--out", str(out)]) == 0
    tuning = json.loads(out.read_text())["alignment_tuning"]
    assert tuning["data_seed"] == sweeps.VALIDATION_SEED
    for name, (method, grid) in sweeps.ALIGNMENT_GRID.items():
        rows = tuning["methods"][name]["settings"]
        assert [r["params"] for r in rows] == grid and all(0.0 <= r["mAP"] <= 1.0 for r in rows)
    assert sweeps.main(["--profile", "smoke", "--alignment", "--variants", "--out", str(out)]) == 0
    stored = json.loads(out.read_text())
    assert set(stored["untrained"]["0"]) == set(sweeps.TRAINING_FREE) | set(sweeps.ALIGNMENT)
    assert "alignment_tuning" in stored                       # kept beside the appended entries
    with pytest.raises(ValueError, match="validation instance"):
        sweeps.training_free_alignment("smoke", sweeps.VALIDATION_SEED)


def test_smoke_calibration_block(tmp_path) -> None:
    sweeps = load_script()
    out = tmp_path / "c.json"
    assert sweeps.main(["--profile", "smoke", "--seeds", "0", "--steps", "2", "--out", str(out), "--calibration",
                        "--variants"]) == 0
    entry = json.loads(out.read_text())["calibration"]["0"]["0"]
    assert set(entry["methods"]) == set(sweeps.CALIBRATED)
    for name, m in entry["methods"].items():                    # per query: mAP unchanged by the z-score
        assert m["raw"]["mAP"] == pytest.approx(m["zscore"]["mAP"], abs=1e-6), name
    assert set(entry["edits"]) == {"none", "reversed", "2x", "0.5x", "pause", "local_shuffle"}
    for edit, scores in entry["edits"].items():
        assert set(scores) == set(sweeps.EDIT_SCORERS)
    for name in ("trained", "Chamfer", "temporal network"):    # the unedited split is the instance itself
        assert entry["edits"]["none"][name] == entry["methods"][name]["raw"]
    # reversing every copy leaves an order-blind similarity where it was
    assert entry["edits"]["reversed"]["Chamfer"] == entry["edits"]["none"]["Chamfer"]
    summary = entry["summary"]["trained"]
    assert set(summary) == {"copy", "reshoot", "other"}
    assert all(row is None or row[1] <= row[0] <= row[2] for rows in summary.values() for row in rows)


def test_stored_calibration_matches_the_stored_runs() -> None:
    sweeps = load_script()
    stored = json.loads((ROOT / "book" / "data" / "hapvr_sweeps.json").read_text())
    for ds, block in stored.get("calibration", {}).items():
        assert int(ds) != sweeps.VALIDATION_SEED
        for seed, entry in block.items():
            row = next(r for r in stored["runs"]["hapvr"] if r["seed"] == int(seed) and r["data_seed"] == int(ds))
            assert abs(entry["methods"]["trained"]["raw"]["mAP"] - row["mAP"]) < 0.02      # the same run
            for name in sweeps.ALIGNMENT:                                                 # the same scores
                assert entry["methods"][name]["raw"]["mAP"] == pytest.approx(stored["untrained"][ds][name]["mAP"],
                                                                             abs=1e-6)


def test_smoke_recheck_is_stored_under_its_key_and_refuses_used_instances_and_seeds(tmp_path) -> None:
    """``--recheck`` runs in its own file and stores the runs under ``recheck`` of the main file, leaving the
    main file's runs as they were; an instance or a seed the main file used is refused."""
    sweeps = load_script()
    out = tmp_path / "s.json"
    base = ["--profile", "smoke", "--steps", "2", "--out", str(out), "--variants", "hapvr"]
    assert sweeps.main([*base, "--seeds", "0"]) == 0
    runs = json.loads(out.read_text())["runs"]
    for used in (["--seeds", "5", "--data-seed", "0"], ["--seeds", "5", "--data-seed", str(sweeps.VALIDATION_SEED)],
                 ["--seeds", "0", "--data-seed", "2"]):
        with pytest.raises(SystemExit, match="already uses"):
            sweeps.main([*base, *used, "--recheck"])
    assert sweeps.main([*base, "--seeds", "5", "--data-seed", "2", "--recheck", "--calibration"]) == 0
    stored = json.loads(out.read_text())
    assert stored["runs"] == runs and "2" not in stored["untrained"]
    check = stored["recheck"]
    assert check["data_seeds"] == [2] and check["seeds"] == [5] and set(check["untrained"]) == {"2"}
    assert [(r["seed"], r["data_seed"]) for r in check["runs"]["hapvr"]] == [(5, 2)]
    assert set(check["calibration"]["2"]) == {"5"} and check["wall_seconds"] > 0
    assert (tmp_path / "s.recheck.json").exists()            # the re-check's own file: it resumes from there


def test_smoke_pool_curve_is_the_run_with_its_training_side(tmp_path) -> None:
    """``--pool-curve`` retrains the full method and records, at step 0 and at each curve step, the held-out
    mAP beside the objective and the in-batch mAP on the pool of training views: the same run as the stored
    row (its last held-out mAP is the row's mAP)."""
    sweeps = load_script()
    out = tmp_path / "p.json"
    assert sweeps.main(["--profile", "smoke", "--steps", "4", "--seeds", "0", "--pool-curve", "--variants", "hapvr",
                        "--out", str(out)]) == 0
    stored = json.loads(out.read_text())
    rows = stored["pool_curve"]["0"]["0"]
    (run,) = stored["runs"]["hapvr"]
    assert [r[0] for r in rows] == [0] + [step for step, _ in run["curve"]]
    assert rows[-1][1] == run["mAP"] and [r[1] for r in rows[1:]] == [m for _, m in run["curve"]]
    assert all(r[2] > 0 and 0.0 <= r[3] <= 1.0 for r in rows)


def test_stored_recheck_holds_every_claim_on_an_unused_instance() -> None:
    """The claims hold on seeds and an instance the chapter never used (nor the alignment settings' validation
    instance); each re-check run's calibration entry scores the run's own model."""
    from hapref.stats import claim_gaps

    sweeps = load_script()
    stored = json.loads((ROOT / "book" / "data" / "hapvr_sweeps.json").read_text())
    check = stored["recheck"]
    used = {r["seed"] for rows in stored["runs"].values() for r in rows}
    assert not set(check["seeds"]) & used and len(check["seeds"]) >= 2
    assert not {str(d) for d in check["data_seeds"]} & (set(stored["untrained"]) | {str(sweeps.VALIDATION_SEED)})
    for ds in check["data_seeds"]:
        assert set(check["untrained"][str(ds)]) == set(sweeps.TRAINING_FREE) | set(sweeps.ALIGNMENT)
    for claim in stored["claims"]:
        gaps = claim_gaps(check, claim)
        assert len(gaps) == len(check["seeds"]) * len(check["data_seeds"]) and min(gaps) > 0, (claim, gaps)
    entries = [e for block in check["calibration"].values() for e in block.values()]
    assert len(entries) == len(check["seeds"]) * len(check["data_seeds"])
    for e in entries:
        trained = e["methods"]["trained"]
        assert trained["zscore"]["mAP"] == pytest.approx(trained["raw"]["mAP"], abs=1e-6)    # a per-row map
        row = next(r for r in check["runs"]["hapvr"] if (r["seed"], r["data_seed"]) == (e["seed"], e["data_seed"]))
        assert trained["raw"]["mAP"] == pytest.approx(row["mAP"], abs=1e-9)          # trained once


def test_view_batches_override_is_stored_and_undone(tmp_path) -> None:
    """--view-batches (the scale curve's larger pool) trains on that pool, records it in the file's settings and
    leaves the profile table as it was; every run stores the per-query z-scored metrics too."""
    from hapref.train.hapvr import PROFILES

    sweeps = load_script()
    before = PROFILES["smoke"]
    out = tmp_path / "v.json"
    assert sweeps.main(["--profile", "smoke", "--steps", "2", "--seeds", "0", "--view-batches", "2",
                        "--variants", "hapvr_crossquery", "--out", str(out)]) == 0
    stored = json.loads(out.read_text())
    assert stored["settings"]["view_batches"] == 2 != before.view_batches
    assert PROFILES["smoke"] is before
    (row,) = stored["runs"]["hapvr_crossquery"]
    assert row["mAP_z"] == pytest.approx(row["mAP"], abs=1e-6)      # a per-query z-score keeps each ranking
    assert 0.0 <= row["uAP_z"] <= 1.0


SCALE = sorted((ROOT / "book" / "data").glob("hapvr_scale_vb*_sweeps.json"))


@pytest.mark.parametrize("path", SCALE, ids=[p.stem for p in SCALE])
def test_stored_scale_point(path: Path) -> None:
    """One point of the scale curve: a larger pool of views (its distinct clips stored), more steps, instance 0;
    every run row is the model of its seed's calibration entry (trained once), and the entry holds the alignment
    methods raw and z-scored and the temporal-edit splits."""
    sweeps = load_script()
    stored = json.loads(path.read_text())
    own = json.loads((ROOT / "book" / "data" / "hapvr_sweeps.json").read_text())
    assert stored["settings"]["view_batches"] > own["settings"]["view_batches"]
    assert stored["settings"]["steps"] > own["settings"]["steps"]
    pool = stored["pool"]["0"]
    assert pool["view_batches"] == stored["settings"]["view_batches"]
    assert pool["distinct_clips"] > own["clip_curve"]["0"][str(own["settings"]["train_clips"])]["distinct_clips"]
    assert stored["claims"] == sweeps.SCALE_CLAIMS and stored["wall_seconds"] > 0 and stored["cpu_seconds"] > 0
    assert set(stored["untrained"]["0"]) == set(sweeps.TRAINING_FREE) | set(sweeps.ALIGNMENT)
    cal = stored["calibration"]["0"]
    rows = stored["runs"]["hapvr"]
    assert {r["data_seed"] for r in rows} == {0} and {str(r["seed"]) for r in rows} <= set(cal)
    for r in rows:
        entry = cal[str(r["seed"])]
        assert entry["methods"]["trained"]["raw"]["mAP"] == pytest.approx(r["mAP"], abs=1e-9)
        assert entry["methods"]["trained"]["zscore"]["uAP"] == pytest.approx(r["uAP_z"], abs=1e-9)
        assert set(entry["methods"]) == set(sweeps.CALIBRATED)
        assert set(entry["edits"]) == {"none", "reversed", "2x", "0.5x", "pause", "local_shuffle"}
        for name in sweeps.ALIGNMENT:       # the calibration block scores the same alignment as untrained[0]
            assert entry["methods"][name]["raw"]["mAP"] == pytest.approx(stored["untrained"]["0"][name]["mAP"],
                                                                         abs=1e-6)


def test_stored_pool_curve_is_the_scale_runs_training_side() -> None:
    """Where a scale file stores ``pool_curve`` (train versus held-out), each seed's rows are its stored run:
    the held-out mAP at every curve step equals the run's curve, and step 0 is the network as initialised."""
    stored = [json.loads(p.read_text()) for p in SCALE]
    with_curve = [s for s in stored if "pool_curve" in s]
    assert with_curve, "no scale file stores the pool curve (benchmarks/hapvr_sweeps.py --pool-curve)"
    for s in with_curve:
        runs = {str(r["seed"]): r for r in s["runs"]["hapvr"]}
        for seed, rows in s["pool_curve"]["0"].items():
            assert rows[0][0] == 0 and [r[0] for r in rows[1:]] == [c[0] for c in runs[seed]["curve"]]
            assert [r[1] for r in rows[1:]] == pytest.approx([c[1] for c in runs[seed]["curve"]], abs=1e-9)


def test_smoke_scale_point_trains_each_seed_once(tmp_path) -> None:
    """``--view-batches N --calibration --variants hapvr`` (a point of the scale curve): the run row is the model
    the calibration entry scored (one training per seed), the file states SCALE_CLAIMS and the pool's clips."""
    sweeps = load_script()
    out = tmp_path / "scale.json"
    assert sweeps.main(["--profile", "smoke", "--steps", "2", "--seeds", "0", "--view-batches", "2",
                        "--calibration", "--variants", "hapvr", "--out", str(out)]) == 0
    stored = json.loads(out.read_text())
    assert stored["claims"] == sweeps.SCALE_CLAIMS and not sweeps._TRAINED     # the model was used and let go
    assert stored["pool"]["0"]["view_batches"] == 2 and stored["pool"]["0"]["distinct_clips"] >= 1
    (row,) = stored["runs"]["hapvr"]
    trained = stored["calibration"]["0"]["0"]["methods"]["trained"]
    assert row["mAP"] == trained["raw"]["mAP"] and row["uAP_z"] == trained["zscore"]["uAP"]
