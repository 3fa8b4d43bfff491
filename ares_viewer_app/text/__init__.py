"""Text as the app shows it: file and user text escaped for Streamlit's markdown (``escape``)."""
