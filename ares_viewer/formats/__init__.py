"""Format adapters: detect what a file holds by its content and read it into ``model.Episode``.

An adapter is a ``base.Adapter`` (``NAME``, ``sniff``, ``summarize``, ``parse``, and ``episode_id``,
``misnamed``, ``summarize_bytes`` with defaults), declared by its format's module in ``adapters/``;
``registry.ADAPTERS`` lists them in sniffing order, and other packages add theirs through entry points. A file's records
come from ``decoding``; every record is read by the adapter that claims the file's first one. Rows are
``model.EpisodeRow``; ``base.step_fields`` builds the step fields every adapter reads alike.

``read_file`` and ``summarize_file`` are the entry points: bytes in, episodes (or rows), per-file errors,
or "something else" out; they live in ``_reading`` and this package hands them on.
"""

from __future__ import annotations

from ares_viewer.formats._reading import FileResult, is_candidate, read_file, summarize_file

__all__ = ["FileResult", "is_candidate", "read_file", "summarize_file"]
