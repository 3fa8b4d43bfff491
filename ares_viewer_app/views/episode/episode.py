"""One episode: a header, then two panes: the step list beside the step view (or the whole transcript).

The step view leads with what the model did (its reasoning, response and output), then, at the last step, why
the reward is what it is, then what changed in its prompt. Only the steps on screen are sent to the browser;
full contexts and the system prompt are rendered when their toggles are on. The panes and the step chart below
them (which shades the current step) are a fragment, so stepping reruns only them. Everything a reader chooses
here is in the URL (``step``, ``view``, ``failed``, ``diff``, ``other``; find's ``find`` and ``hit`` and the
transcript's page ``tpage``: ``reader``).
"""

from __future__ import annotations

import posixpath

import streamlit as st

import ares_viewer
from ares_viewer import fsdiff, model, snapshots
from ares_viewer.analysis import behaviours, ending  # noqa: F401 (behaviours: its touched_tests qualifies a success)
from ares_viewer.base import textdiff
from ares_viewer.model import render
from ares_viewer_app.data import loaders
from ares_viewer_app.panels import activations_panel, blocks, choosers, queue_panel, review_panel, snapshot_problems
from ares_viewer_app.routing import pages, state
from ares_viewer_app.text import escape, readable
from ares_viewer_app.views.episode import decisive_panel, reader, step_list, step_view, timeline


def error_panel(episode: model.Episode) -> None:
    """The error that ended the episode: its root cause first, who it belongs to, the chain and the traceback."""
    record = episode.error_record
    whose = ("the infrastructure's (model API, connection or Docker), not the agent's"
             if model.blame.is_infrastructure(episode.error) else "the agent's run")
    if record is None or record.root is record:
        st.error(f"The episode ended with an error: {escape.md(episode.error)} · a failure of {whose} "
                 "(the file's `error`).")
        if record is not None and record.traceback:  # e.g. the traceback mini-swe-agent saved with the error
            with st.expander("The traceback", icon=":material/bug_report:"):
                blocks.text_block(record.traceback)
        return
    st.error(f"The episode ended with an error whose root cause is {escape.md(record.root.one_line())} · a "
             f"failure of {whose}. Raised as {escape.md(record.one_line())} (the file's `error`, its `cause` "
             "chain).")
    with st.expander(f"The chain of {len(record.chain())} errors and the traceback", icon=":material/bug_report:"):
        for n, link in enumerate(record.chain()):
            st.markdown(f"{n + 1}. {escape.md(link.one_line())}")
        if record.traceback:
            blocks.text_block(record.traceback)
        else:
            st.caption("The file records no traceback.")


def header(run: ares_viewer.Run, episode: model.Episode) -> None:
    # "completed" says the episode ended normally, not that it solved the task: the reward says that.
    end = ending.of(episode)  # the episode's one explanation (analysis.ending), as every surface shows it
    verdict = "" if episode.total_reward is None else (
        " :green-badge[solved]" if episode.total_reward > 0 else " :red-badge[not solved]")
    flags = "".join(f" {escape.badge('orange', flag.split(':', 1)[0])}" for flag in end.flags)
    st.markdown(f"### {escape.line(episode.task_name)} {readable.outcome_badge(episode.outcome.value)}{verdict}{flags}")
    for flag in end.flags:  # a success a behaviour flag qualifies: the reward may not mean the task was solved
        name, evidence = flag.split(": ", 1)
        st.warning(f"Solved, but flagged {escape.code(name)}: {escape.line(evidence)}. The reward may not mean the "
                   "task was solved (docs/behaviours.md).", icon=":material/flag:")
    if end.failing_tests:
        st.markdown(f"**Failing tests** · {escape.line(end.tests_words())}")
    blocks.figures([("Reward", readable.fmt(episode.total_reward)), ("Actions", f"{episode.num_actions:,}"),
                     ("Duration", readable.measure(episode.duration_s, ".0f", "s")),
                     ("Cost", render.cost_text(episode.total_cost)
                      + render.steps_sum_note(episode, "cost", "${:.4f}")),
                     ("Prompt tokens", readable.fmt(episode.prompt_tokens, ",")
                      + render.steps_sum_note(episode, "prompt_tokens", "{:,.0f}")),
                     ("Generated tokens", readable.fmt(episode.generated_tokens, ",")
                      + render.steps_sum_note(episode, "generated_tokens", "{:,.0f}"))])
    if episode.error:
        error_panel(episode)
    if episode.truncated:
        limit = escape.line(episode.metadata.get("truncated_by") or "step limit")
        st.warning(f"The {limit} ended this episode (truncated).")
    if episode.read_in_part:
        st.warning(f"This file was {escape.md(episode.read_in_part)}. The episode shows what was read.")
    for warning in episode.warnings:
        st.caption(f"⚠ {escape.md(warning)}")
    st.caption(" · ".join([escape.code(episode.episode_id), escape.line(episode.path), *format_facts(episode)]))
    snapshot_problems.show(episode)
    format_details(episode)
    other_attempt(run, episode)
    landmarks(episode)


