"""Groups: the rollouts of one prompt side by side with their rewards.

Runs whose format samples each prompt several times (Tinker rollout summaries) have groups; the
page is a deep link through the ``episode`` parameter: it shows that episode's group.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

import ares_viewer
from ares_viewer import model
from ares_viewer.analysis import groups, plots
from ares_viewer.review import queue_items
from ares_viewer_app.panels import chat, choosers, queue_panel, review_panel
from ares_viewer_app.routing import pages, state
from ares_viewer_app.text import escape, readable

# Rollouts per row of side-by-side columns; a group of 8 wraps into two rows.
_PER_ROW = 4
# Characters of each response shown before "show long texts in full".
_RESPONSE_CHARS = 2_000


def group_label(row: pd.Series) -> str:
    return (f"{row['group']} · {row['rollouts']} rollouts · mean reward {readable.fmt(row['mean_reward'])} · "
            f"spread {readable.fmt(row['reward_spread'])} · {row['task_name']}")


def pick_group(found: groups.RunGroups, order: str) -> str:
    """The group of the episode the view names (else the first group in ``order``), with a select box to change
    it: the first ``choosers.CHOICES`` groups in that order, and the named one."""
    table = found.table(order, limit=choosers.CHOICES)
    current = found.group_of(state.get("episode") or "")
    if current is not None and current not in set(table["group"]):
        table = pd.concat([found.table(order, groups=[current]), table], ignore_index=True)
    labels: dict[str, str] = {row["group"]: group_label(row) for _, row in table.iterrows()}
    if current is None or current not in labels:
        current = str(table["group"].iloc[0])
        state.update(episode=found.rollouts(current)["episode_id"].iloc[0], step=None)
    st.session_state["groups.pick"] = current

    def changed() -> None:
        chosen = st.session_state["groups.pick"]
        state.update(episode=found.rollouts(chosen)["episode_id"].iloc[0], step=None)

    st.selectbox("Group", list(labels), format_func=labels.__getitem__, key="groups.pick", on_change=changed)
    return current


def rollout_card(run: ares_viewer.Run, row: pd.Series, full: bool) -> None:
    """One rollout: reward and outcome, then what it answered at each step."""
    episode: model.Episode = run.episode(row["episode_id"])
    traj = f"traj {int(row['traj_idx'])}" if "traj_idx" in row and pd.notna(row["traj_idx"]) else row["episode_id"]
    st.markdown(f"**{escape.line(traj)}** {readable.outcome_badge(episode.outcome.value)} · reward "
                f"**{readable.fmt(episode.total_reward)}**")
    st.caption(f"{episode.num_actions} action(s) · {readable.fmt(episode.generated_tokens, ',')} generated tokens")
    for step in episode.actions:
        if episode.num_actions > 1:
            st.caption(f"step {step.index}" + (f" · reward {step.reward:g}" if step.reward else ""))
        text = step.response if full or len(step.response) <= _RESPONSE_CHARS else (
            step.response[:_RESPONSE_CHARS] + f"\n[… {len(step.response) - _RESPONSE_CHARS:,} more characters]")
        st.code(text or "(empty response)", language=None, wrap_lines=True)
        if step.observation_text and step.index < episode.num_actions:
            st.caption(f"→ {escape.line(step.observation_text[:200])}")
        details = {k: v for k, v in step.extra.items() if k in ("stop_reason", "metrics", "reward_data")}
        if details:
            st.json(details, expanded=False)
    st.page_link(pages.path("episode"), label="Open in the episode view", icon=":material/open_in_new:",
                 query_params=state.params(episode=row["episode_id"], step=1))


def queue_form(run: ares_viewer.Run, group: str, members: pd.DataFrame) -> None:
    """The form "Make a review queue of these rollouts": the group's rollouts, one episode item each."""
    opened = review_panel.store()
    if not opened.writable:
        return
    with st.expander("Make a review queue of these rollouts", icon=":material/playlist_add:"):
        author = review_panel.author_input()
        ids = [str(i) for i in members["episode_id"]]

        def choose() -> queue_panel.Chosen:
            said = f"The {len(ids)} rollouts of group {group}"
            return queue_items.episode_items(run, ids), {"group": group}, said

        queue_panel.create_form(opened, author, "groups.queue", choose, run=state.get("run") or run.location)


def show(run: ares_viewer.Run) -> None:
    """The page for ``run``: its groups of rollouts of one prompt, side by side."""
    found = groups.RunGroups(run)
    if not found.exist():
        st.info("This run has no groups. Groups are several rollouts of the same prompt, as Tinker rollout summaries "
                "record them (`group_idx`), or several attempts at the same task (two or more episodes with one "
                "`task_name`); open such a run to compare its rollouts side by side.")
        return
    if found.key == groups.BY_TASK:
        st.caption("This run records no groups of its own: each group here is the attempts at the same task.")
    totals = found.totals()
    shown = (f" · the first {choosers.CHOICES} in this order to choose from" if totals["groups"] > choosers.CHOICES
             else "")
    st.caption(f"{totals['groups']:,} groups · {totals['rollouts']:,} rollouts · "
               f"{totals['uniform']:,} group(s) whose rollouts all scored the same{shown}")
    order = st.segmented_control("Sort groups by", groups.SORTS, default=groups.SORTS[0], key="groups.sort",
                                 required=True, help="Reward spread first: the groups whose rollouts scored "
                                                     "differently, which are the ones a group-relative advantage "
                                                     "learns from")
    group = pick_group(found, order or groups.SORTS[0])
    members = found.rollouts(group)
    first = run.episode(members["episode_id"].iloc[0])
    with st.expander(f"Prompt ({len(first.context(1)) if first.num_actions else 0} message(s))", expanded=True):
        if first.num_actions and first.context(1):
            chat.messages(first.context(1))
        else:
            st.caption("The rollouts recorded no prompt (no traces in the file).")
        if first.system_prompt:
            st.caption("System prompt")
            st.code(first.system_prompt, language=None, wrap_lines=True)
    event = st.plotly_chart(plots.group_rewards(members), key="groups.rewards", on_select="rerun",
                            selection_mode="points")
    points = event["selection"]["points"] if event and event.get("selection") else []
    for point in points:
        if isinstance(point.get("customdata"), str):
            choosers.go_to_episode(point["customdata"])
    queue_form(run, group, members)
    full = st.toggle("Show long responses in full", key="groups.full")
    for start in range(0, len(members), _PER_ROW):
        for column, (_, row) in zip(st.columns(_PER_ROW), members.iloc[start: start + _PER_ROW].iterrows(),
                                    strict=False):
            with column:
                rollout_card(run, row, full)


run = choosers.current_run()
st.title("Groups")
show(run)
