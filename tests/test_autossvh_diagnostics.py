"""The book's diagnostics of AutoSSVH's sampler (chapter 7): the oracle samplers, the score-function (REINFORCE)
estimator of the Grade-Net, the swap test, and the training-free samplers' tie rule."""

from __future__ import annotations

import itertools

import pytest
import torch

from hapref.models import highest_variance_drop
from hapref.models.autossvh import (gumbel_topk_order, hiding_oracle_drop, plackett_luce_log_prob,
                                    soft_oracle_drop, swap_pairs)
from hapref.train.autossvh import DIAGNOSTIC_LOSSES, PROFILES, AutoSSVHTask, informative_kept, swap_test


def test_highest_variance_ties_go_to_the_earlier_frame_when_a_permuted_copy_rounds_differently() -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(200, 6, 37, generator=g, dtype=torch.float64)
    x[:, 3] = x[:, 1][:, torch.randperm(37, generator=g)]           # frame 3: frame 1's entries, permuted
    variance = x.var(-1, unbiased=False)
    assert (variance[:, 3] != variance[:, 1]).any()                 # the summation order shows in the last bits
    drop = highest_variance_drop(x, 3)
    dropped = [(drop == t).any(1) for t in range(6)]
    assert not (dropped[1] & ~dropped[3]).any()                     # never the earlier copy dropped alone


def _ordered_subsets(frames: int, k: int) -> torch.Tensor:
    return torch.tensor(list(itertools.permutations(range(frames), k)))


def test_plackett_luce_probabilities_sum_to_one_and_match_gumbel_top_k() -> None:
    theta = torch.tensor([[0.3, -0.2, 1.0, 0.5, 0.0]], dtype=torch.float64)
    orders = _ordered_subsets(5, 3)
    p = plackett_luce_log_prob(theta.expand(len(orders), -1), orders).exp()
    assert abs(float(p.sum()) - 1) < 1e-12
    draws = 100_000
    sample = gumbel_topk_order(theta.expand(draws, -1), 3, delta=1.0, generator=torch.Generator().manual_seed(0))
    index = {tuple(o): i for i, o in enumerate(orders.tolist())}
    freq = torch.bincount(torch.tensor([index[tuple(o)] for o in sample.tolist()]), minlength=len(orders))
    assert float((freq / draws - p).abs().max()) < 4 * float((p * (1 - p) / draws).sqrt().max())
    # at Gumbel scale δ the sample is Plackett-Luce of S / δ
    half = gumbel_topk_order((2 * theta).expand(draws, -1), 3, delta=2.0, generator=torch.Generator().manual_seed(0))
    assert torch.equal(half, sample)


def test_score_function_gradient_is_unbiased() -> None:
    """E[r(set) ∇ log P(order)] over every ordered sample equals ∇ E[r(set)] (exact), and its Monte-Carlo mean
    converges to it; r depends only on the set of picked frames."""
    theta = torch.tensor([0.2, -0.4, 0.9, 0.1], dtype=torch.float64, requires_grad=True)
    reward = torch.tensor([1.0, -2.0, 0.5, 3.0], dtype=torch.float64)    # r(set) = sum of its frames' values
    orders = _ordered_subsets(4, 2)
    log_p = plackett_luce_log_prob(theta.expand(len(orders), -1), orders)
    r = reward[orders].sum(1)
    exact = torch.autograd.grad((log_p.exp() * r).sum(), theta, retain_graph=True)[0]
    score = torch.autograd.grad((log_p.exp().detach() * r * log_p).sum(), theta)[0]
    torch.testing.assert_close(score, exact, rtol=1e-12, atol=1e-12)
    draws = 200_000
    sample = gumbel_topk_order(theta.detach().expand(draws, -1), 2, generator=torch.Generator().manual_seed(1))
    log_q = plackett_luce_log_prob(theta.expand(draws, -1), sample)
    estimate = torch.autograd.grad((reward[sample].sum(1) * log_q).mean(), theta)[0]
    assert float((estimate - exact).abs().max()) < 0.03, (estimate, exact)


