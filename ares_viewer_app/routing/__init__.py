"""The app's routing: the page table (``pages``) and the view state mirrored in the URL (``state``)."""