def other_attempt(run: ares_viewer.Run, episode: model.Episode) -> None:
    """A link to the Compare page with the best other attempt at the same task (a solved one when there is)."""
    other = run.other_attempt(episode.episode_id) if episode.episode_id in run else None
    if other is None:
        return
    reward = choosers.episode_rows(run, [other]).get(other, {}).get("total_reward")
    solved = reward is not None and reward == reward and reward > 0  # None: no reward; NaN: unscored
    failed = episode.total_reward is None or episode.total_reward <= 0
    # a success a behaviour flag qualifies (touched_tests) is offered with its flag named, never as a plain solution
    flags = [f.split(":", 1)[0] for f in ending.of(run.episode(other)).flags] if solved and failed else []
    what = "a solved attempt" if solved and failed else "another attempt"
    what += f" flagged {', '.join(flags)}" if flags else ""
    st.page_link(pages.path("compare"), icon=":material/compare_arrows:",
                 label=f"Compare with {what} at this task ({escape.line(render.short_id(other))}, "
                       f"reward {readable.fmt(reward)})",
                 query_params=state.params(episode=episode.episode_id, other=other, step=None))


def landmarks(episode: model.Episode) -> None:
    """Buttons to the steps worth a first look: failed commands, a context rewrite, the slowest step, the end."""
    marks = episode.landmarks()
    if not marks:
        return
    cols = st.columns([1, 5])
    cols[0].caption("Worth a look")
    with cols[1]:
        for index, why in marks:
            command = episode.step(index).command
            shown = f" · {escape.code(command.splitlines()[0][:40])}" if command and command.strip() else ""
            st.button(f"step {index}: {escape.line(why)}{shown}", key=f"episode.landmark.{index}", on_click=go_to,
                      args=(index,), type="tertiary", icon=":material/arrow_right:")


def go_to(k: int) -> None:
    state.update(step=k, view=None)


def format_facts(episode: model.Episode) -> list[str]:
    """The format and the short facts it records beyond the common columns, as caption words."""
    meta = episode.metadata
    return [f"format {escape.line(episode.format)}"] + [
        f"{label} {escape.line(meta[key])}"
        for key, label in (("exit_status", "exit status"), ("api_calls", "API calls"), ("iteration", "iteration"),
                           ("split", "split"))
        if meta.get(key) not in (None, "")]


def format_details(episode: model.Episode) -> None:
    """What a format records beyond the common columns and the caption's facts: evaluation, submitted diff, group."""
    meta = episode.metadata
    evaluation = meta.get("evaluation")
    if isinstance(evaluation, dict):
        passed = evaluation.get("success")
        badge = "" if passed is None else (":green-badge[passed]" if passed else ":red-badge[failed]")
        st.markdown(f"**Evaluation** {badge} {escape.md(evaluation.get('rationale') or '')}")
        with st.expander("Evaluation details", icon=":material/fact_check:"):
            st.json(evaluation)
    answer_and_target(evaluation if isinstance(evaluation, dict) else {}, meta.get("target"))
    verdict = meta.get("verdict")
    if verdict:
        badge = (":green-badge[resolved]" if verdict == "resolved"
                 else escape.badge("red", str(verdict).replace("_", " ")))
        st.markdown(f"**SWE-bench evaluation** {badge} reward {episode.total_reward:g}, from "
                    f"{escape.code(posixpath.basename(meta.get('verdict_report') or ''))}")
    submission = meta.get("submission")
    if isinstance(submission, str) and submission.strip():
        with st.expander(f"Submission ({len(submission.splitlines())} lines)", icon=":material/difference:"):
            # its head and tail until "Show all": an expander's content is sent and drawn while it is closed
            blocks.long_text(submission, f"{episode.episode_id[:8]}.submission", language="diff")
    if meta.get("group"):
        st.page_link(pages.path("groups"), label="Compare with the other rollouts of its group",
                     icon=":material/group_work:", query_params=state.params())


