"""The app's data: cached, bounded loaders of runs and of what is computed from them (``loaders``)."""
