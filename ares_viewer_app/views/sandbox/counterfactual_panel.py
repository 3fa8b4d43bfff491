"""The Sandbox page's counterfactual panel: ask the configured model again from step k, with what it saw edited.

It offers ``counterfactual.run`` when a model endpoint is configured (``model_client.configured``: environment
variables or ``model.toml`` in the cache folder), and says how to configure one otherwise. The user edits the
messages the model saw after step k (the last message's text, or all of them as JSON), picks how many actions
the model may take, and runs it: a container restored at step k in the Docker engine, the endpoint asked, its
commands run there, the task's verifier asked when it submits. The new episode is written to a folder of its own
under the cache folder (``counterfactual.new_out_dir``), never the run folder, and opens in Compare against its
parent (``other_in`` in the link names its folder). When the endpoint or the container fails partway, the page
says why and still shows the actions done before it (the episode is written, ``errored``).

The page's last result is kept in the session under ``counterfactual.*`` keys; the endpoint's key is read from its
environment variable at the call and never shown.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import streamlit as st

from ares_viewer import counterfactual, model
from ares_viewer.counterfactual import model_client
from ares_viewer.runs import run
from ares_viewer_app.panels import chat, endpoint
from ares_viewer_app.routing import pages, state
from ares_viewer_app.text import escape, readable

MAX_STEPS = 30
_KEY = "counterfactual."
_ROLES = ("system", "user", "assistant", "tool")
_LAST, _JSON = "The last message's text", "All messages (JSON)"


@dataclasses.dataclass(frozen=True)
class Done:
    """A finished counterfactual, as the panel shows it."""

    parent_id: str
    step: int
    folder: str
    episode: model.Episode


def parse_messages(text: str) -> list[dict[str, Any]]:
    """Messages typed as JSON: a non-empty list of objects with a ``role`` and a text ``content``.

    Raises:
        ValueError: saying where and what is wrong.
    """
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    if not isinstance(value, list) or not value:
        raise ValueError("the messages must be a non-empty JSON list of objects like "
                         '{"role": "user", "content": "..."}')
    for i, message in enumerate(value, start=1):
        if not isinstance(message, dict):
            raise ValueError(f"message {i} is a {type(message).__name__}, not an object with role and content")
        if message.get("role") not in _ROLES:
            raise ValueError(f"message {i}: role must be one of {', '.join(_ROLES)}, not {message.get('role')!r}")
        if not isinstance(message.get("content"), str):
            raise ValueError(f"message {i}: content must be text")
    return value


def _how_to_configure() -> None:
    path = model_client.config_path()
    st.info("No model endpoint is configured, so counterfactuals are off. Point the app at an OpenAI-compatible "
            "chat-completions endpoint (vLLM, SGLang, llama.cpp's server, Ollama, a hosted API) with environment "
            "variables before starting it, or with a file it reads on every page load, "
            f"{escape.code(path)}:", icon=":material/model_training:")
    left, right = st.columns(2)
    left.code(f"export {model_client.URL_ENV}=http://127.0.0.1:8000/v1\n"
              f"export {model_client.MODEL_ENV}=my-model\n"
              f"# optional: the variable that holds the API key (never the key itself),\n"
              f"# or HTTP Basic auth in the URL: http://user:password@127.0.0.1:8000/v1\n"
              f"export {model_client.API_KEY_ENV_ENV}=MY_ENDPOINT_KEY\n"
              f"export {model_client.TIMEOUT_ENV}=120", language="bash")
    right.code('url = "http://127.0.0.1:8000/v1"\nmodel = "my-model"\napi_key_env = "MY_ENDPOINT_KEY"  # optional\n'
               "timeout_s = 120\n\n[request]  # optional: more fields of every request\ntemperature = 0.7\n"
               "max_tokens = 2048", language="toml")
    st.caption("The environment overrides the file setting by setting. See docs/sandbox.md, “Counterfactuals”.")


def _credentials(config: model_client.EndpointConfig) -> str:
    """Which credentials the requests carry, in words (the API key wins over a user name and password in the URL);
    never the key or the password."""
    user = config.url_user
    basic = None if user is None else f"HTTP Basic auth as user {escape.code(user)} (the password in the URL)"
    if config.api_key_env is None:
        return basic or "no API key"
    named = escape.code("$" + config.api_key_env)
    if config.key_is_set():
        return f"the API key from {named}" + ("" if user is None else " (it wins over the URL's user name and "
                                                                      "password, which are not sent)")
    return (f"no API key: {named} is not set in the server's environment" if basic is None else
            f"{basic}: {named} is not set in the server's environment")


def _endpoint(config: model_client.EndpointConfig) -> None:
    key = _credentials(config)
    st.markdown(f"Asks model {escape.code(config.model)} at {escape.code(config.shown_url)} with {key} "
                f"· timeout {config.timeout_s:g} s · configured by {escape.code(config.source)}")
    if config.api_key_env is not None and not config.key_is_set():
        st.warning(f"{escape.code('$' + config.api_key_env)} is not set: requests go without a key.")


def _edited(recorded: list[dict[str, Any]], where: str) -> list[dict[str, Any]] | None:
    """The messages as the user edited them (None, with an error shown, when the JSON does not validate)."""
    last_is_text = isinstance(recorded[-1].get("content"), str)
    modes = [_LAST, _JSON] if last_is_text else [_JSON]
    mode = st.radio("Edit", modes, horizontal=True, key=f"{_KEY}mode", label_visibility="collapsed")
    if mode == _LAST:
        role = escape.line(recorded[-1].get("role"))
        text = st.text_area(f"The last message ({role}) as the model will see it", value=recorded[-1]["content"],
                            height=220, key=f"{_KEY}last.{where}")
        return [*recorded[:-1], {**recorded[-1], "content": text}]
    shown = json.dumps(recorded, indent=2, ensure_ascii=False)
    text = st.text_area("The messages as JSON: a list of {role, content}", value=shown, height=360,
                        key=f"{_KEY}json.{where}")
    try:
        return parse_messages(text)
    except ValueError as exc:
        st.error(f"The messages do not validate: {escape.md(exc)}", icon=":material/data_object:")
        return None


def _run(episode: model.Episode, step: int, messages: list[dict[str, Any]], max_steps: int, verify: bool,
         config: model_client.EndpointConfig, engine: Any, session: str) -> None:
    folder = counterfactual.new_out_dir()
    with st.status(f"Counterfactual from step {step}…", expanded=True) as status:
        try:
            result = counterfactual.run(episode, step, edit=messages, client=config.client(), out_dir=folder,
                                        max_steps=max_steps, docker_client=engine, session=session, verify=verify,
                                        progress=lambda line: _say(status, line))
        except counterfactual.CounterfactualError as exc:  # partway: what was done is written, and shown below
            result = exc.result
            failure: BaseException | None = exc.__cause__ or exc
        except Exception as exc:  # the snapshot or the engine before anything ran: a message, never a traceback
            status.update(label="The counterfactual failed", state="error")
            st.error(f"{type(exc).__name__}: {escape.md(exc)}", icon=":material/error:")
            return
        else:
            failure = None
        new = run.load_episode(result.path)
        if failure is not None:
            status.update(label=f"The counterfactual failed after {new.num_actions} action(s), written",
                          state="error", expanded=False)
        else:
            status.update(label=f"Counterfactual from step {step}: {new.num_actions} action(s), written",
                          state="complete", expanded=False)
    st.session_state[f"{_KEY}done"] = Done(episode.episode_id, step, str(folder), new)


def _result(done: Done, parent: model.Episode) -> None:
    new = done.episode
    st.markdown(f"**Counterfactual from step {done.step}**, episode {escape.code(new.episode_id)} in "
                f"{escape.code(done.folder)}")
    if new.outcome is model.Outcome.ERRORED:
        st.error(f"It stopped on an error after {new.num_actions} action(s), which are kept: "
                 f"{escape.md(new.error or 'no reason recorded')}", icon=":material/error:")
    cols = st.columns(4)
    cols[0].metric("Actions", new.num_actions)
    cols[1].metric("Outcome", str(new.outcome))
    cols[2].metric("Reward (verified)" if new.total_reward is not None else "Reward", readable.fmt(new.total_reward))
    cols[3].metric("Parent's reward", readable.fmt(parent.total_reward))
    links = st.columns(2)
    links[0].page_link(pages.path("compare"), label="Compare with the parent episode", icon=":material/compare_arrows:",
                       query_params=state.params(episode=parent.episode_id, other=new.episode_id,
                                                 other_in=done.folder, row=None, step=None))
    links[1].page_link(pages.path("episode"), label="Open the new episode", icon=":material/open_in_new:",
                       query_params={"run": done.folder, "episode": new.episode_id, "step": "1"})
    for action in new.actions:
        first = action.command.splitlines()[0][:100] if action.command else "(no command: a format error)"
        with st.expander(f"Action {action.index}: {escape.line(first)}", expanded=action.index == 1):
            st.markdown("**Response**")
            st.code(action.response or "", language=None, wrap_lines=True)
            if action.command:
                st.caption(f"Exit code {escape.line(readable.fmt(action.returncode))}")
                st.code(action.output or "(no output)", language=None, wrap_lines=True)


def show(episode: model.Episode, step: int, engine: Any, session: str) -> None:
    """The panel for ``episode`` at ``step`` (the page's picked step), on ``engine``, labelled with ``session``."""
    st.subheader("Counterfactual: ask the model again from this step")
    st.caption("Edit what the model saw after the step, ask a model, and let it carry on in a container restored at "
               "the step. The result is a new episode linked to this one.")
    config = endpoint.configured_endpoint(_how_to_configure)
    if config is None:
        return
    _endpoint(config)
    seen = episode.observation(step)
    if seen is None:
        st.info(f"Step {step} ended the episode: the model was asked nothing after it. Pick an earlier step.")
    else:
        with st.expander(f"What the model saw after step {step}: {len(seen)} message(s)", icon=":material/chat:"):
            chat.messages(seen)
        where = f"{episode.episode_id}.{step}"
        messages = _edited([m.to_dict() for m in seen], where)
        cols = st.columns([1, 1, 2])
        max_steps = int(cols[0].number_input("At most this many actions", min_value=1, max_value=MAX_STEPS,
                                             value=counterfactual.DEFAULT_MAX_STEPS, key=f"{_KEY}max_steps"))
        verify = cols[1].toggle("Verify a submission", value=True, key=f"{_KEY}verify",
                                help="When the model submits, run the task's verifier for the reward")
        cols[2].write("")
        go = cols[2].button(f"Ask {escape.line(config.model[:40])} and continue", type="primary",
                            icon=":material/psychology:", key=f"{_KEY}go", disabled=messages is None)
        if go and messages is not None:
            _run(episode, step, messages, max_steps, verify, config, engine, session)
    done = st.session_state.get(f"{_KEY}done")
    if isinstance(done, Done) and done.parent_id == episode.episode_id:
        _result(done, episode)


def _say(status: Any, line: str) -> None:
    """A progress line of the run, shown in its status box."""
    status.markdown(escape.md(line))
