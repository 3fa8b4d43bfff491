"""Queues: review sessions as a team. Create a queue from the overview's filters (or a search, or a label), take the
next item as a reviewer, label it with the queue's schema or skip it, follow progress, adjudicate disagreements and
download the finished set (see docs/review.md). A link naming ``queue`` (from Compare runs or Groups, which make
queues with the same form) opens that queue."""

from __future__ import annotations

import functools
import json

import streamlit as st

import ares_viewer
from ares_viewer import review
from ares_viewer.analysis.behaviours import flag_queries
from ares_viewer.review import queue_export, queue_items, queues
from ares_viewer.runs.index import queries
from ares_viewer_app.panels import choosers, flag_panel, queue_panel, review_panel, tables
from ares_viewer_app.routing import pages, state
from ares_viewer_app.text import escape, readable


def chosen_items(run: ares_viewer.Run, opened: review.ReviewStore, source: str) -> queue_panel.Chosen:
    """The items a new queue gets, what chose them (kept with the queue) and that in words."""
    items, chosen = _chosen(run, opened, source)
    return items, chosen, describe(chosen)


def _chosen(run: ares_viewer.Run, opened: review.ReviewStore, source: str) -> tuple[list, dict]:
    if source == "search":
        query = str(state.get("q") or "").strip()
        if not query:
            raise ValueError("no search: run one on the Search page first")
        return queue_items.search_items(run, query, regex=bool(state.get("regex"))), {"search": query}
    tasks, outcomes, labels = state.get_list("task"), state.get_list("outcome"), state.get_list("label")
    contains, reason, flags = str(state.get("contains") or ""), state.get("reason"), state.get_list("flag")
    picked = {"task": tasks, "outcome": outcomes, "contains": contains, "reason": reason, "label": labels}
    if source == "label":
        if not labels:
            raise ValueError("no label picked: choose one in the overview's Label filter")
        found = [i for name in labels for i in queue_items.label_items(opened, run, name)]
        return queue_items.step_items(run, ((i.episode_id, i.step) for i in found)), {"label": labels}
    ids = None
    if labels:
        by_episode = review_panel.labels_by_episode(run)
        ids = [e for e, names in by_episode.items() if names & set(labels)]
    if flags:
        try:
            ids = flag_panel.among(run, flags, ids)
        except flag_queries.NotBuiltError:
            raise ValueError("the overview's Behaviour filter needs the run's flags: read them first") from None
        picked["flag"] = flags
    try:
        reward = state.number_range(raw) if (raw := state.get("reward")) else None
    except ValueError as exc:
        raise ValueError(f"the overview's reward filter ({raw}): {exc}") from None
    picked["reward"] = raw
    filters = queries.Filters(
        tasks=tasks,
        outcomes=outcomes,
        reward=reward,
        text=contains,
        reason=reason,
        episode_ids=ids,
    )
    return queue_items.filter_items(run, filters), {"filters": {k: v for k, v in picked.items() if v}}


def describe(chosen: dict) -> str:
    """What chose a queue's items, in words (a queue's description when none is typed)."""
    picked = chosen.get("filters", chosen)
    return "Chosen by " + (
        "; ".join(f"{k}: {', '.join(v) if isinstance(v, list) else v}" for k, v in picked.items()) or "no filter"
    )


def create_form(run: ares_viewer.Run, opened: review.ReviewStore, author: str) -> None:
    with st.expander("New queue", icon=":material/playlist_add:", expanded=not queues.all_queues(opened)):
        source = st.radio(
            "Items",
            ["filters", "search", "label"],
            horizontal=True,
            key="queues.source",
            format_func={
                "filters": "the overview's filters (episodes)",
                "search": "the last search (steps)",
                "label": "the overview's label (steps)",
            }.get,
        )
        if source == "filters" and state.get_list("flag"):
            flag_panel.ready(run, "queues")  # the Behaviour filter asks the run's flags: read them now if needed
        made = queue_panel.create_form(opened, author, "queues", lambda: chosen_items(run, opened, source))
        if made is not None:
            st.session_state["queues.queue"] = made.name


def work(run: ares_viewer.Run, opened: review.ReviewStore, queue: queues.Queue, reviewer: str) -> None:
    st.subheader("Your next item")
    if not reviewer:
        st.info("Type your name above to take items from this queue.")
        return
    holding = st.session_state.get("queues.holding")
    if st.button("Next item", icon=":material/skip_next:", key="queues.next") or holding == (queue.name, reviewer):
        item = queue_panel.take_next(opened, queue.name, reviewer)
        if item is None:
            st.session_state.pop("queues.holding", None)
            return
        st.session_state["queues.holding"] = (queue.name, reviewer)
        show_item(run, opened, queue, reviewer, item)


