"""Pagination helpers."""

from pager.paging import page_count, paginate

__all__ = ["page_count", "paginate"]