def test_plackett_luce_names_bad_arguments() -> None:
    with pytest.raises(ValueError, match="order"):
        plackett_luce_log_prob(torch.zeros(2, 4), torch.zeros(3, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="logits"):
        plackett_luce_log_prob(torch.zeros(4), torch.zeros(1, 2, dtype=torch.long))


def _informative(n: int = 4000) -> torch.Tensor:
    g = torch.Generator().manual_seed(3)
    positions = torch.rand(n, 12, generator=g).argsort(1)[:, :3]
    return torch.zeros(n, 12, dtype=torch.bool).scatter(1, positions, True)


def test_hiding_oracle_keeps_only_blanks() -> None:
    informative = _informative()
    drop = hiding_oracle_drop(informative, 9, torch.Generator().manual_seed(0))
    assert informative.gather(1, drop).sum(1).eq(3).all()               # every content frame dropped
    assert drop.shape == (4000, 9) and (drop.diff(1) > 0).all()
    fewer = hiding_oracle_drop(informative, 2, torch.Generator().manual_seed(0))
    assert informative.gather(1, fewer).all()                            # M < K: only content dropped


def test_soft_oracle_interpolates_between_random_and_keeping_the_content() -> None:
    informative = _informative()
    kept = {}
    for gap in (0.0, 2.0, 50.0):
        drop = soft_oracle_drop(informative, 9, gap, generator=torch.Generator().manual_seed(0))
        kept[gap] = float(3 - informative.gather(1, drop).sum(1).double().mean())
    assert abs(kept[0.0] - 0.75) < 0.05                                   # uniform: K (T - M) / T
    assert kept[0.0] < kept[2.0] < kept[50.0] == 3.0
    one = soft_oracle_drop(informative, 9, 2.0, generator=torch.Generator().manual_seed(1))
    two = soft_oracle_drop(informative, 9, 2.0, generator=torch.Generator().manual_seed(2))
    assert not torch.equal(one, two)                                      # the two views differ
    with pytest.raises(ValueError, match="gap"):
        soft_oracle_drop(informative, 9, -1.0)
    with pytest.raises(ValueError, match="informative"):
        hiding_oracle_drop(informative.long(), 9)
    with pytest.raises(ValueError, match="num_drop"):
        hiding_oracle_drop(informative, 12)


def test_swap_pairs_drop_the_blank_instead_of_the_content() -> None:
    informative = _informative(500)
    drop = torch.rand(500, 12, generator=torch.Generator().manual_seed(4)).argsort(1)[:, :9].sort(1).values
    swapped, blank, content, valid = swap_pairs(drop, informative, torch.Generator().manual_seed(5))
    before = 3 - informative.gather(1, drop).sum(1)
    after = 3 - informative.gather(1, swapped).sum(1)
    assert torch.equal(after, before + valid.long())                      # one more content frame kept
    assert torch.equal(swapped[~valid], drop[~valid])
    assert (swapped == blank[:, None])[valid].any(1).all() and not (swapped == content[:, None])[valid].any()
    assert valid.any() and not valid.all()


def _settings(jitter: float = 0.05) -> dict:
    return {**PROFILES["smoke"], "frames": 8, "drop_ratio": 0.75, "oracle_gap": 2.0,
            "redundant": dict(informative=2, jitter=jitter, card_scale=0.0)}


@pytest.mark.parametrize("loss", DIAGNOSTIC_LOSSES)
def test_every_diagnostic_variant_takes_a_finite_step(loss: str) -> None:
    task = AutoSSVHTask(_settings(), loss)
    torch.manual_seed(0)
    model = task.build_model()
    out = task.loss(model, task.batch(0, torch.device("cpu")))
    out["loss"].backward()
    assert torch.isfinite(out["loss"]) and set(out) == {"loss", "fr", "vc", "p2set"}
    grade = model.grade.w4.weight.grad
    assert (grade is not None and grade.abs().sum() > 0) == loss.startswith("reinforce")


def test_oracles_keep_what_they_promise_and_need_informative_frames() -> None:
    task = AutoSSVHTask(_settings(), "hiding_oracle")
    model = task.build_model()
    assert informative_kept(task, model) == 0.0
    soft = AutoSSVHTask(_settings(), "soft_oracle")
    assert informative_kept(soft, model) > 2 * 2 / 8                      # above the uniform rate
    with pytest.raises(ValueError, match="redundant"):
        AutoSSVHTask("smoke", "hiding_oracle")


def test_reinforce_signs_give_opposite_sampler_gradients() -> None:
    grads = []
    for loss in ("reinforce", "reinforce_coop"):
        task = AutoSSVHTask(_settings(), loss)
        torch.manual_seed(0)
        model = task.build_model()
        task.loss(model, task.batch(3, torch.device("cpu")))["loss"].backward()
        grads.append(model.grade.w1.weight.grad)
    torch.testing.assert_close(grads[0], -grads[1])


def test_swap_test_sees_a_known_sign() -> None:
    """A hasher whose decoder always outputs the blank frame (the split's mean frame): reconstructing a dropped
    blank costs only its jitter, a dropped content frame its whole distance from the mean, so keeping the content
    (dropping the blank instead) lowers FR on every batch."""
    task = AutoSSVHTask(_settings(jitter=0.05), "autossvh")
    torch.manual_seed(0)
    model = task.build_model()
    informative = task.informative[0]
    centre = task.train_x[informative].mean(0)
    with torch.no_grad():
        model.dec_out.weight.zero_()
        model.dec_out.bias.copy_(centre)
    out = swap_test(task, model, steps=6)
    assert out["fr_lower"] == 1.0 and out["fr_change"] < 0
    assert 0 <= out["gradient_favours_content"] <= 1
    with pytest.raises(ValueError, match="redundant"):
        swap_test(AutoSSVHTask("smoke", "autossvh"), model)


def test_stored_iid_sweep_matches_the_script_and_its_claims_hold_and_recheck() -> None:
    import json
    from pathlib import Path

    from conftest import load_benchmark

    from hapref.stats import claim_gaps, claim_holds

    sweeps = load_benchmark("autossvh_sweeps")
    stored = json.loads((Path(__file__).resolve().parents[1] / "book" / "data"
                         / "autossvh_redundant_iid_sweeps.json").read_text())
    assert stored["profile"] == "redundant_iid" and stored["claims"] == sweeps.REDUNDANT_IID_CLAIMS
    settings = {k: v for k, v in PROFILES["redundant_iid"].items() if k != "data_seed"}
    assert json.loads(json.dumps(settings)) == stored["settings"]
    runs = {v: sorted((r["seed"], r["data_seed"]) for r in rows) for v, rows in stored["runs"].items()}
    assert len({tuple(r) for r in runs.values()}) == 1, runs              # every variant on the same runs
    validation = stored["oracle_validation"]
    assert validation["chosen"] == max(sweeps.ORACLE_GAPS, key=lambda g: validation["gaps"][str(g)]["GMAP"])
    assert all(r["informative_kept"] == 0.0 for r in stored["runs"]["hiding_oracle"])
    for claim in stored["claims"]:
        assert claim_holds(stored, claim), (claim, claim_gaps(stored, claim))
        recheck = claim_gaps(stored["recheck"], claim)
        assert recheck and min(recheck) > 0, (claim, recheck)             # seeds / instance used for nothing else


def test_paper_regime_profile_keeps_content_in_every_view_and_its_informative_frames_are_distinct() -> None:
    from hapref.features.frames import FeatureSplit
    from hapref.models.autossvh import num_dropped
    from hapref.train.autossvh import fixed_length

    p = PROFILES["paper_regime"]
    k, m = p["redundant"]["informative"], num_dropped(p["frames"], p["drop_ratio"])
    assert p["frames"] == 25 and 0.5 <= p["drop_ratio"] <= 0.75 and k > m       # the adversary cannot hide it all
    assert p["redundant"] == {**p["redundant"], "jitter": 1.0, "card_scale": 0.0}     # i.i.d. fillers
    low, high = p["data"]["frames"]
    lengths = torch.arange(low, high + 1)
    frames = torch.arange(float(high)).expand(len(lengths), -1)[..., None]      # frame t has feature t
    split = FeatureSplit(frames, lengths, torch.zeros(len(lengths)), torch.zeros(len(lengths)))
    picked = fixed_length(split, k)[..., 0]
    assert all(len(set(row.tolist())) == k for row in picked)                    # no frame used twice


def test_hiding_oracle_keeps_exactly_the_surplus_content_when_content_outnumbers_the_drops() -> None:
    settings = {**PROFILES["smoke"], "frames": 8, "drop_ratio": 0.5,              # 4 of 8 dropped
                "redundant": dict(informative=6, jitter=1.0, card_scale=0.0)}
    task = AutoSSVHTask(settings, "hiding_oracle")
    assert task.num_drop == 4
    assert informative_kept(task, task.build_model()) == 2.0                     # 6 - 4 in every view


def test_stored_paper_regime_sweep_matches_the_script_and_its_claims_hold_and_recheck() -> None:
    import json
    from pathlib import Path

    from conftest import load_benchmark

    from hapref.models.autossvh import num_dropped
    from hapref.stats import claim_gaps, claim_holds

    sweeps = load_benchmark("autossvh_sweeps")
    stored = json.loads((Path(__file__).resolve().parents[1] / "book" / "data"
                         / "autossvh_paper_regime_sweeps.json").read_text())
    assert stored["profile"] == "paper_regime" and stored["claims"] == sweeps.PAPER_REGIME_CLAIMS
    p = PROFILES["paper_regime"]
    assert json.loads(json.dumps({k: v for k, v in p.items() if k != "data_seed"})) == stored["settings"]
    designs = stored["design_validation"]                     # the design chosen on the validation instance
    best = max(sweeps.PAPER_REGIME_DESIGNS, key=lambda d: designs["designs"][f"{d[0]}/{d[1]}"]["gap"])
    assert designs["data_seed"] == sweeps.VALIDATION_DATA_SEED and designs["chosen"] == list(best)
    assert list(best) == [p["drop_ratio"], p["redundant"]["informative"]]
    assert set(stored["runs"]) == set(sweeps.PAPER_REGIME_VARIANTS)
    runs = {v: sorted((r["seed"], r["data_seed"]) for r in rows) for v, rows in stored["runs"].items()}
    assert set(runs["autossvh"]) == set(itertools.product(range(5), (0, 1)))
    assert len({tuple(r) for r in runs.values()}) == 1, runs              # every variant on the same runs
    validation = stored["oracle_validation"]
    assert validation["chosen"] == max(sweeps.ORACLE_GAPS, key=lambda g: validation["gaps"][str(g)]["GMAP"])
    surplus = p["redundant"]["informative"] - num_dropped(p["frames"], p["drop_ratio"])
    assert all(r["informative_kept"] == surplus for r in stored["runs"]["hiding_oracle"])
    assert all(r["data_seed"] not in (0, 1, sweeps.VALIDATION_DATA_SEED)
               for rows in stored["recheck"]["runs"].values() for r in rows)
    for claim in stored["claims"]:
        assert claim_holds(stored, claim), (claim, claim_gaps(stored, claim))
        recheck = claim_gaps(stored["recheck"], claim)
        assert recheck and min(recheck) > 0, (claim, recheck)             # seeds / instance used for nothing else