def answer_and_target(evaluation: dict, target: object) -> None:
    """The answer the scorer judged beside the sample's target (Inspect AI), each saying where it comes from."""
    answer = evaluation.get("answer")
    if isinstance(target, list):
        target = "\n".join(map(str, target))
    if answer is None and target in (None, ""):
        return
    scorer = evaluation.get("scorer")
    cols = st.columns(2)
    with cols[0]:
        st.caption(f"**Answer**, as the scorer {escape.code(str(scorer)) + ' ' if scorer else ''}read it "
                   "(its score's `answer`)")
        blocks.text_block(readable.UNKNOWN if answer is None else str(answer))
    with cols[1]:
        st.caption("**Target**, the sample's `target`")
        blocks.text_block(readable.UNKNOWN if target is None else str(target))


def step_details(step: model.Step) -> None:
    """Format-specific fields of a step (stop reason, metrics, reward data, ...), folded away."""
    if step.extra:
        names = escape.line(", ".join(map(str, step.extra)))
        with st.expander(f"Step details: {names}", icon=":material/data_object:"):
            st.json(dict(step.extra))


def step_timeline(where: str, episode: model.Episode, k: int | None) -> None:
    """The step chart, step ``k`` shaded when it has a column (below the panes, so the step view opens above the
    fold, and drawn with them, so the shade follows every step); a click on a step goes to it."""
    labels = review_panel.step_labels(where, episode.episode_id)
    marks = tuple((step, tuple(names)) for step, names in sorted(labels.items()))
    svg, steps = timeline.step_timeline(where, episode.episode_id, marks)
    # Its still picture on the page's full runs (a page just opened draws the component a few frames after the
    # content), not on the panes' own reruns (a step moved: the component is there).
    page_run = st.session_state.get(_PAGE_RUN)
    still = st.session_state.get(_STILL_RUN) != page_run
    st.session_state[_STILL_RUN] = page_run
    timeline.show(svg, steps, k, step_list.TIMELINE_KEY, go_to, still=still)


# The page's full runs, counted (``show``); the last one whose timeline had its still picture.
_PAGE_RUN, _STILL_RUN = "episode.page_run", "episode.still_run"


def _messages(n: int) -> str:
    return f"{n:,} message{'' if n == 1 else 's'}"


def step_caption(step: model.Step, change: model.ContextChange | None) -> str:
    usage = step.usage
    parts = [f"step {step.index} ({step.kind.value})"]
    duration = readable.fmt(step.duration, ".1f")
    if duration != readable.UNKNOWN:  # unknown (the first request took no time of its own): left out, not "– s"
        parts.append(f"{duration} s")
    model_time, command_time = step.model_time, step.command_time
    if model_time is not None or command_time is not None:
        parts.append(f"model {readable.measure(model_time, '.1f', 's')} + "
                     f"command {readable.measure(command_time, '.1f', 's')}")
    if step.has_action:
        new = len(change.new) if change is not None else step.new_message_count
        parts += [f"{readable.fmt(usage.prompt_tokens, ',')} prompt / {readable.fmt(usage.generated_tokens, ',')} "
                  f"generated tokens", "cost " + ("$" if readable.fmt(step.cost) != readable.UNKNOWN else "")
                  + readable.fmt(step.cost, '.4f'),
                  f"context {_messages(step.context_len)} (+{new} new)"]
        if usage.cached_prompt_tokens:
            parts.append(f"{usage.cached_prompt_tokens:,} cached")
    if step.reward:
        parts.append(f"reward {step.reward:g}")
    return " · ".join(parts)


def _diff_against() -> None:
    state.update(diff="other" if st.session_state["episode.diff_against"] == "another episode" else None)


