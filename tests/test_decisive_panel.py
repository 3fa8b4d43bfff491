"""The decisive-step panel and the branch logs it reads, on the library and in the app (AppTest).

- A failed search (an unreachable endpoint) adds failures and hides nothing: the bundled sample's 16-branch curve
  (decisive step 2) stays, its failures are counted at their step, and the panel ends it with a warning naming
  why, never a green "done" (#43, defect 2).
- A search that changes nothing names no decisive step: "No change found", and whether the intervals separate
  (#43, defect 3).
- The panel: a table of step, V, interval, n and failed beside the curve; without an endpoint or the sandbox it
  says what is missing and how to set it; a visitor never types an endpoint (#43; #45, item 1). Rubric searches
  are gated as the sandbox is.
- Branch logs shipped inside a run are untrusted input: paths confined, FIFOs refused without blocking, malformed
  lines reported, "supplied with the run" (#45, item 3); an episode id with ``../`` never becomes a path (#45,
  item 1).

The searches run on the real Docker engine; the policy is the sample's seeded one, served over HTTP on 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import re
import shutil
import threading
import time
import uuid

import chat_server
import pytest
import sample_scripts
from test_counterfactual import DEMO, SOLVED, WRONG_FIX

from ares_viewer.cli import branch as branch_cli
from ares_viewer.counterfactual import branching, model_client, value_curve
from ares_viewer.runs.run import load_episode

SESSION = f"pytest-{uuid.uuid4().hex[:10]}"
UNREACHABLE = "http://127.0.0.1:9/v1"  # the discard port: nothing listens
SHIPPED = DEMO / ".branches" / WRONG_FIX

_PANEL = """
import os
import streamlit as st
from ares_viewer.runs.run import load_episode
from ares_viewer_app.routing import pages
from ares_viewer_app.views.episode import decisive_panel

def panel():
    decisive_panel.body(load_episode(os.environ["DECISIVE_PANEL_EPISODE"]))

st.navigation([st.Page(panel, title="Panel", url_path="panel", default=True)]
              + [st.Page(pages.path(name), url_path=name) for name in ("episode", "compare")]).run()
