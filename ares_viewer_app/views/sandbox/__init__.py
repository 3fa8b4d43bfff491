"""The sandbox page: its script (``sandbox.py``) and the parts only it uses."""
