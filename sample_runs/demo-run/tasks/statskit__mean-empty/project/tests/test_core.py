import pytest
from statskit import mean, median


def test_mean():
    assert mean([1, 2, 3, 4]) == 2.5


def test_median():
    assert median([3, 1, 2]) == 2


def test_mean_empty():
    with pytest.raises(ValueError, match="at least one data point"):
        mean([])
