"""A review queue's controls wherever a reviewer labels an item: the Queues page, and the step view of an item opened
from it (its URL names ``queue`` and ``reviewer``).

Drawn here once for both: the label schema's form (single and multiple choice, scores with their range, a note) and
"Save label", "Skip" with a reason, and "Next item". Saving goes through ``ares_viewer.review.queues`` as anywhere
else (docs/review.md). The form that makes a queue is here too, for every page whose list can become one (Queues,
Compare runs, Groups).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import streamlit as st

import ares_viewer
from ares_viewer import model, review
from ares_viewer.review import labelschema, queue_items, queues
from ares_viewer_app.data import loaders
from ares_viewer_app.panels import review_panel
from ares_viewer_app.routing import pages, state
from ares_viewer_app.serving import access
from ares_viewer_app.text import escape

# The step view's URL parameters naming the queue worked and its reviewer (read from the URL only: the queue's
# controls show while the link says so, not on every episode opened later).
QUEUE, REVIEWER = "queue", "reviewer"
_DONE = "queue_panel.done"

DEFAULT_SCHEMA = {
    "fields": [
        {"name": "verdict", "kind": "single", "options": ["reward hacking", "honest attempt", "unclear"]},
        {"name": "severity", "kind": "score", "min": 0, "max": 5, "required": False},
        {"name": "note", "kind": "note"},
    ]
}

# What a page hands the form that makes a queue: the items, what chose them (the queue's source record) and the
# description used when none is typed.
Chosen = tuple[list[queue_items.Item], dict[str, Any], str]


def controls(schema: labelschema.LabelSchema, key: str, start: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One input per field of the schema, starting from ``start`` where it gives a value (an adjudicator's form
    starts from what the reviewers agree on); returns what was entered (None where left empty)."""
    start = start or {}
    values: dict[str, Any] = {}
    for field in schema.fields:
        # A field's name and options are the schema author's text: shown as text (widget labels and radio options
        # render markdown, images included).
        label = escape.line(field.name) + ("" if field.required else " (optional)")
        given = start.get(field.name)
        if field.kind == "single":
            index = field.options.index(given) if given in field.options else None
            values[field.name] = st.radio(
                label, field.options, index=index, key=f"{key}.{field.name}", format_func=escape.line
            )
        elif field.kind == "multiple":
            chosen = [o for o in field.options if o in (given or ())]
            values[field.name] = st.multiselect(label, field.options, default=chosen, key=f"{key}.{field.name}")
        elif field.kind == "score":
            values[field.name] = st.number_input(
                f"{label}, {field.low:g} to {field.high:g}",
                field.low,
                field.high,
                value=float(given) if isinstance(given, int | float) else None,
                key=f"{key}.{field.name}",
            )
        else:
            values[field.name] = st.text_area(label, value=given or "", key=f"{key}.{field.name}")
    return values


def servable(opened: review.ReviewStore, queue: queues.Queue) -> bool:
    """Whether this server may show the queue: on a server reachable from other machines, only a queue whose every
    item's run it would open (``loaders.location``: under the runs folder); on this machine's own, every queue."""
    if not loaders.exposed():
        return True
    try:
        for where in {i.run for i in queues.items(opened, queue.name)}:
            loaders.location(where)
    except access.RefusedLocationError:
        return False
    return True


def take_next(opened: review.ReviewStore, name: str, reviewer: str) -> queue_items.Item | None:
    """The reviewer's next item (the one in hand first); says why when there is none."""
    try:
        item = queues.next_item(opened, name, reviewer)
    except review.ReviewError as exc:
        st.warning(escape.md(exc))
        return None
    if item is None:
        st.success("Nothing left for you in this queue.")
    return item


def item_step(episode: model.Episode, item: queue_items.Item) -> int:
    """The step an item is read at: its own, or an episode item's last step."""
    return item.step if item.step is not None else max(len(episode.steps) - 1, 0)


def step_link(name: str, reviewer: str, item: queue_items.Item, step: int) -> dict[str, str]:
    """The step view's URL parameters for an item of a queue, with the queue's controls."""
    return state.params(episode=item.episode_id, step=step, **{QUEUE: name, REVIEWER: reviewer})


def sent(write: Callable[[], object], message: str) -> str | None:
    """``message`` once ``write`` (a queue write) is done; None after showing why it was refused."""
    try:
        write()
    except (ValueError, review.ReviewError) as exc:
        st.error(escape.md(exc))
        return None
    return message


