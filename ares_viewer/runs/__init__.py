"""A run: where its files are (``sources``), what it keeps beside them (``companions``), where its index lives
(``index_cache``), the index itself (``index/``) and ``run.Run``, the table of episodes opened on demand.

Lowest first: ``companions``; ``sources`` and ``index_cache``; ``index``; ``run``.
"""
