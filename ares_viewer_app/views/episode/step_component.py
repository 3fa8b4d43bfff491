"""The Episode page's light components that show steps (the step list and the step timeline): Streamlit v2
components, each with a few lines of script, whose only message back is the step a click picked.

Each component is a root element of its own CSS class. Its ``draw(root, data)`` builds what it shows, and runs only
when ``data.drawing`` (a name of what is drawn) changes, so stepping does not build it again. Its ``mark(root,
data)`` runs on every update, for what moves from step to step. A click on an element carrying ``data-step`` sends
that step to Python, where it goes to the page's ``on_step`` before the page runs again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import streamlit as st

# The script every such component shares; the component's ``draw`` and ``mark`` functions come before it.
_MOUNT = """
export default function (component) {
  const { data, setTriggerValue, parentElement } = component;
  let root = parentElement.querySelector(".%(root)s");
  if (!root) {
    root = document.createElement("div");
    root.className = "%(root)s";
    parentElement.appendChild(root);
    root.addEventListener("click", (event) => {
      const step = event.target.closest?.("%(clickable)s")?.getAttribute("data-step");
      if (step !== null && step !== undefined) setTriggerValue("step", Number(step));
    });
  }
  if (root.getAttribute("data-drawn") !== data.drawing) {
    draw(root, data);
    root.setAttribute("data-drawn", data.drawing);
  }
  mark(root, data);
}
"""
_NO_MARK = "function mark(root, data) {}\n"


def register(name: str, root: str, clickable: str, draw: str, css: str, *, mark: str = _NO_MARK):
    """A component named ``name`` whose root element has the CSS class ``root``; ``draw`` and ``mark`` are the
    scripts of its ``draw(root, data)`` and ``mark(root, data)`` functions, ``clickable`` the CSS selector of the
    elements a click picks a step on (each with a ``data-step``)."""
    script = f"{draw}\n{mark}\n" + _MOUNT % {"root": root, "clickable": clickable}
    return st.components.v2.component(name, js=script, css=css, isolate_styles=False)


def show(component, key: str, data: Mapping[str, object], on_step: Callable[[int], None]) -> None:
    """Mount ``component`` with ``data`` (which names what it draws in ``drawing``); a click on a step calls
    ``on_step`` with that step before the page runs again."""

    def picked() -> None:
        step = (st.session_state.get(key) or {}).get("step")
        if step is not None:
            on_step(int(step))

    component(data=dict(data), key=key, on_step_change=picked)
