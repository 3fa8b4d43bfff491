"""Parts of pages that two or more pages use; a part only one page uses lives in that page's folder."""
