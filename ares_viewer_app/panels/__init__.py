"""Parts of pages that two or more pages use (``tests/test_architecture.py`` checks it from the imports); a part
only one page uses lives in that page's folder, ``views/<page>/``, and moves here when a second page needs it."""