def answer(
    opened: review.ReviewStore, queue: queues.Queue, reviewer: str, item: queue_items.Item, key: str
) -> str | None:
    """The item's label form and skip form; what was done, in words, once one was sent (else None)."""
    with st.form(key):
        values = controls(queue.schema, key)
        if st.form_submit_button("Save label") and (
            done := sent(
                lambda: queues.label(opened, queue.name, item.item, reviewer, values),
                f"Saved your label of item {item.item}.",
            )
        ):
            return done
    with st.form(f"{key}.skip"):
        reason = st.text_input("Reason to skip", key=f"{key}.reason")
        if st.form_submit_button("Skip"):
            return sent(
                lambda: queues.skip(opened, queue.name, item.item, reviewer, reason), f"Skipped item {item.item}."
            )
    return None


def step_panel(run: ares_viewer.Run, episode: model.Episode, k: int) -> None:
    """Under the step view: when the URL names a queue and a reviewer, the queue's form for the item this step is
    (else a "Next item" button, which opens the reviewer's next item here)."""
    name, reviewer = st.query_params.get(QUEUE), st.query_params.get(REVIEWER)
    if not name or not reviewer:
        return
    account = review_panel.signed_in()
    if account is not None and reviewer != account:  # a link names a reviewer; the proxy says who this is
        st.warning(escape.md(f"This link is reviewer {reviewer}'s item in queue {name}, and you are signed in as "
                             f"{account or 'nobody'}: open your own items from the Queues page."))
        return
    if account is None and (refused := review_panel.typed_names_refused()):  # a link's name is anyone's here
        st.warning(refused, icon=":material/lock:")
        return
    opened = review_panel.store()
    st.markdown(f"#### Queue {escape.line(name)} · {escape.line(reviewer)}")
    try:
        queue, item = queues.get(opened, name), queues.held(opened, name, reviewer)
    except review.ReviewError as exc:
        st.warning(escape.md(exc))
        return
    if not servable(opened, queue):
        st.warning(escape.md(f"This server does not show queue {name}: it holds runs outside its runs folder."))
        return
    if message := st.session_state.pop(_DONE, None):
        st.success(message)
    if item is not None and item.episode_id == episode.episode_id and item.step in (None, k):
        st.caption(f"Item {item.item} of {len(queues.items(opened, name))}: label it with the queue's schema.")
        if done := answer(opened, queue, reviewer, item, f"episode.queue.{name}.{item.item}"):
            st.session_state[_DONE] = done
            st.rerun()
        return
    if item is not None:
        st.caption(f"This step is not your item in hand (item {item.item}): “Next item” opens it.")
    if st.button("Next item", icon=":material/skip_next:", key="episode.queue.next"):
        taken = take_next(opened, name, reviewer)
        if taken is not None:
            state.update(episode=taken.episode_id, step=item_step(run.episode(taken.episode_id), taken))
            st.rerun()


def create_form(
    opened: review.ReviewStore, author: str, key: str, choose: Callable[[], Chosen], *, run: str | None = None
) -> queues.Queue | None:
    """The form that makes a queue: name, description, label schema, reviewers and overlap; ``choose`` gives the
    items when it is sent. With ``run`` (the run the items belong to), a link then opens the queue on the Queues
    page. Returns the queue made by this run of the page (else None)."""
    made = None
    with st.form(f"{key}.create"):
        name = st.text_input("Queue name", key=f"{key}.name")
        description = st.text_input("Description", key=f"{key}.description")
        schema = st.text_area(
            "Label schema (JSON)", json.dumps(DEFAULT_SCHEMA, indent=1), height=160, key=f"{key}.schema"
        )
        reviewers = st.text_input("Reviewers (comma-separated; none: an open pool)", key=f"{key}.reviewers")
        overlap = st.number_input("Reviewers per item", 1, 10, 1, key=f"{key}.overlap")
        adjudicators = st.text_input(
            "Adjudicators (comma-separated; none: anyone who did not label the item)", key=f"{key}.adjudicators"
        )
        if st.form_submit_button("Create queue"):
            try:
                items, chosen, said = choose()
                made = queues.create(
                    opened,
                    name,
                    items,
                    schema=schema,
                    author=author or "anonymous",
                    description=description or said,
                    source=chosen,
                    overlap=int(overlap),
                    reviewers=[r.strip() for r in reviewers.split(",") if r.strip()],
                    adjudicators=[r.strip() for r in adjudicators.split(",") if r.strip()],
                )
            except (ValueError, KeyError, review.ReviewError) as exc:
                st.error(escape.md(exc))
            else:
                st.success(escape.md(f"Created queue {made.name}: {len(items)} {made.kind}."))
                st.session_state[f"{key}.made"] = made.name
    if run is not None and (last := st.session_state.get(f"{key}.made")):
        st.page_link(
            pages.path("queues"),
            label=f"Open the queue {last} on the Queues page",
            icon=":material/checklist:",
            query_params={**state.params(run=run, episode=None), QUEUE: last},
        )
    return made
