"""The episode page: its script (``episode.py``) and the parts only it uses."""