"""

_RUBRIC = """
import ares_viewer
from ares_viewer_app.views.behaviours import rubric_panel
run = ares_viewer.open_run("{run}")
rubric_panel.show(run, ["aefe890e-4268-4666-90b5-dd09d3259e06"])
"""


@pytest.fixture
def env(monkeypatch, tmp_path):
    """A cache folder of the test's own, no model endpoint configured, the sandbox allowed."""
    for name in ("ARES_VIEWER_MODEL_URL", "ARES_VIEWER_MODEL", "ARES_VIEWER_MODEL_API_KEY_ENV"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ARES_VIEWER_MODEL_CONFIG", str(tmp_path / "model.toml"))
    monkeypatch.setenv("ARES_VIEWER_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("ARES_VIEWER_SANDBOX", "1")
    return monkeypatch


def _panel(tmp_path, monkeypatch, episode_file: pathlib.Path):
    """The decisive-step panel of the episode in ``episode_file`` as an AppTest, run."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    st.cache_resource.clear()
    monkeypatch.setenv("DECISIVE_PANEL_EPISODE", str(episode_file))
    entry = tmp_path / "decisive_entry.py"
    entry.write_text(_PANEL)
    at = AppTest.from_file(str(entry), default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    return at


def _shown(at) -> str:
    """Every text the page shows (markdown escapes, bold, code spans' backticks and word joiners dropped)."""
    parts = [str(e.value) for kind in ("markdown", "caption", "info", "warning", "error", "success")
             for e in at.get(kind)]
    text = "\n".join(parts).replace("**", "").replace("\u2060", "")
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", re.sub(r"(?<!\\)`", "", text))


def _table(at) -> dict[int, dict]:
    """The table beside the curve, by step."""
    [frame] = [d.value for d in at.dataframe]
    return {int(row["step"]): dict(row) for row in frame.to_dict("records")}


def _copy_run(root: pathlib.Path, *, recipe: bool = True) -> pathlib.Path:
    """The wrong-fix episode with its snapshots (and its task's recipe) in a run of its own, without the sample's
    shipped branches; the episode file's path."""
    root.mkdir(parents=True)
    shutil.copy(DEMO / f"{WRONG_FIX}.json", root)
    shutil.copytree(DEMO / "snapshots" / WRONG_FIX, root / "snapshots" / WRONG_FIX)
    if recipe:
        shutil.copytree(DEMO / "tasks", root / "tasks")
    return root / f"{WRONG_FIX}.json"


def _in_time(function, seconds: float = 20.0):
    """``function()``'s result, failing the test if it has not returned within ``seconds`` (a blocked read)."""
    out: list = []

    def call() -> None:
        try:
            out.append(function())
        except BaseException as exc:  # raised in the test's thread
            out.append(exc)

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    worker.join(seconds)
    assert out, f"still blocked after {seconds:.0f} s"
    if isinstance(out[0], BaseException):
        raise out[0]
    return out[0]


def test_the_sample_curve_is_supplied_with_the_run_in_a_table_and_the_panel_says_what_a_search_needs(
    env, tmp_path
):
    at = _panel(tmp_path, env, DEMO / f"{WRONG_FIX}.json")
    shown = _shown(at)
    assert "Decisive step 2: a drop of 1.00 in V from step 1 (the intervals separate)." in shown
    assert f"16 branch(es) supplied with the run in {SHIPPED}: results this installation did not compute" in shown
    table = _table(at)
    assert sorted(table) == [0, 1, 2, 3, 4]
    assert (table[1]["V"], table[1]["interval"], table[1]["n"], table[1]["failed"]) == (1.0, "[0.51, 1.00]", 4, 0)
    assert (table[2]["V"], table[2]["interval"], table[2]["supplied with the run"]) == (0.0, "[0.00, 0.49]", 4)
    assert table[4]["interval"] == "recorded reward"
    assert "Branch 1: reward 0 · supplied with the run" in shown  # from step 2, the decisive one
    # No endpoint: what is missing and how to set it; nowhere to type one.
    assert "A search cannot run from this page. It needs a model endpoint, which the server's operator sets: " \
           "ARES_VIEWER_MODEL_URL and ARES_VIEWER_MODEL in the server's environment" in shown
    assert not [t for t in at.text_input if "Endpoint" in t.label]
    assert not [b for b in at.button if b.key == "decisive.go"]
    # The sandbox off: that is said too.
    env.setenv("ARES_VIEWER_SANDBOX", "0")
    at.run()
    assert "set ARES_VIEWER_SANDBOX=1 in the server's environment" in _shown(at)
    # Configured by the operator: the panel names it, and still offers no field for another one.
    env.setenv("ARES_VIEWER_SANDBOX", "1")
    env.setenv("ARES_VIEWER_MODEL_URL", UNREACHABLE)
    env.setenv("ARES_VIEWER_MODEL", "policy")
    at.run()
    assert "Searches ask model policy at http://127.0.0.1:9/v1/chat/completions (configured by" in _shown(at)
    assert [b for b in at.button if b.key == "decisive.go"]
    assert not [t for t in at.text_input if "Endpoint" in t.label or t.label == "Model"]


def test_rubric_searches_are_offered_only_where_the_sandbox_is(env, tmp_path):
    from streamlit.testing.v1 import AppTest

    env.setenv("ARES_VIEWER_MODEL_URL", UNREACHABLE)
    env.setenv("ARES_VIEWER_MODEL", "judge")
    entry = tmp_path / "rubric_entry.py"
    entry.write_text(_RUBRIC.format(run=DEMO))
    env.setenv("ARES_VIEWER_SANDBOX", "0")
    at = AppTest.from_file(str(entry), default_timeout=60).run()
    assert not at.exception and not at.text_area
    assert "Rubric searches are off on this server" in _shown(at) and "ARES_VIEWER_SANDBOX=1" in _shown(at)
    env.setenv("ARES_VIEWER_SANDBOX", "1")
    at.run()
    assert [t for t in at.text_area if t.label == "Rubric"]


def test_a_failed_search_adds_failures_hides_no_curve_and_ends_in_a_warning(engine, env, tmp_path):
    parent = load_episode(DEMO / f"{WRONG_FIX}.json")
    client = model_client.openai_client(UNREACHABLE, "policy")
    failed = branching.search(parent, client, steps=[3], samples=2, max_steps=4, docker_client=engine,
                              session=SESSION)
    # The shipped curve is still there, the failures counted at their step.
    found = branching.load(parent)
    assert found.decisive is not None, "the failed search hid the shipped curve"
    assert (found.decisive.step, found.decisive.change, found.decisive.sure) == (2, -1.0, True)
    frame = found.to_frame()
    assert (frame.loc[3, "n"], frame.loc[3, "failed"]) == (4, 2)
    assert len(found.branches) == 18 and sum(b.supplied for b in found.branches) == 16
    # The search itself says its branches failed, and why.
    assert failed.new == 2 and [b.failure for b in failed.failures] == ["model", "model"]
    said = "\n".join(branch_cli.text(failed))
    assert "warning: 2 branch(es) failed and are not counted: model: ModelEndpointError: cannot reach " \
           "http://127.0.0.1:9/v1/chat/completions" in said and "(x2)" in said

    at = _panel(tmp_path, env, DEMO / f"{WRONG_FIX}.json")
    shown = _shown(at)
    assert "Decisive step 2: a drop of 1.00 in V from step 1" in shown
    assert "2 branch(es) computed here, stored in" in shown and "16 branch(es) supplied with the run" in shown
    assert (_table(at)[3]["n"], _table(at)[3]["failed"]) == (4, 2)
    assert "2 branch(es) failed and are not counted: model: ModelEndpointError: cannot reach" in shown

    # A search from the panel against the same endpoint: a warning with the reason, never a green "done".
    env.setenv("ARES_VIEWER_MODEL_URL", UNREACHABLE)
    env.setenv("ARES_VIEWER_MODEL", "policy")
    at.run()
    at.text_input(key="decisive.steps").set_value("3")
    at.number_input(key="decisive.samples").set_value(1)
    at.button(key="decisive.go").click().run()
    deadline = time.monotonic() + 120
    while "The search ended" not in _shown(at) and time.monotonic() < deadline:
        time.sleep(1)
        at.run()
    shown = _shown(at)
    assert not at.exception, at.exception
    assert "The search ended (done) with failures: 1 new branch(es)" in shown
    assert "1 branch(es) failed and are not counted: model: ModelEndpointError: cannot reach" in shown
    assert not at.success
    assert "Decisive step 2: a drop of 1.00 in V from step 1" in shown and _table(at)[3]["failed"] == 3


def test_a_search_that_changes_nothing_names_no_decisive_step(engine, env, tmp_path):
    """#43 defect 3: 2 branches from step 3 of the reward-0 episode, 0 of 2 solved: V is 0 at 3 and at 4."""
    episode_file = _copy_run(tmp_path / "run")
    parent = load_episode(episode_file)
    policy = sample_scripts.load("decisive_branches").Policy(load_episode(DEMO / f"{SOLVED}.json").step(5).command,
                                                              seed=5)
    with chat_server.serve(lambda body: policy.answer(body["messages"])) as server:
        client = model_client.openai_client(server.base_url, "policy")
        found = branching.search(parent, client, steps=[3], samples=2, max_steps=4, docker_client=engine,
                                 session=SESSION)
    assert [(b.step, b.reward) for b in found.branches] == [(3, 0.0), (3, 0.0)] and not found.failures
    assert found.decisive is None
    sentence = ("No change found: V is 0.00 at steps 3 and 4 (the intervals overlap: more samples could still "
                "show a change), so no step is decisive.")
    assert found.describe() == sentence and sentence in branch_cli.text(found)
    assert branch_cli.to_dict(found)["decisive"] is None
    assert not value_curve.figure(found).layout.shapes  # nothing shaded

    at = _panel(tmp_path, env, episode_file)
    shown = _shown(at)
    assert sentence in shown and "Decisive step" not in shown
    table = _table(at)
    assert sorted(table) == [3, 4] and (table[3]["V"], table[3]["n"], table[3]["interval"]) == (0.0, 2, "[0.00, 0.66]")
    assert (table[4]["V"], table[4]["interval"]) == (0.0, "recorded reward")


def test_an_episode_id_with_dotdot_never_becomes_a_path_outside_the_run_or_the_cache(env, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    data = json.loads((DEMO / f"{WRONG_FIX}.json").read_text())
    data["episode_id"] = "../../outside"
    (run / "hostile.json").write_text(json.dumps(data))
    episode = load_episode(run / "hostile.json")
    assert episode.episode_id == "../../outside"
    # Where .branches/<id> would lead (the run ships branches of other episodes): a log there must not be read.
    (run / ".branches").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "branches.jsonl").write_text(SHIPPED.joinpath("branches.jsonl").read_text())
    found = branching.load(episode)
    assert found.branches == (), "a log outside the run was read"
    assert "episode id '../../outside' cannot name a folder" in found.problems[0]
    assert branching.bundled_dir(episode) is None
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    with pytest.raises(ValueError, match="cannot name a folder"):
        branching.search(episode, model_client.openai_client(UNREACHABLE, "m"), steps=[1], samples=1,
                         docker_client=object(), budget=branching.Budget(max_rollouts=1))
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # nothing written anywhere


def test_branch_logs_shipped_with_a_run_are_read_as_untrusted_input(env, tmp_path):
    episode_file = _copy_run(tmp_path / "run", recipe=False)
    shipped = tmp_path / "run" / ".branches" / WRONG_FIX
    shipped.mkdir(parents=True)
    good = json.loads(SHIPPED.joinpath("branches.jsonl").read_text().splitlines()[0])
    shutil.copy(SHIPPED / good["path"], shipped)
    (tmp_path / "secret.json").write_text(DEMO.joinpath(f"{WRONG_FIX}.json").read_text())
    os.mkfifo(shipped / "fifo.json")
    lines = [
        json.dumps(good),
        "[1, 2]",
        json.dumps({"step": "two", "status": "completed"}),
        json.dumps({"step": 2, "status": "completed", "reward": "1.0"}),
        '{"step": 2, "status": "compl',
        json.dumps({**good, "step": 2, "path": "../../../secret.json"}),
        json.dumps({**good, "step": 2, "path": "fifo.json"}),
    ]
    (shipped / "branches.jsonl").write_text("\n".join(lines) + "\n")
    found = _in_time(lambda: branching.load(load_episode(episode_file)))
    [kept] = found.branches
    assert kept.supplied and kept.step == 0 and kept.path == str(shipped / good["path"])
    assert found.supplied_folder == shipped
    problems = "\n".join(found.problems)
    for number, reason in [(2, "a list, not a JSON object"), (3, "step is str 'two', not int"),
                           (4, "reward is str '1.0', not float"), (5, "not JSON"),
                           (6, f"its file ../../../secret.json lies outside {tmp_path / 'run'}"),
                           (7, "its file fifo.json is not a regular file")]:
        assert f"branches.jsonl line {number}: {reason}" in problems, (number, problems)

    at = _in_time(lambda: _panel(tmp_path, env, episode_file), 60)
    shown = _shown(at)
    assert "Left out, could not be read:" in shown and "line 2: a list, not a JSON object" in shown
    assert "1 branch(es) supplied with the run in" in shown

    # A log that is itself a FIFO: refused at once, never a read that waits for a writer.
    fifo_run = _copy_run(tmp_path / "fifo-run", recipe=False)
    (tmp_path / "fifo-run" / ".branches" / WRONG_FIX).mkdir(parents=True)
    log = tmp_path / "fifo-run" / ".branches" / WRONG_FIX / "branches.jsonl"
    os.mkfifo(log)
    try:
        found = _in_time(lambda: branching.load(load_episode(fifo_run)))
    finally:
        with contextlib.suppress(OSError):  # release a reader the old code left waiting
            os.close(os.open(log, os.O_WRONLY | os.O_NONBLOCK))
    assert found.branches == () and "is not a regular file (a FIFO, device, socket or folder)" in found.problems[0]
