import pytest
from statskit import mean, median


def test_mean():
    assert mean([1, 2, 3, 4]) == 2.5


def test_mean_empty():
    with pytest.raises(ValueError, match="at least one data point"):
        mean([])


def test_mean_generator():
    assert mean(x for x in [1, 2, 3]) == 2


def test_median_even():
    assert median([4, 1, 3, 2]) == 2.5
