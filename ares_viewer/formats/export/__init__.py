"""Episodes written out in other formats: ATIF trajectories (``atif_export``)."""
