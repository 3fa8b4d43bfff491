"""URL slugs for titles."""

import re

_SEPARATORS = re.compile(r"[^a-z0-9]+")


def slugify(text: str) -> str:
    """Turn a title into a URL slug: lowercase words joined by hyphens.

    >>> slugify("Hello, World!")
    'hello-world'
    """
    text = text.lower()
    text = _SEPARATORS.sub("-", text)
    return text.strip("-")