def show_item(
    run: ares_viewer.Run, opened: review.ReviewStore, queue: queues.Queue, reviewer: str, item: queue_items.Item
) -> None:
    episode = choosers.read_episode(run, item.episode_id)
    step = queue_panel.item_step(episode, item)
    st.markdown(
        f"**Item {item.item}** · {escape.line(episode.task_name or '?')} · "
        f"{escape.code(item.episode_id)} · step {step} · reward {readable.fmt(episode.total_reward)} · "
        f"{readable.outcome_badge(str(episode.outcome))}"
    )
    st.page_link(
        pages.path("episode"),
        label="Open this step in the step view (with this queue's form)",
        icon=":material/open_in_new:",
        query_params=queue_panel.step_link(queue.name, reviewer, item, step),
    )
    if step >= 1:
        st.text(readable.clip(episode.step(step).response, False))
    if done := queue_panel.answer(opened, queue, reviewer, item, f"queues.label.{queue.name}.{item.item}"):
        st.session_state.pop("queues.holding", None)
        st.session_state["queues.saved"] = done
        st.rerun()


def progress(opened: review.ReviewStore, queue: queues.Queue) -> None:
    found = queues.status(opened, queue.name)
    st.caption(
        f"{found['items_complete']} of {found['items']} items fully labelled · {found['labels_given']} of "
        f"{found['labels_wanted']} labels · {found['items_decided']} decided · schema v{found['schema_version']}"
        + (f" · {found['changed']} changed since queued" if found["changed"] else "")
    )
    table = queues.progress(opened, queue.name)
    if len(table):
        tables.table(table, hide_index=True, key="queues.progress")
    for figure in queue_export.agreement(opened, queue.name):
        st.caption(escape.line(queue_export.figure_text(figure)))


def adjudicate(opened: review.ReviewStore, queue: queues.Queue, adjudicator: str) -> None:
    found = queue_export.disagreements(opened, queue.name)
    st.subheader(f"Disagreements ({len(found)})")
    if found:
        who = ", ".join(queue.adjudicators) if queue.adjudicators else "anyone who did not label the item"
        st.caption(escape.line(f"Decided by {who}."))
    for entry in found:
        said = "; ".join(f"{r}: {v.get(f)}" for r, v in entry["labels"].items() for f in entry["fields"])
        decided = entry["decision"]
        with st.expander(
            escape.line(
                f"Item {entry['item']} · {', '.join(entry['fields'])} · {said}"
                + (f" · decided by {decided['adjudicator']}" if decided else "")
            )
        ):
            key = f"queues.decide.{queue.name}.{entry['item']}"
            agreed = {k: v for k, v in entry["agreed_values"].items() if v not in (None, [])}
            st.caption(
                escape.line(
                    "The form starts from what the reviewers agree on"
                    + (f" ({', '.join(agreed)})" if agreed else " (no field)")
                    + "; a decision changes only the fields it sets, the others stay as agreed."
                )
            )
            if decided:
                st.caption(escape.line(f"Decided so far: {json.dumps(decided['values'], sort_keys=True)}"))
            start = {**entry["agreed_values"], **(decided["values"] if decided else {})}
            with st.form(key):
                entered = queue_panel.controls(queue.schema, key, start)
                reason = st.text_input("Why", key=f"{key}.why")
                # What the decision sets: the fields in dispute, and any other the adjudicator changed.
                values = {k: v for k, v in entered.items() if k in entry["fields"] or v != start.get(k)}
                if st.form_submit_button("Record decision", disabled=not adjudicator) and queue_panel.sent(
                    functools.partial(queues.decide, opened, queue.name, entry["item"], adjudicator, values, reason),
                    "decided",
                ):
                    st.rerun()


def download(opened: review.ReviewStore, queue: queues.Queue) -> None:
    st.subheader("Export")
    finished = queues.status(opened, queue.name)["finished"]
    fmt = st.radio("Format", ["JSONL", "Parquet"], horizontal=True, key="queues.format")
    if not finished:
        st.caption("The queue is not finished yet: the export holds the labels given so far.")

    def data() -> bytes:
        records = queue_export.export_records(opened, queue.name, unfinished=True)
        return queue_export.export_bytes(records, fmt.lower())

    st.download_button(
        f"Download the queue as {fmt}",
        data=data,
        file_name=f"queue-{queue.name}.{fmt.lower()}",
        icon=":material/download:",
        key="queues.download",
        on_click="ignore",
    )


def show(run: ares_viewer.Run) -> None:
    opened = review_panel.store()
    review_panel.problem()
    reviewer = review_panel.author_input()
    if opened.writable:
        create_form(run, opened, reviewer)
    found = [q for q in queues.all_queues(opened) if queue_panel.servable(opened, q)]
    if not found:
        st.info("No queues yet: narrow the overview to the episodes to review, then create one here.")
        return
    names = [q.name for q in found]
    if (linked := st.query_params.get(queue_panel.QUEUE)) in names:  # a link to one queue (Compare runs, Groups)
        st.session_state["queues.queue"] = linked
        del st.query_params[queue_panel.QUEUE]
    name = st.selectbox("Queue", names, key="queues.queue")
    queue = queues.get(opened, name)
    if queue.description:
        st.caption(escape.line(queue.description))
    if message := st.session_state.pop("queues.saved", None):
        st.success(message)
    progress(opened, queue)
    work(run, opened, queue, reviewer)
    adjudicate(opened, queue, reviewer)
    download(opened, queue)


run = choosers.current_run()
st.title("Queues")
show(run)
