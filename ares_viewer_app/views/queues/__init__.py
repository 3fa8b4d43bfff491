"""The queues page: its script (``queues.py``) and the parts only it uses."""
