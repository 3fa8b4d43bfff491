"""One module per producer's episode format, each satisfying ``formats.base.Adapter``.

``formats.registry`` lists them in the order their ``sniff`` is asked.
"""
