"""Chat messages as the model saw them (the Groups page and the Sandbox's counterfactual panel)."""

from __future__ import annotations

import streamlit as st

from ares_viewer import model
from ares_viewer_app.text import escape, readable


def messages(items: list[model.Message], *, full: bool = False) -> None:
    """Chat messages as the model saw them: role, then the exact text."""
    for message in items:
        extra = f" · tool call id {escape.code(message.tool_call_id)}" if message.tool_call_id else ""
        st.markdown(f"**{escape.line(message.role)}**{extra} · {len(message.content):,} chars")
        st.code(readable.clip(message.content, full), language=None, wrap_lines=True)
        for call in message.tool_calls:
            st.code(f"{call.name}({call.arguments})", language="json", wrap_lines=True)
