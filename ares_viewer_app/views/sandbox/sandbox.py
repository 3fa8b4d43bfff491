"""Sandbox: restore a step into a live container, replay the recorded steps, run commands, fork; ask a model again.

The URL names the run, the episode and the step (``?run=&episode=&step=``), like the episode page. The
container lives in the Docker engine; this page keeps only its handle, under page-prefixed session keys. The
browser keeps the sandbox session's id (a cookie), so after a reload the page lists that session's live
containers, with their age, to reattach to or remove.
Containers idle for ``sandbox_reaper.IDLE_TIMEOUT_S`` are removed (by one thread per server, ``sandbox_reaper``),
and every container is labelled, so ``ares-viewer sandbox cleanup`` finds whatever a crashed server left behind.

Below, the counterfactual panel (``counterfactual_panel``) asks a configured model again from the picked step.

On a server bound to a non-loopback address the page is off (a sandbox runs arbitrary commands on this
machine's engine) unless ``ARES_VIEWER_SANDBOX=1`` enables it.
"""

from __future__ import annotations

import dataclasses
import json
import time

import streamlit as st

from ares_viewer import container, model, sandbox, snapshots
from ares_viewer.model import render
from ares_viewer_app.data import loaders
from ares_viewer_app.panels import choosers, tables
from ares_viewer_app.routing import state
from ares_viewer_app.serving import sandbox_policy, sandbox_reaper
from ares_viewer_app.text import escape, readable
from ares_viewer_app.views.sandbox import counterfactual_panel

_KEY = "sandbox."  # every session key of this page starts with it
# The browser keeps the sandbox session id in this cookie, so a reload finds the session's containers again.
SESSION_COOKIE = "ares_viewer_sandbox_session"
_TABS = ("Replay", "Command", "Fork")


def _get(name: str, default=None):
    return st.session_state.get(_KEY + name, default)


def _set(**values) -> None:
    for name, value in values.items():
        st.session_state[_KEY + name] = value


def _forget() -> None:
    for name in ("box", "container_id", "restored_step", "replay", "command_result", "fork", "reattached"):
        st.session_state.pop(_KEY + name, None)


def _cookie_session() -> str | None:
    try:
        value = st.context.cookies.get(SESSION_COOKIE)
    except Exception:  # no browser behind this session
        return None
    return value if isinstance(value, str) and value.isalnum() and len(value) <= 64 else None


def _session() -> str:
    """This browser's sandbox session: the one its cookie names (kept across reloads), else a new one."""
    if _KEY + "session" not in st.session_state:
        _set(session=_cookie_session() or sandbox.new_session())
    session = _get("session")
    sandbox_reaper.server_sessions().add(session)
    return session


def _remember_session() -> None:
    """Have the browser keep the session id (a cookie for this browser session), so a reload finds it again."""
    session = _session()
    if session != _cookie_session():
        st.html(f"<script>document.cookie = '{SESSION_COOKIE}=' + {json.dumps(session)} + "
                "'; path=/; SameSite=Strict';</script>", unsafe_allow_javascript=True)


def _attach(info: sandbox.SandboxInfo, client) -> sandbox.Sandbox:
    """A handle on a live sandbox of this session found by its labels (after a reload)."""
    inspected = client.api.inspect_container(info.container_id)
    config, host = inspected.get("Config") or {}, inspected.get("HostConfig") or {}
    labels = config.get("Labels") or {}
    return sandbox.Sandbox(
        container_id=info.container_id, episode_id=info.episode_id or "", step=info.step or 0,
        session=info.session or _session(), image=config.get("Image") or info.image,
        workdir=config.get("WorkingDir") or "/", created_at=info.created_at,
        network=host.get("NetworkMode") not in (None, "", "none"),
        episode_path=labels.get(sandbox.LABEL_SOURCE, ""), client=client)