def response_diff(run: ares_viewer.Run, episode: model.Episode, k: int) -> None:
    """The response against the previous step's, or against the same step of another episode."""
    st.session_state["episode.diff_against"] = "another episode" if state.get("diff") == "other" else "previous step"
    against = st.radio("Response diff against", ["previous step", "another episode"], horizontal=True,
                       key="episode.diff_against", on_change=_diff_against)
    if against == "previous step":
        if k < 2:
            st.caption("The first action has no previous response.")
            return
        before, name = episode.step(k - 1).response, f"step {k - 1}"
    else:
        # The same task's best attempt that reaches step k first: the comparison that explains a failure.
        wanted = state.get("other")
        if wanted == episode.episode_id or (wanted is not None and wanted not in run):
            wanted = None
        best = run.queries.best_other
        other_id = wanted or best(episode.episode_id, same_task=True, min_actions=k)
        if other_id is None:
            other_id = (best(episode.episode_id, same_task=False, min_actions=k)
                        or best(episode.episode_id, same_task=True) or best(episode.episode_id, same_task=False))
            if other_id is not None:
                st.caption(f"No other attempt at this task reaches step {k}: pick an episode to compare with.")
        if other_id is None:
            st.caption("The run has no other episode.")
            return
        other_id = choosers.episode_choice(
            run, "Other episode", "episode.other", other_id, partners_of=episode.episode_id,
            exclude=episode.episode_id, narrow=True,
            on_change=lambda: state.update(other=st.session_state["episode.other"]))
        if other_id is None:
            return
        other = run.episode(other_id)
        if k >= len(other.steps):
            st.caption(f"That episode has no step {k}.")
            return
        before, name = other.step(k).response, f"{render.short_id(other_id)} step {k}"
    st.html(textdiff.to_html(before, episode.step(k).response, a_name=name, b_name=f"step {k}"))


def snapshot_refs(episode: model.Episode) -> dict[int, snapshots.SnapshotRef]:
    """The episode's recorded snapshots by step (none for a location without any)."""
    try:
        return {ref.step_index: ref for ref in snapshots.find(episode)}
    except (snapshots.SnapshotError, OSError, ValueError):
        return {}


def files_changed(episode: model.Episode, k: int, refs: dict[int, snapshots.SnapshotRef]) -> None:
    """How many files action ``k`` changed, linking to the Files page; a caption when that cannot be told."""
    if k not in refs:
        st.caption("No filesystem snapshots were recorded for this episode." if not refs else
                   "No filesystem snapshot at this step.")
        return
    try:
        diff = fsdiff.step_changes(episode, k)
    except LookupError as exc:
        st.caption(f"Files: {escape.md(exc)}.")
        return
    except (snapshots.SnapshotError, OSError, ValueError) as exc:
        st.caption(f"⚠ Cannot tell which files changed at this step: {escape.md(exc)}")
        return
    files = diff.file_changes()
    main = fsdiff.main_file(diff)  # None only when no file changed
    if not files or main is None:
        before = "the base image" if diff.old_step is None else f"step {diff.old_step}"
        st.caption(f"No files changed at this step (compared with {before}).")
        return
    old_name = "base" if diff.old_step is None else diff.old_step
    internals = fsdiff.version_control_only(diff)
    if internals:  # ``git add`` alone: no file of the work tree changed, so no file is opened for it
        words = f"This step changed version-control internals only ({fsdiff.internals_words(internals)})"
        st.page_link(pages.path("files"), label=words, icon=":material/difference:",
                     query_params=state.params(step=k, old=old_name, file=None))
        return
    st.page_link(pages.path("files"), label=f"{len(files)} file{'' if len(files) == 1 else 's'} changed at this step",
                 icon=":material/difference:",
                 query_params=state.params(step=k, old=old_name, file=main.path))


def final_state(episode: model.Episode, end: ending.Ending, refs: dict[int, snapshots.SnapshotRef]) -> None:
    """Links to the episode's final state: its files against the base image, and a re-verify in the sandbox."""
    if end.step is None:
        return
    if end.step not in refs:
        st.caption("No snapshot of the final state was recorded, so it cannot be re-verified in a sandbox.")
        return
    if end.submission is None:
        st.page_link(pages.path("files"), label="What the episode changed: its final files against the base image",
                     icon=":material/difference:", query_params=state.params(step=end.step, old="base", file=None))
    st.page_link(pages.path("sandbox"), label=f"Re-verify the final state (step {end.step}) in the Sandbox",
                 icon=":material/fact_check:", query_params=state.params(step=end.step, view=None, failed=None,
                                                                          diff=None))


