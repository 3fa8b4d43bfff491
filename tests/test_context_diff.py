"""Context changes matched by content: what a reader is told is new, kept, dropped or rewritten at a step."""

from __future__ import annotations

import pathlib

import pytest

import ares_viewer
from ares_viewer.model import Message, context_diff
from testdata import synthetic

DEMO = pathlib.Path(__file__).resolve().parent.parent / "sample_runs" / "demo-run"
REWRITE_EPISODE = "0b17f852-8687-4e04-a8c5-e078baf6b285"

TASK = Message("user", synthetic.task_message("pager__last-page"))


def action(text: str, command: str) -> Message:
    return Message("assistant", f"THOUGHT: {text}\n\n```bash\n{command}\n```")


def result(output: str, returncode: int = 0) -> Message:
    return Message("user", synthetic.result_message(returncode, output))


def test_an_appended_exchange_is_new_and_everything_else_kept():
    before = [TASK, action("Look around.", "ls"), result("README.md\npager.py\n")]
    after = [*before, action("Read it.", "cat pager.py"), result("def page(): ...\n")]
    change = context_diff.compare(before, after)
    assert change.kept == tuple(before)
    assert [m.content for m in change.new] == [after[3].content, after[4].content]
    assert change.dropped == () and change.rewritten == () and change.extends


def test_a_compacted_context_counts_messages_it_carried_over_as_kept_not_new():
    history = [TASK]
    for n in range(20):
        history += [action(f"Try {n}.", f"python3 repro.py --case {n}"), result(f"case {n}: wrong\n", 1)]
    # The agent keeps the task and its last two exchanges, then appends its new action and result.
    latest = [action("Run the tests.", "python3 -m pytest -q"), result("3 passed\n")]
    compacted = [TASK, *history[-4:], *latest]
    change = context_diff.compare(history, compacted)
    assert len(change.kept) == 5
    assert list(change.new) == latest
    assert len(change.dropped) == len(history) - 5
    assert not set(change.dropped) & set(compacted)  # nothing "gone" is still there
    assert not change.extends
    assert change.summary() == f"5 kept, 2 new, {len(history) - 5} dropped, 0 rewritten"


def test_a_repeated_message_is_new_the_second_time():
    rerun = action("Rerun the reproduction.", "python3 repro.py")
    before = [TASK, rerun, result("pages: 2\n")]
    after = [*before, rerun, result("pages: 3\n")]
    change = context_diff.compare(before, after)
    assert len(change.kept) == 3
    assert list(change.new) == [rerun, after[-1]]


def test_an_output_cut_to_head_and_tail_is_a_rewrite_of_the_long_one():
    long_output = "".join(f"line {n}: collected test item\n" for n in range(400))
    full = result(long_output)
    cut = Message("user", full.content[:600] + "\n[… 11,000 characters cut by the agent …]\n" + full.content[-600:])
    before = [TASK, action("Collect.", "pytest --collect-only"), full]
    after = [TASK, before[1], cut, action("Now run one.", "pytest -q -k one")]
    change = context_diff.compare(before, after)
    assert change.rewritten == ((full, cut),)
    assert change.dropped == () and list(change.new) == [after[3]]


def test_two_different_short_results_are_not_one_rewritten():
    before = [TASK, action("Check.", "git log --oneline"), result("779a511 Initial commit\n")]
    after = [TASK, action("Run it.", "python3 repro.py"), result("1 [1, 2]\n2 [3, 4]\npages: 2\n")]
    change = context_diff.compare(before, after)
    assert change.rewritten == ()
    assert len(change.new) == 2 and len(change.dropped) == 2


def test_a_few_words_changed_in_a_long_message_is_a_rewrite():
    text = synthetic.task_message("textkit__slugify-accents") * 3
    edited = Message("user", text.replace("negative numbers", "negative integers", 1))
    change = context_diff.compare([Message("user", text)], [edited])
    assert len(change.rewritten) == 1 and not change.new and not change.dropped


def test_kept_messages_out_of_their_order_are_reported():
    a, b = action("One.", "ls"), result("x\n")
    change = context_diff.compare([TASK, a, b], [TASK, b, a])
    assert len(change.kept) == 3 and change.reordered and not change.extends


@pytest.mark.skipif(not DEMO.is_dir(), reason="the bundled sample runs are not in this checkout")
def test_the_sample_rewrite_step_counts_by_content():
    episode = ares_viewer.open_run(DEMO).episode(REWRITE_EPISODE)
    step = next(s for s in episode.steps if s.context_rewritten)
    # By position: 6 messages follow the kept first one.
    assert step.new_message_count == len(episode.appended_messages(step.index)) == 6
    change = episode.context_change(step.index)
    # By content: 4 of those 6 were in the previous context (the 5th kept one is the task); the agent's rerun of
    # an earlier command and its new output are new; 66 messages are really gone.
    assert (len(change.kept), len(change.new), len(change.dropped), len(change.rewritten)) == (5, 2, 66, 0)
    context = episode.context(step.index)
    assert not set(change.dropped) & set(context)
    # The notebook's new and dropped messages, and the steps table, count as the app does.
    assert episode.new_messages(step.index) == list(change.new)
    assert episode.dropped_messages(step.index) == list(change.dropped)
    assert episode.steps_frame().loc[step.index, "new_messages"] == 2
    # A step that only appends agrees with the positional count.
    plain = episode.context_change(step.index - 1)
    assert plain.extends and len(plain.new) == episode.step(step.index - 1).new_message_count


@pytest.mark.skipif(not DEMO.is_dir(), reason="the bundled sample runs are not in this checkout")
def test_the_cli_shows_the_messages_new_by_content_after_a_rewrite(capsys):
    from ares_viewer import cli

    episode = ares_viewer.open_run(DEMO).episode(REWRITE_EPISODE)
    step = next(s for s in episode.steps if s.context_rewritten)
    assert cli.main(["show", str(DEMO / f"{REWRITE_EPISODE}.json"), "--step", str(step.index)]) == 0
    out = capsys.readouterr().out
    assert f"context={step.context_len} messages (+2 new)" in out
    assert "5 kept, 2 new, 66 dropped, 0 rewritten" in out
    listed = out.split("NEW IN THE PROMPT (2):\n", 1)[1].split("\n\n", 1)[0].splitlines()
    change = episode.context_change(step.index)
    assert len(listed) == 2 and [line.split("]", 1)[0] for line in listed] == ["  [assistant", "  [user"]
    assert "Let me rerun the reproduction" in listed[0] and "[user] <returncode>0</returncode>" in listed[1]
    # By position the 4 messages carried over after the task would be new too; they are not listed.
    assert len(change.kept) == 5 and step.new_message_count == 6
    assert "Pages 1 and 2 are right now" in change.kept[3].content
    assert "Pages 1 and 2" not in "\n".join(listed) and "Split result lists" not in "\n".join(listed)


def test_step_text_after_an_ordinary_step_lists_the_previous_exchange_as_new(tmp_path):
    from ares_viewer.model import render as display

    episode = ares_viewer.load_episode(synthetic.write_episode(tmp_path, synthetic.episode_dict(actions=3, seed=2)))
    text = display.step_text(episode, 2)
    assert "(+2 new)" in text and "dropped or rewritten" not in text
    previous = episode.step(1)
    listed = text.split("NEW IN THE PROMPT (2):\n", 1)[1].split("\n\n", 1)[0]
    assert previous.command.split()[0] in listed and "[user] <returncode>" in listed
