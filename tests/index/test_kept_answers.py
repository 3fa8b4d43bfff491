"""A big run's answers kept beside its index (``index.kept``): a fresh process reads them instead of asking, they
follow the index, and what is kept comes back exactly or is not kept at all."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import ares_viewer
from ares_viewer.runs import asked
from ares_viewer.runs.index import kept, queries, table
from benchmarks import bench_scale


def _fresh_process() -> None:
    """What a new server starts with: no answer in memory."""
    asked.ANSWERS.clear()


def test_a_fresh_process_reads_the_kept_answers_and_a_grown_run_asks_anew(tmp_path, monkeypatch):
    monkeypatch.setattr(table, "IN_MEMORY_ROWS", 100)  # this run counts as big: its answers are kept on disk
    run_dir = tmp_path / "run"
    bench_scale.write_run(run_dir / "a", 2000)
    run = ares_viewer.open_run(run_dir)
    first = (run.queries.stats(), run.queries.failures(), run.queries.reward_bands(bins=20),
             run.queries.sample(200), run.queries.per_task(), run.queries.reward_range())
    home = run.table.folder / kept.FOLDER / run.table.state
    assert len(list(home.iterdir())) == 6
    assert not any(p.name.startswith(kept.FOLDER) for p in run_dir.rglob("*"))  # the run folder is not written to

    _fresh_process()
    asking: list[str] = []
    monkeypatch.setattr(queries.Queries, "_df", lambda self, sql, params=(): asking.append(sql))
    monkeypatch.setattr(queries.Queries, "_aggregate", lambda self, sql, params=(): asking.append(sql))
    again = ares_viewer.open_run(run_dir)
    assert again.table.state == run.table.state
    read = (again.queries.stats(), again.queries.failures(), again.queries.reward_bands(bins=20),
            again.queries.sample(200), again.queries.per_task(), again.queries.reward_range())
    assert asking == []  # read from disk, not asked
    assert read[0] == first[0] and read[5] == first[5]
    for got, want in ((read[1], first[1]), (read[2], first[2]), (read[3], first[3]), (read[4][0], first[4][0])):
        pd.testing.assert_frame_equal(got, want, check_exact=True)
    assert read[4][1] == first[4][1]
    monkeypatch.undo()

    monkeypatch.setattr(table, "IN_MEMORY_ROWS", 100)
    bench_scale.write_run(run_dir / "b", 2000, seed=3)
    again.refresh()
    assert again.table.state != run.table.state
    assert again.queries.stats()["episodes"] == 4000  # the grown run's, not the kept answer
    assert not home.exists()  # the earlier state's answers are gone with it


def test_a_kept_answer_that_cannot_be_read_is_asked_again(tmp_path, monkeypatch):
    monkeypatch.setattr(table, "IN_MEMORY_ROWS", 100)
    run_dir = tmp_path / "run"
    bench_scale.write_run(run_dir, 2000)
    run = ares_viewer.open_run(run_dir)
    want = run.queries.stats()
    home = run.table.folder / kept.FOLDER / run.table.state
    (answer,) = home.iterdir()
    for spoiled in (b"{not json", b'{"$frame": "!!"}', b"x" * (kept.MAX_BYTES + 1)):
        answer.write_bytes(spoiled)
        _fresh_process()
        assert ares_viewer.open_run(run_dir).queries.stats() == want
        assert kept.decode(answer.read_bytes()) == want  # and written over


def test_a_small_run_keeps_nothing_on_disk(tmp_path):
    run_dir = tmp_path / "run"
    bench_scale.write_run(run_dir, 200)
    run = ares_viewer.open_run(run_dir)
    run.queries.stats()
    assert run.table.state is None
    assert not (run.table.folder / kept.FOLDER).exists()


def test_values_come_back_exactly_or_are_not_kept():
    frame = pd.DataFrame({"reason": ["a", None], "episodes": pd.array([3, None], dtype="Int64"),
                          "share": [0.5, math.nan], "band": pd.Categorical(["x", "y"])}, index=[4, 7])
    value = {"n": 3, 2: (1.5, None, [True, "t"]), "nan": math.nan, "inf": -math.inf, "frame": (frame, 2)}
    back = kept.decode(kept.encode(value))
    assert set(back) == set(value) and back[2] == (1.5, None, [True, "t"]) and type(back[2]) is tuple
    assert math.isnan(back["nan"]) and back["inf"] == -math.inf
    pd.testing.assert_frame_equal(back["frame"][0], frame, check_exact=True)
    for unkept in (np.int64(3), {"x": np.float32(1)}, 2 ** 70, pd.DataFrame({"mixed": [1, "a"]}), object()):
        with pytest.raises(kept.UnkeptError):
            kept.encode(unkept)


def test_a_state_keeps_its_newest_answers_within_its_bounds(tmp_path, monkeypatch):
    monkeypatch.setattr(kept, "MOST", 3)
    for n in range(5):
        kept.answer(tmp_path, "s1", f"q{n}.json", lambda n=n: {"n": n})
    assert sorted(p.name for p in (tmp_path / kept.FOLDER / "s1").iterdir()) == ["q2.json", "q3.json", "q4.json"]
    monkeypatch.setattr(kept, "MOST_BYTES", 40)
    kept.answer(tmp_path, "s1", "big.json", lambda: "x" * 30)
    assert [p.name for p in (tmp_path / kept.FOLDER / "s1").iterdir()] == ["big.json"]  # the newest, within 40 bytes
    assert kept.answer(tmp_path, "s1", "huge.json", lambda: "y" * (kept.MAX_BYTES + 1)) == "y" * (kept.MAX_BYTES + 1)
    assert not (tmp_path / kept.FOLDER / "s1" / "huge.json").exists()  # too big to keep: asked again next time
    kept.answer(tmp_path, "s2", "q.json", lambda: 1)  # another state's first answer
    assert [p.name for p in (tmp_path / kept.FOLDER).iterdir()] == ["s2"]


def test_run_queries_declares_on_each_question_whether_its_answer_is_kept():
    """``Run.queries`` is a typed class, not a proxy: every question of ``Queries`` is a method of its own, decorated
    ``@kept`` or ``@asked`` (or handing on to ones that are), and its type is what mypy is told."""
    import ast
    import inspect
    import typing

    source = ast.parse(inspect.getsource(asked))
    recovering = next(n for n in source.body if isinstance(n, ast.ClassDef) and n.name == "Recovering")
    methods = {n.name: n for n in recovering.body if isinstance(n, ast.FunctionDef)}
    declared = {name: [ast.unparse(d) for d in node.decorator_list] for name, node in methods.items()}
    questions = [name for name, value in vars(queries.Queries).items()
                 if callable(value) and not name.startswith("_")]
    assert questions and set(questions) <= set(methods)
    for name in questions:
        handed_on = {c.func.attr for c in ast.walk(methods[name]) if isinstance(c, ast.Call)
                     and isinstance(c.func, ast.Attribute) and isinstance(c.func.value, ast.Name)
                     and c.func.value.id == "self" and c.func.attr in methods}
        kinds = set(declared[name]) | {d for other in handed_on for d in declared[other]}
        assert kinds & {"kept", "asked", "property"} or name == "stream", (name, kinds)
    assert "__getattr__" not in methods and not hasattr(asked, "KEPT")
    assert typing.get_type_hints(ares_viewer.Run.queries.fget)["return"] is asked.Recovering


def test_a_question_declared_kept_is_asked_once_per_table_and_one_asked_anew_every_time(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    bench_scale.write_run(run_dir, 50)
    run = ares_viewer.open_run(run_dir)
    _fresh_process()
    asking: list[str] = []
    real = queries.Queries._df
    monkeypatch.setattr(queries.Queries, "_df",
                        lambda self, sql, params=(): asking.append(sql) or real(self, sql, params))
    first = run.queries.reward_histogram()
    first.loc[0, "episodes"] = -1  # a caller's copy is its own
    assert int(run.queries.reward_histogram()["episodes"].min()) >= 0
    assert len(asking) == 1
    run.queries.failures(with_ids=True)
    run.queries.failures(with_ids=True)
    assert len(asking) == 3  # the ids of every failed episode: never kept
