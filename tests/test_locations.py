"""Where a run is: a local path or an fsspec URL, told apart by its protocol, never by looking for "://"."""

import os

import pytest

from ares_viewer.base import locations


@pytest.mark.parametrize(
    ("text", "protocol", "path"),
    [
        ("s3://bucket/run/", "s3", "bucket/run/"),
        ("simplecache::s3://bucket/run", "simplecache::s3", "bucket/run"),
        ("simplecache::/data/run", "simplecache", "/data/run"),
        ("file:///data/run", "file", "/data/run"),
    ],
)
def test_a_url_is_remote_with_its_protocol_and_path(text, protocol, path):
    where = locations.Location.of(text)
    assert (where.protocol, where.path, where.is_local, str(where)) == (protocol, path, False, text)


@pytest.mark.parametrize("text", ["/data/run", "runs/mini", "C:\\runs\\mini", "/data/odd::name.json", "~/runs"])
def test_a_plain_path_is_local_even_with_a_drive_letter_or_colons_in_a_name(text):
    assert locations.is_local(text) and locations.Location.of(text).protocols() == set()


def test_names_and_parts_come_from_the_path_without_the_protocol():
    where = locations.Location.of("s3://bucket/run/trial-1/agent/trajectory.json")
    assert where.name == "trajectory.json"
    assert where.pure().parent.parent.name == "trial-1"
    assert locations.Location.of("D:\\runs\\t\\agent\\x.json").pure(backslashes=True).parts[-3:] == (
        "t",
        "agent",
        "x.json",
    )


def test_joining_keeps_the_protocol_and_one_slash():
    assert str(locations.Location.of("s3://bucket/run/").joinpath("snapshots", "e1")) == "s3://bucket/run/snapshots/e1"
    assert str(locations.Location.of("/data/run").joinpath("snapshots")) == os.path.join("/data/run", "snapshots")


def test_an_index_is_keyed_by_an_absolute_path_or_a_url_without_its_trailing_slash(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert locations.Location.of("run").canonical() == str(tmp_path / "run")
    assert locations.Location.of("s3://bucket/run/").canonical() == "s3://bucket/run"


def test_the_shown_form_masks_a_password_in_every_part_of_a_chain():
    shown = locations.Location.of("simplecache::https://alice:s3cret@host:8443/runs/x").display()
    assert shown == "simplecache::https://alice:***@host:8443/runs/x" and "s3cret" not in shown
    assert locations.Location.of("https://alice@host/x").display() == "https://alice@host/x"


def test_chained_protocols_are_all_named_and_a_last_plain_part_is_a_local_file():
    assert locations.Location.of("zip://a::file:///b.zip").protocols() == {"zip", "file"}
    assert locations.Location.of("simplecache::/data/b.zip").protocols() == {"simplecache", "file"}
    assert locations.Location.of("S3://bucket").protocols() == {"s3"}
