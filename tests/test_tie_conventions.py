"""The book's three tie conventions (chapter 1, "Ties: three conventions"), each checked by brute force.

* group end (``ties="grouped"``, scikit-learn's): every relevant item of a tie group gets the precision at the
  group's last rank (not always between the tie orders' APs: with several relevant items in a group it can
  exceed them all);
* stable order (``map_at_n``): tied items keep their database order;
* expected value over tie orders (``ties="expected"``): the mean AP over every order of the tied items;

and the strict step of the AP losses (``relaxed_rank_ap`` with ``heaviside``, H(0) = 0), which reads the
precision at the group's *start*. The worked example is chapter 1's tied list; the others are random lists
with many ties, scored against a brute-force enumeration of tie orders (``conftest.tie_orders``).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.metrics import average_precision_score

from conftest import tie_orders
from hapref.losses import heaviside, relaxed_rank_ap
from hapref.metrics import average_precision, map_at_n

SCORES = torch.tensor([0.9, 0.7, 0.7, 0.7, 0.4, 0.2], dtype=torch.float64)
RELEVANT = torch.tensor([1, 0, 1, 0, 1, 0], dtype=torch.bool)


def literal_ap(relevant_in_rank_order) -> float:
    """AP of a list in rank order, no ties: mean precision at the ranks of the relevant items."""
    rel = np.asarray(relevant_in_rank_order, dtype=bool)
    hits = np.cumsum(rel)
    return float(np.mean(hits[rel] / (np.flatnonzero(rel) + 1)))


def test_worked_example_of_chapter_1():
    group_end = average_precision(SCORES, RELEVANT).item()
    assert group_end == pytest.approx((1 + 2 / 4 + 3 / 5) / 3, abs=1e-12)
    assert group_end == pytest.approx(average_precision_score(RELEVANT.numpy(), SCORES.numpy()), abs=1e-12)
    # stable order: the relevant tied item 1st, 2nd or 3rd of its group as stored
    stable = []
    for order in ([0, 2, 1, 3, 4, 5], [0, 1, 2, 3, 4, 5], [0, 1, 3, 2, 4, 5]):
        stable.append(map_at_n(SCORES[order][None], RELEVANT[order][None], n=6).item())
    assert stable == pytest.approx([(1 + 1 + 3 / 5) / 3, (1 + 2 / 3 + 3 / 5) / 3, (1 + 2 / 4 + 3 / 5) / 3],
                                   abs=1e-12)
    expected = average_precision(SCORES, RELEVANT, ties="expected").item()
    assert expected == pytest.approx(np.mean(stable), abs=1e-12)
    # the losses' strict step: the group start, 0.8667
    start = relaxed_rank_ap(SCORES[None], RELEVANT[None], ~RELEVANT[None], heaviside, heaviside).item()
    assert start == pytest.approx((1 + 1 + 3 / 5) / 3, abs=1e-12)


@pytest.mark.parametrize("seed", range(20))
def test_conventions_against_every_tie_order(seed):
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, 4, size=7).astype(np.float64)      # 7 items, 4 score levels: many ties
    relevant = rng.random(7) < 0.5
    relevant[rng.integers(7)] = True
    orders = [literal_ap(r) for _, r in tie_orders(scores, relevant)]
    s, r = torch.from_numpy(scores), torch.from_numpy(relevant)
    expected = average_precision(s, r, ties="expected").item()
    assert expected == pytest.approx(np.mean(orders), abs=1e-12)
    # group end: every relevant item reads the precision at its group's last rank (which can lie above
    # every order's AP when a group holds several relevant items)
    at_or_above = scores[None, :] >= scores[:, None]
    end_precision = (at_or_above & relevant[None, :]).sum(1) / at_or_above.sum(1)
    assert average_precision(s, r).item() == pytest.approx(float(np.mean(end_precision[relevant])), abs=1e-12)
    assert average_precision(s, r).item() == pytest.approx(average_precision_score(relevant, scores), abs=1e-12)
    # stable order = the AP of the one order a stable sort gives
    stable_order = np.argsort(-scores, kind="stable")
    assert map_at_n(s[None], r[None], n=7).item() == pytest.approx(literal_ap(relevant[stable_order]), abs=1e-12)
    # the strict step reads each relevant item's precision at its group's start
    start = relaxed_rank_ap(s[None], r[None], ~r[None], heaviside, heaviside).item()
    above = (scores[None, :] > scores[:, None])
    rank = 1 + above.sum(1)
    rank_pos = 1 + (above & relevant[None, :]).sum(1)
    assert start == pytest.approx(float(np.mean((rank_pos / rank)[relevant])), abs=1e-12)


def test_all_agree_without_ties():
    rng = np.random.default_rng(0)
    scores, relevant = rng.random(9), rng.random(9) < 0.4
    relevant[0] = True
    s, r = torch.from_numpy(scores), torch.from_numpy(relevant)
    values = [average_precision(s, r).item(), average_precision(s, r, ties="expected").item(),
              map_at_n(s[None], r[None], n=9).item(),
              relaxed_rank_ap(s[None], r[None], ~r[None], heaviside, heaviside).item()]
    assert values == pytest.approx([values[0]] * 4, abs=1e-12)
