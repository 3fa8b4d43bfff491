"""The lost tasks page: its script (``lost.py``)."""
