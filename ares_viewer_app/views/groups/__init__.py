"""The groups page: its script (``groups.py``) and the parts only it uses."""
