"""The files page: its script (``files.py``) and the parts only it uses."""
