"""The behaviours page: its script (``behaviours.py``) and the parts only it uses."""
