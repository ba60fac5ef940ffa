"""The redundant-frame benchmark of chapter 7 (issue 31): the generator, the profile and its stored sweep."""

from __future__ import annotations

import itertools
import json
from math import comb
from pathlib import Path

import pytest
import torch
from conftest import load_benchmark

from hapref.data.redundant import pad_with_title_cards
from hapref.stats import claim_gaps, claim_holds
from hapref.train.autossvh import PROFILES, AutoSSVHTask, informative_kept

ROOT = Path(__file__).resolve().parents[1]
STORED = ROOT / "book" / "data" / "autossvh_redundant_sweeps.json"


def test_padding_keeps_the_frames_in_order_and_repeats_one_card() -> None:
    x = torch.randn(5, 3, 16, dtype=torch.float64)
    videos, informative = pad_with_title_cards(x, 12, data_seed=2, jitter=0.0)
    assert videos.shape == (5, 12, 16) and videos.dtype == x.dtype
    assert informative.sum(1).tolist() == [3] * 5
    for v in range(5):
        assert torch.equal(videos[v][informative[v]], x[v])             # own frames, temporal order kept
        pad = videos[v][~informative[v]]
        assert torch.equal(pad, pad[:1].expand_as(pad))                 # one title card per video
    cards = videos[~informative].view(5, 9, 16)[:, 0]
    assert torch.linalg.matrix_rank(cards) == 5                         # a different card per video


def test_blank_padding_has_no_per_video_card_and_seeds_differ() -> None:
    x = torch.randn(40, 3, 8, dtype=torch.float64)
    blank, info = pad_with_title_cards(x, 12, data_seed=0, jitter=0.0, card_scale=0.0)
    assert torch.allclose(blank[~info], x.mean((0, 1)).expand(40 * 9, -1))   # the frames' mean everywhere
    _, other = pad_with_title_cards(x, 12, data_seed=1, jitter=0.0, card_scale=0.0)
    _, test_split = pad_with_title_cards(x, 12, data_seed=0, jitter=0.0, card_scale=0.0, salt=1)
    assert not torch.equal(info, other) and not torch.equal(info, test_split)
    again, info_again = pad_with_title_cards(x, 12, data_seed=0, jitter=0.0, card_scale=0.0)
    assert torch.equal(again, blank) and torch.equal(info_again, info)       # deterministic from the seed
    jittered, _ = pad_with_title_cards(x, 12, data_seed=0, jitter=0.05, card_scale=0.0)
    assert not torch.equal(jittered[~info], blank[~info]) and torch.equal(jittered[info], blank[info])


def test_positions_are_uniform_over_the_subsets() -> None:
    """Every K-subset of T positions is equally likely (chi-square-free check: all C(5, 2) subsets occur)."""
    _, info = pad_with_title_cards(torch.zeros(4000, 2, 1), 5, data_seed=0)
    counts = {}
    for row in info.tolist():
        key = tuple(i for i, b in enumerate(row) if b)
        counts[key] = counts.get(key, 0) + 1
    assert set(counts) == set(itertools.combinations(range(5), 2))
    assert max(counts.values()) / min(counts.values()) < 1.3            # 400 expected each


@pytest.mark.parametrize("bad, match", [(dict(frames=torch.zeros(2, 3)), "frames must be"),
                                        (dict(total=3), "total must be"), (dict(jitter=-1.0), ">= 0"),
                                        (dict(card_scale=-0.5), ">= 0")])
def test_bad_arguments_name_themselves(bad, match) -> None:
    kwargs = dict(frames=torch.zeros(2, 3, 4), total=6) | bad
    with pytest.raises(ValueError, match=match):
        pad_with_title_cards(**kwargs)


def _smoke_redundant() -> dict:
    return {**PROFILES["smoke"], "frames": 12, "drop_ratio": 0.75,
            "redundant": dict(informative=3, jitter=0.05, card_scale=0.0)}


def test_random_views_keep_informative_frames_at_the_uniform_rate() -> None:
    """A uniform sampler keeps K (T - M) / T = 3 * 3 / 12 = 0.75 informative frames per view on average."""
    task = AutoSSVHTask(_smoke_redundant(), "random_independent")
    assert task.train_x.shape[1] == 12 and task.num_drop == 9
    assert task.informative[0].sum(1).eq(3).all() and task.informative[1].sum(1).eq(3).all()
    kept = informative_kept(task, task.build_model(), steps=40)
    assert abs(kept - 0.75) < 0.08
    # no informative frame at all in a view: C(9, 3) / C(12, 3) of the draws
    assert comb(9, 3) / comb(12, 3) == pytest.approx(84 / 220)
    with pytest.raises(ValueError, match="redundant"):
        informative_kept(AutoSSVHTask("smoke", "autossvh"), task.build_model())


def test_redundant_profile_settings() -> None:
    p = PROFILES["redundant"]
    assert p["data"] == PROFILES["quick"]["data"] and p["frames"] == 12 and p["drop_ratio"] == 0.75
    assert p["redundant"] == dict(informative=3, jitter=0.05, card_scale=0.0)


@pytest.mark.skipif(not STORED.exists(), reason="sweep not stored yet")
def test_stored_redundant_sweep_matches_the_script_and_its_claims_hold() -> None:
    sweeps = load_benchmark("autossvh_sweeps")
    stored = json.loads(STORED.read_text())
    assert stored["profile"] == "redundant" and stored["claims"] == sweeps.REDUNDANT_CLAIMS
    assert stored["settings"]["redundant"] == PROFILES["redundant"]["redundant"]
    assert set(stored["untrained"]) == {"0", "1"}
    for variant in ("autossvh", "random_independent", "random_mask", "fresh"):
        keys = {(r["seed"], r["data_seed"]) for r in stored["runs"][variant]}
        assert keys == set(itertools.product(range(5), (0, 1))), variant
    for variant, runs in stored["runs"].items():
        if variant != "fresh":
            assert all("informative_kept" in r for r in runs), variant
    for claim in stored["claims"]:
        assert claim_holds(stored, claim), (claim, claim_gaps(stored, claim))


@pytest.mark.skipif(not STORED.exists(), reason="sweep not stored yet")
def test_stored_delta_sweep_is_complete_and_its_delta_one_rows_are_the_stored_runs() -> None:
    sweeps = load_benchmark("autossvh_sweeps")
    stored = json.loads(STORED.read_text())
    rows = stored["delta_sweep"]
    assert {(r["delta"], r["seed"], r["data_seed"]) for r in rows} == set(
        itertools.product((0.0, 0.1, 0.3, 1.0), range(5), (0, 1)))
    steps = list(range(sweeps.CURVE_EVERY, stored["settings"]["steps"] + 1, sweeps.CURVE_EVERY))
    runs = {(r["seed"], r["data_seed"]): r for r in stored["runs"]["autossvh"]}
    for row in rows:
        assert [p["step"] for p in row["curve"]] == steps
        assert row["curve"][-1]["GMAP"] == row["GMAP"]
        if row["delta"] == 1.0:                       # the stored run, retrained with evaluations in between
            run = runs[row["seed"], row["data_seed"]]
            assert (row["GMAP"], row["informative_kept"]) == (run["GMAP"], run["informative_kept"])
