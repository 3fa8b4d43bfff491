"""Snapshot content spooled to a temporary file: read back whole or streamed, shared by views, compacted."""

from __future__ import annotations

import concurrent.futures
import hashlib
import io
import os

import pytest

from ares_viewer.snapshots.spool import SpooledBlobs


def test_blobs_read_back_whole_and_streamed_from_several_writers():
    blobs = SpooledBlobs()
    contents = [os.urandom(n) for n in (0, 1, 3 << 20, 12345)]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        names = list(pool.map(lambda data: blobs.add_stream(io.BytesIO(data), len(data)), contents))
    assert names == [hashlib.sha256(data).hexdigest() for data in contents]
    assert set(blobs) == set(names) and blobs.stored_bytes() == sum(map(len, contents))
    for name, data in zip(names, contents, strict=True):
        assert blobs[name] == data and blobs.size(name) == len(data)
        with blobs.open(name) as stream:
            assert stream.read() == data
    with pytest.raises(OSError, match="ended after 2 of 5 bytes"):
        blobs.add_stream(io.BytesIO(b"ab"), 5)


def test_a_subset_shares_the_file_and_compaction_lets_go_of_the_rest():
    blobs = SpooledBlobs()
    keep, drop = blobs.add(b"k" * 1000), blobs.add(os.urandom(100_000))
    view = blobs.subset([keep, "not there"])
    assert list(view) == [keep] and view[keep] == b"k" * 1000 and drop not in view
    assert blobs.compacted([keep])._file is blobs._file  # little to gain: a view
    fresh = blobs.compacted([keep], slack_bytes=10_000)
    assert fresh._file is not blobs._file and list(fresh) == [keep] and fresh[keep] == b"k" * 1000
    assert blobs[drop]  # earlier views still read the old file