def _reattach_panel(client, episode_id: str) -> None:
    """The session's live containers (after a reload the page holds no handle): reattach to one, or remove them."""
    try:
        found = [i for i in sandbox.list_sandboxes(client, session=_session(), role=sandbox.ROLE)
                 if i.state != "removing"]
    except Exception as exc:  # the engine went away: say so, the rest of the page still works
        st.warning(f"Could not list this session's sandboxes: {exc}")
        return
    if not found:
        return
    now = time.time()
    with st.container(border=True, key=_KEY + "reattach"):
        st.markdown(f"**This session has {len(found)} live sandbox(es)** from before the page was reloaded:")
        for info in found:
            cols = st.columns([3, 2, 1, 1])
            restored = "" if info.step is None else f" · restored from step {info.step}"
            cols[0].markdown(f"`{info.short_id}` · episode `{render.short_id(info.episode_id or '?')}`{restored}")
            cols[1].caption(f"{info.state} · age {_age(info.age_s(now))}")
            if cols[2].button("Reattach", key=_KEY + "reattach." + info.short_id, icon=":material/link:",
                              disabled=info.state != "running"):
                box = _attach(info, client)
                _forget()
                _set(box=box, container_id=box.container_id, restored_step=box.step, reattached=True)
                if info.episode_id and info.episode_id != episode_id:
                    state.update(episode=info.episode_id, step=info.step)
                st.rerun()
            if cols[3].button("Remove", key=_KEY + "remove." + info.short_id, icon=":material/delete:"):
                client.api.remove_container(info.container_id, force=True)
                st.rerun()
        if len(found) > 1 and st.button("Remove them all", key=_KEY + "remove_all"):
            sandbox.remove_session(_session(), client)
            st.rerun()


def _age(seconds: float) -> str:
    minutes = seconds / 60
    return f"{seconds:.0f} s" if seconds < 60 else f"{minutes:.0f} min" if minutes < 120 else f"{minutes / 60:.1f} h"


def _pick_step(episode, steps: list[int]) -> int:
    """The recorded step the view names (a warning when the episode has no such step; the closest recorded one
    before it when that step has no snapshot), with a select box; the URL names the step picked."""
    step = choosers.recorded_step(episode, steps, steps[0])
    if state.get("step") is not None and state.get("step") != str(step):
        state.update(step=step)
    st.session_state[_KEY + "step_pick"] = step

    def changed() -> None:
        state.update(step=st.session_state[_KEY + "step_pick"])

    st.selectbox("Step to restore", steps, key=_KEY + "step_pick", on_change=changed,
                 format_func=lambda k: "0 — what the agent first saw" if k == 0 else f"{k} — after action {k}")
    return step


def _restore(episode, step: int, client, network: bool) -> None:
    old = _get("box")
    if old is not None:
        old.remove()
    _forget()
    with st.status(f"Restoring step {step}…", expanded=True) as status:
        try:
            box = sandbox.restore(episode, step, client=client, session=_session(), network=network,
                                  progress=status.write)
        except (sandbox.SandboxError, container.ContainerFilesError, snapshots.SnapshotError, LookupError) as exc:
            status.update(label="Restore failed", state="error")
            st.error(escape.md(exc))
            return
        status.update(label=f"Restored step {step} into {box.short_id}", state="complete", expanded=False)
    _set(box=box, container_id=box.container_id, restored_step=step)


def _container_panel(box: sandbox.Sandbox) -> bool:
    """The container's id, image, state and age, with Stop & remove; False once it is gone."""
    live = box.state()
    if live == "removed":
        _forget()
        st.info("The container is gone (removed after being idle, or by a cleanup). Restore the step again.")
        return False
    restored = _get("restored_step", box.step)
    at = box.step
    # One line of text, wrapped when narrow: metrics cut long values (an image name, "step 12 (from 3)") short.
    facts = (("Container", escape.code(box.short_id)), ("Image", escape.code(box.image)),
             ("State", escape.line(live)), ("Age", _age(time.time() - box.created_at)),
             ("Filesystem", f"step {at}" if at == restored else f"step {at} (restored from step {restored})"))
    st.markdown(" · ".join(f"**{name}** {value}" for name, value in facts))
    if live != "running":
        st.warning(f"The container is {live}: it was stopped or killed. Restore the step again.")
    if _get("reattached"):
        st.caption(f"Reattached after a reload: restored from step {box.step}; commands run before the reload may "
                   "have changed it since.")
    st.caption("Network " + ("on" if box.network else "off") + f" · session `{box.session}` · commands you run change "
               "the container: restore again for a clean copy of the recorded state.")
    if st.button("Stop & remove", icon=":material/delete:", key=_KEY + "remove"):
        box.remove()
        _forget()
        st.rerun()
    return True


