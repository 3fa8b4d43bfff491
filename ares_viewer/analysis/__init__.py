"""Pure views over runs and episodes, tested without a browser: ``search``, ``align`` (Compare), ``groups``,
``ending`` (why this reward), ``plots``; above them ``aggregate_plots`` (figures of the index's aggregates).
"""
