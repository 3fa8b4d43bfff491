"""The torch-free ``.pt`` reader gives torch's own tensors, and refuses files that ask for more than tensors.

torch writes the files here (``torch.save``) and is the reference (``torch.load(weights_only=True)``); the
library reads them without it.
"""

from __future__ import annotations

import io
import os
import pathlib
import pickle
import struct
import subprocess
import sys
import textwrap
import zipfile

import numpy as np
import pytest

from ares_viewer import activations
from ares_viewer.activations import ptfile, step_file

REPO = pathlib.Path(__file__).resolve().parent.parent



def _reference(torch, path) -> dict[str, np.ndarray]:
    loaded = torch.load(path, weights_only=True)
    return {name: (t.float() if t.dtype == torch.bfloat16 else t).numpy() for name, t in loaded.items()}


def _assert_same(mine: dict[str, np.ndarray], reference: dict[str, np.ndarray]) -> None:
    assert mine.keys() == reference.keys()
    for name, expected in reference.items():
        got = mine[name]
        assert got.shape == expected.shape, name
        assert got.dtype == expected.dtype, (name, got.dtype, expected.dtype)
        assert np.array_equal(got, expected, equal_nan=got.dtype.kind == "f"), name


def test_views_into_shared_storage_strides_and_dtypes_match_torch(torch, tmp_path):
    base = torch.arange(60, dtype=torch.float32).reshape(5, 12)
    tensors = {
        "whole": base,
        "rows_view": base[1:4],  # an offset into a larger storage
        "transposed": base[1:, 2:9].t(),  # non-contiguous strides, offset, shared with the others
        "every_other": base[:, ::3],
        "expanded": torch.tensor([2.5]).expand(4, 3),  # stride 0
        "half": torch.randn(3, 7, dtype=torch.float16)[:, 1:6],
        "bf16": torch.randn(4, 6).to(torch.bfloat16).t(),
        "float64": torch.randn(2, 2, dtype=torch.float64),
        "int64": torch.arange(-5, 5),
        "int8": torch.tensor([-3, 4], dtype=torch.int8),
        "uint8": torch.tensor([0, 255], dtype=torch.uint8),
        "bool": torch.tensor([[True, False], [False, True]]),
        "scalar": torch.tensor(7.0),
        "empty": torch.zeros(0, 4),
        "inf_nan": torch.tensor([float("inf"), float("-inf"), float("nan")]),
    }
    path = tmp_path / "step_0000.pt"
    torch.save(tensors, path)

    _assert_same(ptfile.read(path), _reference(torch, path))
    refs = ptfile.PtFile(path).tensors()
    assert refs["transposed"].storage.key == refs["whole"].storage.key  # one storage, read once
    assert refs["rows_view"].offset == 12 and refs["transposed"].strides == (1, 12)
    assert refs["bf16"].dtype == "bfloat16" and refs["half"].dtype == "float16"


def test_a_capture_step_matches_torch_tensor_for_tensor_with_either_reader(torch, tmp_path):
    from testdata import activations as fixtures

    folder = fixtures.write_capture(tmp_path / "cap", steps=2, layers=3, heads=4, d_model=16, positions=6)
    for step in (0, 1):
        path = os.path.join(folder, f"step_{step:04d}.pt")
        reference = _reference(torch, path)
        assert len(reference) == 2 + 3 * 10 + 1
        for reader in ("numpy", "torch"):
            capture = activations.Capture(folder, reader=reader)
            assert capture.reader == reader
            _assert_same({name: capture.array(step, name) for name in capture.hooks(step)}, reference)


def test_bfloat16_and_float16_captures_read_like_torch(torch, tmp_path):
    from testdata import activations as fixtures

    for dtype in (torch.bfloat16, torch.float16):
        folder = fixtures.write_capture(tmp_path / str(dtype), steps=1, dtype=dtype)
        path = os.path.join(folder, "step_0000.pt")
        _assert_same(ptfile.read(path), _reference(torch, path))


def _zip(path: pathlib.Path, members: dict[str, bytes]) -> pathlib.Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


class _Exploit:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_pickle_calling_os_system_is_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "pwned"
    bad = _zip(tmp_path / "step_0000.pt", {"step_0000/data.pkl": pickle.dumps({"x": _Exploit(str(marker))}),
                                          "step_0000/byteorder": b"little"})
    with pytest.raises(activations.UnsafeFileError) as caught:
        ptfile.PtFile(bad)
    assert str(bad) in str(caught.value) and "system" in str(caught.value) and "refused" in str(caught.value)
    assert not marker.exists()
    # Through a capture, with torch's reader chosen too: the restricted check runs first.
    (tmp_path / "metadata.json").write_text('{"model_name": "m", "num_steps": 1, "step_metadata": []}')
    for reader in ("numpy", "torch") if step_file.torch_available() else ("numpy",):
        capture = activations.Capture(tmp_path, reader=reader)
        with pytest.raises(activations.UnsafeFileError):
            capture.hooks(0)
        with pytest.raises(activations.UnsafeFileError):
            capture.array(0, "x")
    assert not marker.exists()


def test_other_globals_are_refused_even_as_a_tensor_storage(tmp_path):
    # A pickle naming builtins.eval in the place of a storage class.
    data = (b"\x80\x02}q\x00X\x01\x00\x00\x00xq\x01cbuiltins\neval\nq\x02X\x06\x00\x00\x00print1\x85R.")
    bad = _zip(tmp_path / "e.pt", {"e/data.pkl": data})
    with pytest.raises(activations.UnsafeFileError, match=r"builtins\.eval"):
        ptfile.PtFile(bad)


