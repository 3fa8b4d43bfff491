"""The compare page: its script (``compare.py``) and the parts only it uses."""
