"""Split result lists into pages for the listing views."""


def page_count(n_items, per_page=10):
    """Number of pages needed to show ``n_items`` items."""
    return n_items // per_page


def paginate(items, page, per_page=10):
    """The items on page ``page`` (pages are numbered from 1)."""
    start = page * per_page
    return items[start : start + per_page]
