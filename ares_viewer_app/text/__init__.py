"""Text as the app shows it: file and user text escaped for Streamlit's markdown (``escape``), and values as the
pages show them (``readable``: a dash for unknown, outcome badges, long texts clipped). Neither imports Streamlit."""
