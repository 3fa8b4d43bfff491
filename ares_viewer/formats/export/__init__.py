"""Episodes written out in other formats: ATIF trajectories (``atif_export``); the step helpers exports share
(``steps``). The Docent export reads the episode's ending, so it sits in the analysis layer
(``ares_viewer.analysis.docent_export``; ``ares_viewer.export.docent(run, "out.jsonl")`` in a notebook)."""
