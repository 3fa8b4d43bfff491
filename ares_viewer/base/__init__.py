"""The base layer: small helpers every other layer may use, and nothing of the library above them.

``cache`` (one bounded cache), ``jsondecode`` (tolerant JSON), ``jsonbytes`` (how JSON may spell a text, as bytes),
``textdiff`` (line diffs), ``agent_text`` (the default agent's text protocol), ``sizes`` (sizes in words).
"""
