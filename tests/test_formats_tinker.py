"""Reading Tinker rollout summaries: semantics from formats.md section 4."""

from __future__ import annotations

import formats_fixtures as fx
import pytest

import ares_viewer
from ares_viewer import formats


def test_one_episode_per_line_with_training_columns():
    run = ares_viewer.open_run(fx.TINKER / "math-rl")
    assert len(run) == 8 + 8 + 2 and run.errors == []
    assert run.skipped == 3  # config.json, metrics.jsonl, checkpoints.jsonl are not rollouts
    frame = run.episodes.set_index("episode_id")
    row = frame.loc["math-rl/it10/eval_gsm8k/g1/t0"]
    assert (row["iteration"], row["split"], row["group_idx"], row["traj_idx"]) == (10, "test", 1, 0)
    assert row["tags"] == "gsm8k, eval" and row["sampling_client_step"] == 10
    assert row["group"] == "math-rl/it10/eval_gsm8k/g1" and row["format"] == "tinker"
    assert sorted(frame["iteration"].unique()) == [0, 10]
    # The columns an adapter adds follow the common ones.
    assert list(run.episodes.columns[:17]) == list(ares_viewer.runs.run.EPISODE_COLUMNS)


def test_ids_are_unique_and_stable_across_reopening():
    first = ares_viewer.open_run(fx.TINKER, use_cache=False)
    again = ares_viewer.open_run(fx.TINKER, use_cache=False)
    assert first.episodes["episode_id"].is_unique
    assert first.episode_ids == again.episode_ids
    assert "guess-number/it0/train/g0/t2" in first


def test_rewards_tokens_and_outcomes():
    run = ares_viewer.open_run(fx.TINKER / "math-rl")
    rows = run.episodes.set_index("episode_id")
    assert rows.loc["math-rl/it0/train/g1/t0", "total_reward"] == 0.0
    assert rows.loc["math-rl/it0/train/g1/t1", "total_reward"] == 1.0
    # A response cut off at the token limit ends its rollout truncated.
    cut = rows.loc["math-rl/it10/train/g1/t3"]
    assert cut["outcome"] == "truncated" and cut["total_reward"] == pytest.approx(-0.1)
    episode = run.episode("math-rl/it10/train/g1/t3")
    assert episode.truncated and episode.step(1).extra["stop_reason"] == "length"
    assert episode.step(1).usage.generated_tokens == 1024


def test_trace_gives_prompt_response_and_reward_data():
    episode = ares_viewer.open_run(fx.MATH_IT0).episode("math-rl/it0/train/g0/t1")
    assert episode.system_prompt.startswith("You are a careful math tutor")
    assert [m.role for m in episode.context(1)] == ["user"]
    assert episode.context(1)[0].content.startswith("Natalia sold clips")
    step = episode.step(1)
    # Content given as typed parts: the thinking and the answer, both read.
    assert "work through the arithmetic" in step.response and "\\boxed{72}" in step.response
    assert step.reward == 1.0 and step.kind is ares_viewer.StepKind.LAST
    # reward_data holds display strings; they are read as numbers.
    assert step.extra["reward_data"]["correct"] == 1.0 and step.extra["reward_data"]["format"] == 1.0
    assert step.extra["metrics"] == {"format": 1.0, "correct": 1.0}
    assert episode.metadata["group_idx"] == 0 and episode.metadata["final_ob_len"] > 0


def test_multi_turn_context_and_feedback():
    records = fx.lines(fx.GUESS)
    episode = ares_viewer.open_run(fx.GUESS).episode("guess-number/it0/train/g0/t1")
    assert episode.num_actions == 5 and episode.total_reward == 0.0
    for k in range(1, 6):
        expected = records[1]["steps"][k - 1]["trace"]["prompt"]["messages"][1:]  # the system message is apart
        assert [m.to_dict() for m in episode.context(k)] == expected
    assert [m.content for m in episode.new_messages(3)] == ["<guess>25</guess>", "Too low. Guess again."]
    assert episode.step(2).observation_text == "Too low. Guess again."
    assert episode.step(1).observation_text == "Too high. Guess again."
    assert len(episode.messages) == 1 + 2 * 4  # stored once, not per step
    assert episode.steps_frame()["prompt_tokens"].tolist()[1:] == [60, 74, 88, 102, 116]


def test_rollout_without_traces_keeps_rewards_and_counts(tmp_path):
    record = fx.lines(fx.MATH_IT0)[0]
    for step in record["steps"]:
        del step["trace"]
    del record["total_reward"]
    record["final_reward"] = 0.5
    path = fx.write_lines(tmp_path / "iteration_000004" / "train_rollout_summaries.jsonl", [record])
    run = ares_viewer.open_run(path)
    row = run.episodes.iloc[0]
    assert row["total_reward"] == 1.5  # step rewards plus the final reward
    assert row["task_name"] == "gsm8k · group 0" and row["iteration"] == 0
    episode = run.episode(row["episode_id"])
    assert episode.context(1) == [] and episode.step(1).usage.prompt_tokens > 0


def test_iteration_and_split_from_the_path_when_the_line_lacks_them(tmp_path):
    record = fx.lines(fx.MATH_IT0)[0]
    del record["iteration"], record["split"]
    path = fx.write_lines(tmp_path / "exp" / "iteration_000042" / "eval_math500_rollout_summaries.jsonl", [record])
    row = ares_viewer.open_run(path).episodes.iloc[0]
    assert row["iteration"] == 42 and row["split"] == "eval_math500"
    assert row["episode_id"] == "exp/it42/eval_math500/g0/t0"


def test_opening_one_rollout_parses_only_its_line():
    data = fx.MATH_IT0.read_bytes()
    result = formats.read_file(str(fx.MATH_IT0), data, episode_id="math-rl/it0/train/g1/t2")
    assert [e.episode_id for e in result.episodes] == ["math-rl/it0/train/g1/t2"]


def test_index_rows_agree_with_parsed_rollouts():
    run = ares_viewer.open_run(fx.TINKER)
    for row in run.episodes.to_dict("records"):
        expected = run.episode(row["episode_id"]).summary()
        for key, value in expected.items():
            if value is None:
                assert row[key] is None or row[key] != row[key], key
            else:
                assert row[key] == pytest.approx(value) if isinstance(value, float) else row[key] == value, key


def test_token_data_of_an_action_reaches_the_per_token_view(tmp_path):
    from ares_viewer.activations import tokens

    record = fx.lines(fx.MATH_IT0)[0]
    record["steps"][0]["ac"] = {"tokens": [101, 102, 103], "maybe_logprobs": [-0.1, -3.0, -0.5]}
    path = fx.write_lines(tmp_path / "iteration_000001" / "train_rollout_summaries.jsonl", [record])
    run = ares_viewer.open_run(path)
    episode = run.episode(run.episodes.iloc[0]["episode_id"])
    frame = tokens.token_frame(episode.step(1))
    assert frame["token_id"].tolist() == [101, 102, 103] and frame["logprob"].tolist() == [-0.1, -3.0, -0.5]
