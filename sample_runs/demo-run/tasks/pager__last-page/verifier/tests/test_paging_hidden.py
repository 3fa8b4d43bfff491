from pager import page_count, paginate

ITEMS = list(range(1, 26))


def test_first_page():
    assert paginate(ITEMS, 1) == list(range(1, 11))


def test_last_partial_page():
    assert paginate(ITEMS, 3) == [21, 22, 23, 24, 25]


def test_past_the_end():
    assert paginate(ITEMS, 4) == []


def test_page_count():
    assert [page_count(n) for n in (0, 1, 10, 20, 25)] == [0, 1, 1, 2, 3]