def step_body(run: ares_viewer.Run, episode: model.Episode, k: int, refs: dict[int, snapshots.SnapshotRef]) -> None:
    """Step ``k``: what the model did first, then the prompt that led to it, then the deeper views."""
    step = episode.step(k)
    key = f"{episode.episode_id[:8]}.{k}"
    change = episode.context_change(k) if step.has_action else None
    st.caption(step_caption(step, change))
    if k == 0:
        st.markdown("#### First request")
        first = episode.observation(0) or []  # recorded even when no action followed it
        step_view.messages(first, f"{key}.first")
    else:
        if episode.call_step(k) != k:
            st.caption(f"Another command of step {episode.call_step(k)}'s model call: its response, tokens and cost "
                       "are there.")
        step_view.reasoning(step, key)
        step_view.response(step, key)
        activations_panel.step_panel(episode, k)
        step_view.output(step, key)
        end = ending.of(episode)
        if k == end.step:
            step_view.why_this_reward(end, key)
            final_state(episode, end, refs)
    step_details(step)
    if k in refs:
        st.page_link(pages.path("sandbox"), label=f"Restore step {k} into a live container", icon=":material/restore:",
                     query_params=state.params(step=k))
    files_changed(episode, k, refs)
    if k > 0:
        step_view.prompt_change(episode, k, change, key)
        if st.toggle("Response diff", value=True, key="episode.show_diff"):
            response_diff(run, episode, k)
        if st.toggle(f"Full context ({_messages(step.context_len)})", key="episode.show_context"):
            step_view.context(episode.context(k), f"{key}.context")
    if st.toggle("System prompt", key="episode.show_system"):
        blocks.long_text(episode.system_prompt, f"{episode.episode_id[:8]}.system", empty="(none)")


def _set_view() -> None:
    state.update(view="transcript" if st.session_state["episode.view"] == "Transcript" else None)


def view_control() -> None:
    """Step or Transcript: one step at a time, or every step top to bottom."""
    st.session_state["episode.view"] = "Transcript" if state.get("view") == "transcript" else "Step"
    st.segmented_control("View", ["Step", "Transcript"], key="episode.view", on_change=_set_view,
                         label_visibility="collapsed",
                         help="One step at a time, or every step top to bottom, a page of steps at a time")


def unknown_step(episode: model.Episode) -> str | None:
    """What is wrong with the step the URL names (None when it names one of the episode's steps, or none)."""
    return state.number_problem("step", 0, len(episode.steps) - 1)


@st.fragment
def panes(where: str, episode_id: str) -> None:
    """Find in the episode, then the step list beside the step view, or the transcript a page of steps at a time;
    reruns alone when the step changes."""
    run = loaders.load_run(where)
    episode = run.episode(episode_id)
    hits = reader.find_bar(where, episode, lead=view_control)
    k = step_list.current(episode)
    if state.get("view") == "transcript":
        reader.transcript(episode, hits)
        step_timeline(where, episode, k)
        return
    refs = snapshot_refs(episode)
    problem = unknown_step(episode)
    left, right = st.columns([1, 1], gap="medium")  # room for the list's commands (#33)
    with left:
        step_list.show(episode, k, review_panel.step_labels(where, episode.episode_id),
                       hits=[hit.step for hit in hits.hits] if hits else ())
    with right:
        step_list.navigation(episode, k)
        if problem:
            st.error(f"{problem} Pick a step in the list or with the buttons.", icon=":material/search_off:")
        else:
            step_body(run, episode, k, refs)
            queue_panel.step_panel(run, episode, k)
            review_panel.step_panel(where, episode, k)
    step_timeline(where, episode, None if problem else k)
    step_list.drawn(state.get("step") if problem else k)


def show(run: ares_viewer.Run, where: str, episode: model.Episode) -> None:
    """The page for one episode of ``run`` (opened from ``where``): its header, then the step list and step view, the
    step timeline, and under it the decisive-step panel (below the fold, so the step view opens above it)."""
    st.session_state[_PAGE_RUN] = st.session_state.get(_PAGE_RUN, 0) + 1
    header(run, episode)
    step_list.keys()
    blocks.copy_buttons()
    panes(where, episode.episode_id)
    decisive_panel.show(episode)


run = choosers.current_run()
episode_id = choosers.episode_picker(run, "episode.pick", reset={"step": 1}, first_failed=True, say_unknown=True)
show(run, loaders.location(state.get("run")), choosers.read_episode(run, episode_id))
