"""The review page: its script (``review.py``) and the parts only it uses."""
