"""Hostile activation files (written by hand: ``hostile_pt``) cost little and fail alone, with their own reason.

Each was a probe of issue #27: a 259-byte file took 2 GB through its pickle's memo index, 5 KB of deflated empty
sets took seconds and every core, 16 stride-0 hooks in 5 KB asked for 1 GB; a dimension of 2**70, a bad CRC and a
list containing itself raised OverflowError, BadZipFile and RecursionError out of the views.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import hostile_files
import hostile_pt
import pytest

from ares_viewer import activations
from ares_viewer.activations import ptfile, step_file, views

REPO = pathlib.Path(__file__).resolve().parent.parent
READERS = ("numpy", "torch") if step_file.torch_available() else ("numpy",)


@pytest.mark.parametrize(("builder", "reason"), [
    ("memo_index", "memo entry 134,217,728"),
    ("empty_sets", "more than 1,000,000 pickle operations"),
    ("stride_zero", "stride-0 views count every element"),
])
def test_a_few_bytes_cannot_make_the_reader_take_gigabytes(tmp_path, builder, reason):
    path = getattr(hostile_pt, builder)(tmp_path / "step_0000.pt")
    assert path.stat().st_size < 6000
    # In a process of its own, so its peak memory is the read's alone.
    script = textwrap.dedent(f"""
        import resource
        from ares_viewer.activations import ptfile
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            ptfile.read({str(path)!r})
            print("read")
        except ptfile.PtFileError as exc:
            print("refused:", exc)
        print("grew", (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024, "MB")
        """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-2000:]
    refused, grew = done.stdout.splitlines()
    assert refused.startswith(f"refused: {path}: ") and reason in refused
    assert int(grew.split()[1]) < 100, grew


@pytest.mark.parametrize("reader", READERS)
def test_each_bad_step_file_is_its_own_error_and_the_rest_of_the_capture_shows(tmp_path, reader):
    files = hostile_pt.mixed_capture(tmp_path / "cap")
    capture = activations.Capture(tmp_path / "cap", reader=reader)
    frame = views.across_steps(capture, "hook_resid_post")
    # torch's loader maps storages without checking their CRC: the changed byte is read as it is.
    crc_checked = reader == "numpy"
    assert frame.index.tolist() == ([1, 4, 5] if crc_checked else [1, 3, 4, 5])  # 5 recorded no such hook
    assert frame.loc[1, "0"] == frame.loc[4, "0"] == pytest.approx(8**0.5)
    errors = frame.attrs["errors"]
    bad = ("huge_dimension", "bad_crc", "stride_zero") if crc_checked else ("huge_dimension", "stride_zero")
    assert set(errors) == {str(files[name]) for name in bad}
    assert "below 1,099,511,627,776" in errors[str(files["huge_dimension"])]
    assert not crc_checked or "Bad CRC-32" in errors[str(files["bad_crc"])]
    for path, reason in errors.items():
        assert reason.startswith(f"{path}: ")
    # The file holding a list that contains itself reads: the list is walked once.
    assert capture.hooks(4).keys() == {"hook_embed"}
    assert capture.array(4, "hook_embed").shape == (1, 4, 8)
    # One step's views: a bad file raises its own error (the page shows it), a good one reads.
    for step, name in ((2, "huge_dimension"), (3, "bad_crc"), (6, "stride_zero")):
        if name not in bad:
            continue
        with pytest.raises(activations.Error) as caught:
            views.step_summary(capture, step)
        assert str(files[name]) in str(caught.value)
    assert views.step_summary(capture, 4).loc["0", "hook_resid_post"] == pytest.approx(8**0.5)
    assert not views.attention_entropy(capture, 1).empty


def test_a_metadata_file_nested_too_deep_is_the_captures_error(tmp_path):
    folder = tmp_path / "cap"
    folder.mkdir()
    (folder / "metadata.json").write_bytes(hostile_files.deep_list())
    with pytest.raises(activations.CaptureError, match=r"metadata\.json: cannot be read as JSON .*nested too deep"):
        activations.Capture(folder)


def test_the_bounds_leave_real_files_alone(tmp_path):
    """A real-sized capture step (48 hooks of a 1024-wide model over 512 positions, 100 MB) reads whole."""
    hooks = {f"blocks.{i}.hook_resid_post": ((1, 512, 1024), (512 * 1024, 1024, 1)) for i in range(48)}
    path = hostile_pt.tensor_file(tmp_path / "step_0000.pt", hooks)
    refs = ptfile.PtFile(path).tensors()
    assert len(refs) == 48
    assert step_file.StepFile(path, reader="numpy").array("blocks.47.hook_resid_post").shape == (1, 512, 1024)


def test_hooks_with_empty_dimensions_read_as_empty_not_as_an_index_error(tmp_path):
    folder = tmp_path / "cap"
    folder.mkdir()
    (folder / "metadata.json").write_text('{"model_name": "m", "num_steps": 1, "step_metadata": []}')
    hostile_pt.tensor_file(folder / "step_0000.pt", {
        "blocks.0.attn.hook_pattern": ((0, 2, 4, 4), (32, 16, 4, 1)),  # no batch
        "blocks.1.attn.hook_pattern": ((1, 2, 0, 4), (8, 4, 4, 1)),  # no query
        "blocks.0.hook_resid_post": ((1, 0, 8), (8, 8, 1)),  # no position
    })
    capture = activations.Capture(folder)
    assert views.attention_entropy(capture, 1).empty
    assert views.across_steps(capture).isna().all().all()
    assert views.step_vector(capture, 1, "blocks.0.hook_resid_post").size == 0
    assert views.step_summary(capture, 1).isna().all().all()