def _replay(box: sandbox.Sandbox, episode) -> None:
    last = len(episode.steps) - 1
    if box.step >= last:
        st.caption("The container is at the episode's last step: nothing left to replay.")
        if _get("replay"):
            _replay_report(_get("replay"))
        return
    cols = st.columns(4)
    until = cols[0].number_input("Replay up to step", min_value=box.step + 1, max_value=last, value=last,
                                 key=_KEY + "until")
    normalize = cols[1].toggle("Normalise volatile text", value=True, key=_KEY + "normalize",
                               help="Timestamps, durations like 0.03s, temp names, hex ids and addresses compare equal")
    stop = cols[2].toggle("Stop at the first divergence", value=False, key=_KEY + "stop")
    check_fs = cols[3].toggle("Compare the filesystem", value=True, key=_KEY + "check_fs",
                              help="After each step, compare the container with the recorded snapshot (slower)")
    if st.button(f"Replay steps {box.step + 1}–{int(until)}", icon=":material/replay:", key=_KEY + "replay_go"):
        rows, results = [], []
        table = st.empty()
        with st.spinner("Replaying…"):
            for result in sandbox.replay(box, episode, until=int(until), normalize=normalize,
                                         stop_at_divergence=stop, compare_filesystem=check_fs):
                results.append(result)
                rows.append(result.row())
                tables.table(rows, where=table, hide_index=True, width="stretch")
        table.empty()
        _set(replay=results)
        if results:
            _set(box=dataclasses.replace(box, step=results[-1].step))
        st.rerun()
    results = _get("replay")
    if results:
        _replay_report(results)


def _replay_report(results: list[sandbox.StepReplay]) -> None:
    counts: dict[str, int] = {}
    for result in results:
        counts[str(result.status)] = counts.get(str(result.status), 0) + 1
    st.markdown("**Replay:** " + " · ".join(f"{n} {status.replace('_', ' ')}" for status, n in counts.items()))
    carried = sum(1 for r in results if r.diverged and not r.new_divergence)
    if carried:
        st.caption(f"{carried} step(s) only carry differences from an earlier step (column “carried”): they are "
                   "listed once, at the step where they appeared.")
    tables.table([r.row() for r in results], hide_index=True, width="stretch", key=_KEY + "replay_table")
    for result in results:
        if not result.new_divergence:
            continue
        what = result.status.value.replace("_", " ")
        with st.expander(f"Step {result.step}: {what}" + (f" — {escape.line(result.note)}" if result.note else "")):
            st.code(result.command or "", language="bash")
            if result.output_diff:
                st.markdown("Output (recorded → rerun)")
                st.code(result.output_diff, language="diff")
            fresh = result.new_changes
            if fresh:
                st.markdown(f"{len(fresh)} path(s) newly differ from the recorded snapshot"
                            + (f" ({len(result.carried)} more carried from step {result.carried_from})"
                               if result.carried else ""))
                st.code("\n".join(change.describe() for change in fresh), language=None)
                new_paths = {change.path for change in fresh}
                for diff in result.file_diffs:
                    if diff.path in new_paths:
                        st.code(sandbox.file_diff_text(diff), language="diff")


def _command_box(box: sandbox.Sandbox) -> None:
    with st.form(_KEY + "command_form"):
        command = st.text_area("Command (bash -lc, in the working directory, 60 s timeout)", key=_KEY + "command",
                               height=80, placeholder="git status && python3 -m pytest -q")
        if st.form_submit_button("Run", icon=":material/play_arrow:") and command.strip():
            _set(command_result=(command, box.run(command)))
    if _get("command_result"):
        command, result = _get("command_result")
        _show_result(result)


def _show_result(result: sandbox.CommandResult) -> None:
    line = f"exit code {readable.fmt(result.returncode)} · {result.duration_s:.2f} s"  # none when it could not run
    if result.error:
        st.error(escape.md(result.error))
    st.caption(line)
    st.code(result.output or "(no output)", language=None)


def _verifier_output(verdict: sandbox.VerifierResult) -> None:
    """What the verifier printed, with its exit code and time: why the reward is what it is."""
    result = verdict.result
    with st.expander(f"Verifier's output · exit code {readable.fmt(result.returncode)} · {result.duration_s:.1f} s",
                     expanded=True, icon=":material/fact_check:"):
        st.code(result.output or "(the verifier printed nothing)", language=None, wrap_lines=True)


