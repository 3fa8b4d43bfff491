"""The activations page: its script (``activations.py``) and the parts only it uses."""
