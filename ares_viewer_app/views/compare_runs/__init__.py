"""The compare runs page: its script (``compare_runs.py``) and the parts only it uses."""
