"""The model endpoint the operator configured, and what a panel says when there is none (the Episode
page's decisive step, the Behaviours page's rubric search, the Sandbox's counterfactual)."""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from ares_viewer.counterfactual import model_client
from ares_viewer_app.text import escape


def how_to_set_endpoint() -> str:
    """What a panel that needs a model endpoint says is missing and how to set it (markdown; the rubric search and
    the decisive-step panel say it alike)."""
    return (
        f"a model endpoint, which the server's operator sets: {escape.code(model_client.URL_ENV)} and "
        f"{escape.code(model_client.MODEL_ENV)} in the server's environment, or "
        f"{escape.code(model_client.config_path())} (docs/settings.md)"
    )


def configured_endpoint(unconfigured: Callable[[], None]) -> model_client.EndpointConfig | None:
    """The model endpoint the user configured; None after showing why not (an unusable configuration's error, or
    ``unconfigured()`` when there is none)."""
    try:
        config = model_client.configured()
    except model_client.ConfigError as exc:
        st.error(f"The model configuration is not usable: {escape.md(exc)}", icon=":material/settings_alert:")
        return None
    if config is None:
        unconfigured()
    return config
