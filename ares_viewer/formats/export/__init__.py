"""Episodes written out in other formats: ATIF trajectories (``atif_export``) and Docent agent runs
(``docent_export``; ``ares_viewer.export.docent(run, "out.jsonl")`` in a notebook)."""

from ares_viewer.formats.export.docent_export import export as docent

__all__ = ["docent"]
