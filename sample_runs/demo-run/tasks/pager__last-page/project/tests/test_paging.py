from pager import page_count, paginate

ITEMS = list(range(1, 26))


def test_first_page():
    assert paginate(ITEMS, 1) == list(range(1, 11))


def test_page_count_exact():
    assert page_count(20) == 2
