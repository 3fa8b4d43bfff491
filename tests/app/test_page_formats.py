"""The run and episode pages on every format the viewer reads (Tinker, Ray runner, mini-swe-agent, mixed)."""

from __future__ import annotations

import format_runs
import page_text
import pytest


@pytest.fixture
def runs(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    format_runs.write(root)
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(root))


def metrics(at) -> dict[str, str]:
    return page_text.figures(at)


def test_mixed_folder_lists_every_format(runs, app):
    at = app(run="mixed")
    assert not at.exception
    assert metrics(at)["Episodes"] == "29"
    table = at.dataframe(key="overview.table").value
    assert table["format"].value_counts().to_dict() == {"tinker": 21, "ray": 4, "ares": 2, "mini-swe-agent": 2}
    assert not any("could not be read" in e.label for e in at.expander)


def test_training_run_shows_reward_over_iterations(runs, app):
    at = app(run="tinker")
    assert not at.exception
    charts = page_text.charts(at)
    assert len(charts) == 5  # the four reward charts and the training curve
    curve = charts["overview.iterations"]
    assert curve.title == "Reward over training iterations" and "iteration" in curve.texts
    assert curve.links and all(a["href"].startswith("episode?run=tinker&episode=") for a in curve.links)
    table = at.dataframe(key="overview.table").value
    # two Tinker log folders (guess-number, math-rl): two runs, each episode's run first, then the training columns
    assert list(table.columns[:5]) == ["run_id", "iteration", "split", "group_idx", "traj_idx"]
    assert sorted(set(table["run_id"])) == ["guess-number", "math-rl"]
    # Runs without iterations have no training curve.
    assert len(page_text.charts(app(run="ray"))) == 4


def test_tinker_episode_page(runs, app):
    at = app("episode", run="tinker", episode=f"{format_runs.MATH_GROUP}/t3", step="1")
    assert not at.exception
    shown = page_text.of(at)
    assert "James writes a 3-page letter" in shown  # the prompt, new at the first call
    assert "format tinker · iteration 10 · split train" in shown
    assert any(page_text.shown(e.label).startswith("Step details: stop_reason, metrics, logs, reward_data")
               for e in at.expander)
    # The rollout's last response hit the token limit: that, not a step limit, truncated it.
    warnings = [page_text.shown(w.value) for w in at.warning]
    assert any(w.startswith("The token limit (the last response stopped at its maximum length) ended")
               for w in warnings)


def test_ray_episode_page_shows_evaluation_and_error(runs, app):
    at = app("episode", run="ray", episode=format_runs.RAY_FAILED, step="2")
    assert not at.exception
    shown = page_text.of(at)
    assert "**Evaluation** :red-badge[failed] FAIL_TO_PASS test_immutable still fails" in shown
    assert "Symbol already has __slots__" in shown  # the response at step 2
    at = app("episode", run="ray", episode=format_runs.RAY_CRASHED, step="1")
    assert any("The episode ended with an error: RayActorError" in e.value for e in at.error)


def test_mini_swe_agent_episode_page_shows_submission(runs, app):
    at = app("episode", run="mini", episode=format_runs.MINI_V2, step="3")
    assert not at.exception
    shown = page_text.of(at)
    assert "format mini-swe-agent · exit status Submitted · API calls 5" in shown
    assert "sed -i 's/cright" in shown and "return code 0" in shown
    [submission] = [e for e in at.expander if e.label.startswith("Submission (")]
    assert "cright[-right.shape[0]:, -right.shape[1]:] = right" in page_text.of(at)
    assert submission.label == "Submission (13 lines)"


def test_mini_swe_agent_run_is_unscored_until_an_evaluation_report_is_added(runs, app, tmp_path):
    import json
    import os
    import pathlib

    import formats_fixtures

    at = app(run="mini")
    assert not at.exception
    assert metrics(at)["Success rate"] == "–"  # nobody scored these trajectories: not 0%
    assert any("2 finished episodes without a reward" in c.value for c in at.caption)

    report = pathlib.Path(os.environ["ARES_VIEWER_RUNS"]) / "mini" / "gpt-4o.swebench-run.json"
    report.write_text(json.dumps(formats_fixtures.harness_report(resolved=["astropy__astropy-12907"],
                                                                 unresolved=["django__django-11099"])))
    at.button(key="app.reload").click().run()  # the sidebar's "Reload run": read the files again
    assert metrics(at)["Success rate"] == "50%" and metrics(at)["Mean reward"] == "0.5"
    table = at.dataframe(key="overview.table").value.set_index("episode_id")
    assert table.loc[format_runs.MINI_V2, "verdict"] == "resolved (gpt-4o.swebench-run.json)"
    at = app("episode", run="mini", episode=format_runs.MINI_V2, step="1")
    assert not at.exception
    assert "**SWE-bench evaluation** :green-badge[resolved] reward 1, from `gpt-4o.swebench-run.json`" in \
        page_text.of(at)