def _fork(box: sandbox.Sandbox, episode) -> None:
    nxt = box.step + 1
    recorded = episode.step(nxt).command if nxt < len(episode.steps) else None
    st.caption(f"Run something else instead of step {nxt}'s recorded command, then compare the filesystem with "
               f"the recorded step {nxt} and ask the task's verifier for the reward." if recorded else
               "Run commands, then ask the task's verifier for the reward.")
    with st.form(_KEY + "fork_form"):
        command = st.text_area("Commands to run instead", value=recorded or "", height=160, key=_KEY + "fork_command")
        verify = st.checkbox("Run the task's verifier afterwards", value=True, key=_KEY + "fork_verify")
        if st.form_submit_button("Run fork", icon=":material/call_split:") and command.strip():
            with st.spinner("Running the fork…"):
                _set(fork=sandbox.fork(box, episode, command, run_verifier=verify))
    forked = _get("fork")
    if forked is None:
        return
    for result in forked.results:
        _show_result(result)
    if forked.verifier is not None:
        cols = st.columns(2)
        cols[0].metric("Fork's reward", readable.fmt(forked.reward))
        cols[1].metric("Recorded reward", readable.fmt(forked.recorded_reward))
        if forked.verifier.error:
            st.error(f"Verifier: {escape.md(forked.verifier.error)}")
        _verifier_output(forked.verifier)
    if forked.fs is not None:
        changes = list(forked.fs.changes)
        st.markdown(f"**Filesystem vs recorded step {forked.compared_with}:** {len(changes)} path(s) differ")
        if changes:
            st.code("\n".join(change.describe() for change in changes), language=None)
        for diff in forked.file_diffs:
            st.code(sandbox.file_diff_text(diff), language="diff")
    if forked.note:
        st.caption(escape.md(forked.note))


def show(episode: model.Episode) -> None:
    """The page for one episode: restore a step, then replay, run commands or fork; ask a model again."""
    steps = [ref.step_index for ref in snapshots.find(episode)]
    if not steps:
        st.info("This episode has no recorded snapshots, so there is nothing to restore.")
        return

    try:
        client = loaders.docker_engine()
    except sandbox.SandboxError as exc:
        st.error(f"Docker is unavailable, so sandboxes are too. {escape.md(exc)}")
        return
    sandbox_reaper.start(client)
    try:
        sandbox_reaper.reap_now(client)
    except Exception as exc:  # the engine went away since the client was made: say so, try a new client next time
        loaders.docker_engine.clear()
        st.error(f"Docker stopped answering: {escape.md(exc)}")
        return

    cols = st.columns([3, 1, 1])
    with cols[0]:
        step = _pick_step(episode, steps)
    network = cols[1].toggle("Network", value=False, key=_KEY + "network",
                             help="Off by default: the agent's commands are untrusted")
    cols[2].write("")
    if cols[2].button("Restore", type="primary", icon=":material/restore:", key=_KEY + "restore"):
        _restore(episode, step, client, network)

    _remember_session()
    if _get("box") is None:
        _reattach_panel(client, episode.episode_id)
    box = _get("box")
    if box is not None and box.episode_id != episode.episode_id:
        st.info(f"Your sandbox {box.short_id} holds episode {escape.line(render.short_id(box.episode_id))}; restore "
                "to replace it.")
    elif box is not None and _container_panel(box):
        box = _get("box")
        # A keyed tab bar keeps the tab a result came from: running a command or a fork reruns the page without
        # snapping back to the first tab.
        tabs = st.tabs(list(_TABS), key=_KEY + "tab", default=_TABS[0], on_change="rerun")
        with tabs[0]:
            _replay(box, episode)
        with tabs[1]:
            _command_box(box)
        with tabs[2]:
            _fork(box, episode)

    st.divider()
    counterfactual_panel.show(episode, step, client, _session())


st.title("Sandbox")
st.caption("Restore any recorded step into a live container, rerun the agent's commands, or try others.")
if not sandbox_policy.sandbox_enabled(st.get_option("server.address")):
    st.warning("The sandbox is off: this server listens on a non-local address, and a sandbox runs arbitrary "
               "commands on this machine's Docker engine. Set `ARES_VIEWER_SANDBOX=1` in the server's environment "
               "to enable it anyway.")
    st.stop()

current = choosers.current_run()
episode_id = choosers.episode_picker(current, _KEY + "episode_pick", reset={"step": 0})
show(choosers.read_episode(current, episode_id))
