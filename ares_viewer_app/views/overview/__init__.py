"""The overview page: its script (``overview.py``) and the parts only it uses."""
