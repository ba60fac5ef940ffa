import statistics

import pytest
import torch

from hapref.stats import format_mean_std, mean_std, separates


def test_mean_std_matches_statistics_module():
    g = torch.Generator().manual_seed(0)
    for n in (2, 3, 5, 9):
        v = torch.rand(n, generator=g, dtype=torch.float64).tolist()
        mean, std = mean_std(v)
        assert mean == pytest.approx(statistics.fmean(v)) and std == pytest.approx(statistics.stdev(v))
    assert mean_std(torch.tensor([2.0])) == (2.0, 0.0)


def test_separates_is_min_above_max():
    assert separates([3, 4], [1, 2.9]) and not separates([3, 4], [1, 3]) and not separates([1, 2], [3, 4])


def test_format_and_bad_input():
    assert format_mean_std([0.1, 0.3], digits=2) == "0.20 ± 0.14"
    with pytest.raises(ValueError, match="values"):
        mean_std([])
    with pytest.raises(ValueError, match="finite"):
        mean_std([1.0, float("nan")])
    with pytest.raises(TypeError, match="higher"):
        separates("abc", [1.0])
    with pytest.raises(ValueError, match="digits"):
        format_mean_std([1.0], digits=-1)