def _resized(torch, tmp_path, numel_bytes: bytes) -> pathlib.Path:
    """A real file whose storage record claims another size (``numel_bytes``: the pickle opcode and argument)."""
    good = tmp_path / "good.pt"
    torch.save({"x": torch.arange(24, dtype=torch.float32)}, good)
    with zipfile.ZipFile(good) as archive:
        members = {info.filename: archive.read(info) for info in archive.infolist()}
    name = next(n for n in members if n.endswith("data.pkl"))
    assert b"K\x18t" in members[name]  # BININT1 24, then the storage tuple closes
    members[name] = members[name].replace(b"K\x18t", numel_bytes + b"t", 1)
    return _zip(tmp_path / "bad.pt", members)


def test_a_storage_larger_than_the_file_is_refused(torch, tmp_path):
    bad = _resized(torch, tmp_path, b"J" + struct.pack("<i", 1_000_000_000))
    with pytest.raises(activations.PtFileError, match="more than the whole file") as caught:
        ptfile.PtFile(bad)
    assert str(bad) in str(caught.value)


def test_a_storage_larger_than_its_member_is_refused(torch, tmp_path):
    bad = _resized(torch, tmp_path, b"K\x30")  # 48 elements claimed, 24 stored: the file is large enough
    with pytest.raises(activations.PtFileError, match=r"member holds|reaches element"):
        ptfile.read(bad)


def test_a_view_reaching_past_its_storage_is_refused(tmp_path):
    # The storage holds 4 floats; the tensor claims 10 of them.
    pickled = (b"\x80\x02}q\x00X\x01\x00\x00\x00xctorch._utils\n_rebuild_tensor_v2\n((X\x07\x00\x00\x00storage"
               b"ctorch\nFloatStorage\nX\x01\x00\x00\x000X\x03\x00\x00\x00cpuK\x04tQK\x00K\n\x85K\x01\x85\x89"
               b"ccollections\nOrderedDict\n)RtRs.")
    bad = _zip(tmp_path / "v.pt", {"v/data.pkl": pickled, "v/data/0": b"\x00" * 16})
    with pytest.raises(activations.PtFileError, match="reaches element 9 of a storage of 4"):
        ptfile.PtFile(bad)


def test_files_that_are_not_torch_archives_get_a_reason(tmp_path):
    text = tmp_path / "notes.pt"
    text.write_text("hello")
    with pytest.raises(activations.PtFileError, match=r"not a torch\.save zip archive"):
        ptfile.PtFile(text)
    empty_zip = _zip(tmp_path / "z.pt", {"readme.txt": b"x"})
    with pytest.raises(activations.PtFileError, match=r"found 0 data\.pkl"):
        ptfile.PtFile(empty_zip)
    garbage = _zip(tmp_path / "g.pt", {"g/data.pkl": b"\x80\x02garbage"})
    with pytest.raises(activations.PtFileError, match=r"data\.pkl cannot be read"):
        ptfile.PtFile(garbage)


def test_the_library_reads_captures_with_torch_blocked(torch, tmp_path):
    from testdata import activations as fixtures

    folder = fixtures.write_capture(tmp_path / "cap", steps=2, layers=2, heads=2, d_model=8, positions=4)
    expected = _reference(torch, os.path.join(folder, "step_0001.pt"))
    np.savez(tmp_path / "expected.npz", **{k.replace(".", "__"): v for k, v in expected.items()})
    script = textwrap.dedent(
        f"""
        import sys
        import numpy as np

        class NoTorch:
            def find_spec(self, name, path=None, target=None):
                if name == "torch" or name.startswith("torch."):
                    raise ModuleNotFoundError("torch is blocked in this test", name=name)
                return None

        sys.meta_path.insert(0, NoTorch())
        from ares_viewer import activations
        from ares_viewer.activations import views, figures
        capture = activations.Capture({str(folder)!r})
        assert capture.reader == "numpy", capture.reader
        expected = np.load({str(tmp_path / "expected.npz")!r})
        for name in capture.hooks(1):
            assert np.array_equal(capture.array(1, name), expected[name.replace(".", "__")]), name
        figures.heatmap(views.step_summary(capture, 2), "summary")
        figures.heatmap(views.across_steps(capture), "across")
        assert "torch" not in sys.modules
        print("read", len(capture.hooks(1)), "hooks without torch")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "hooks without torch" in done.stdout


def test_shapes_are_listed_without_reading_any_storage(torch, tmp_path, monkeypatch):
    path = tmp_path / "s.pt"
    torch.save({"a": torch.zeros(3, 5), "b": torch.ones(2)}, path)
    reads = []
    monkeypatch.setattr(ptfile.PtFile, "_storage", lambda self, ref: reads.append(ref) or None)
    hooks = step_file.StepFile(path, reader="numpy").hooks()
    assert {n: h.shape for n, h in hooks.items()} == {"a": (3, 5), "b": (2,)} and not reads


def test_pickles_are_only_read_from_the_archive(tmp_path):
    """A pickle stored compressed or in odd places is still one pickle: io errors become file errors."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("c/data.pkl", pickle.dumps({"n": 1}))
    path = tmp_path / "c.pt"
    path.write_bytes(buf.getvalue())
    assert ptfile.PtFile(path).tensors() == {}
