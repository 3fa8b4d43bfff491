"""The search page: its script (``search.py``) and the parts only it uses."""
