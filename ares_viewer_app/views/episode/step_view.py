"""What one step shows, in reading order: the reasoning, the response, the output, (at the end) why the reward
is what it is, then what changed in the prompt. The episode page's step view and its transcript share these.

Long texts collapse to their head and tail with a "Show all" button; the whole text is sent only when asked
for. User text (responses, outputs, messages, errors) is shown as text: in code blocks, or escaped.
"""

from __future__ import annotations

import streamlit as st

from ares_viewer import model
from ares_viewer.analysis import ending
from ares_viewer.base import textdiff
from ares_viewer_app.panels import activations_panel, blocks
from ares_viewer_app.text import escape, readable

# A context longer than this many messages is shown a page of them at a time (the most recent page first).
CONTEXT_PAGE = 60


def messages(items: list[model.Message] | tuple[model.Message, ...], key: str, *,
             numbers: list[int] | range | None = None) -> None:
    """Chat messages as the model saw them: role, then the exact text (collapsed when long). With ``numbers``,
    each is labelled with its number: its position in a context, from 1."""
    for n, message in enumerate(items):
        extra = f" · tool call id {escape.line(message.tool_call_id)}" if message.tool_call_id else ""
        number = "" if numbers is None else f"message {numbers[n]:,} · "
        st.markdown(f"{number}**{escape.line(message.role)}**{extra} · {len(message.content):,} chars")
        blocks.long_text(message.content, f"{key}.{n if numbers is None else numbers[n]}")
        for call in message.tool_calls:
            blocks.text_block(f"{call.name}({call.arguments})", language="json")


def context_pages(total: int) -> list[tuple[int, int]]:
    """The pages of a context of ``total`` messages as ``(start, stop)`` slices in reading order: the last page
    holds the ``CONTEXT_PAGE`` most recent messages, the first whatever is left over at the start."""
    stops = range(total, 0, -CONTEXT_PAGE)
    return [(max(0, stop - CONTEXT_PAGE), stop) for stop in reversed(stops)]


def positions(items: list[model.Message] | tuple[model.Message, ...],
              within: list[model.Message]) -> list[int]:
    """The number of each of ``items`` in the context ``within`` (from 1): the messages are the episode's own
    objects, so each is found by identity, a repeated one at its next place."""
    places: dict[int, list[int]] = {}
    for n, message in reversed(list(enumerate(within, start=1))):
        places.setdefault(id(message), []).append(n)
    return [places[id(m)].pop() if places.get(id(m)) else 0 for m in items]


def context(items: list[model.Message] | tuple[model.Message, ...], key: str, *,
            numbers: list[int] | None = None) -> None:
    """Messages numbered by their position in their context (``numbers``; by default the whole context, 1 to N); a
    long list a page at a time (the most recent page first), every page reachable from a picker."""
    numbers = numbers if numbers is not None else list(range(1, len(items) + 1))
    pages = context_pages(len(items)) or [(0, 0)]
    page = len(pages) - 1
    if len(pages) > 1:
        page = st.selectbox(
            f"Messages ({len(items):,} in all)", range(len(pages)), index=page, key=f"episode.context_page.{key}",
            format_func=lambda p: (f"messages {numbers[pages[p][0]]:,}–{numbers[pages[p][1] - 1]:,}"
                                   + (" (the most recent)" if p == len(pages) - 1 else "")))
    start, stop = pages[page]
    if len(pages) > 1:
        st.caption(f"Messages {numbers[start]:,} to {numbers[stop - 1]:,} ({stop - start:,} of {len(items):,}); "
                   "pick another page above for the rest.")
    messages(items[start:stop], key, numbers=numbers[start:stop])


def reasoning(step: model.Step, key: str) -> None:
    """The model's reasoning for this response, where the recording has it: first, open, folds away."""
    text = step.reasoning
    if not text:
        return
    with st.expander(f"Reasoning ({len(text):,} characters)", expanded=True, icon=":material/psychology:"):
        blocks.long_text(text, f"{key}.reasoning")


def response(step: model.Step, key: str) -> None:
    """The response: its thought and the command it ran (or the whole text when it ran none)."""
    st.markdown("#### Response")
    if step.thought:
        blocks.long_text(step.thought, f"{key}.thought")
    if step.command is not None:
        blocks.long_text(step.command, f"{key}.command", language="bash")
    elif step.tool_calls:
        for call in step.tool_calls:
            blocks.text_block(f"{call.name}({call.arguments})", language="json")
    else:
        st.warning("No single bash command in this response: the agent did not run anything.")
        if (step.response or "").strip() != (step.thought or "").strip():  # the thought above is the whole text
            blocks.long_text(step.response, f"{key}.response")


def failure(step: model.Step) -> str | None:
    """How the step's command failed to finish ("timed out", "exception", "killed"), when the recording says."""
    return step.failure or ("timed out" if step.extra.get("timed_out") else None)


def output(step: model.Step, key: str) -> None:
    """What running the command gave: return code and output (or the message that came back instead)."""
    if step.returncode is None and step.output is None and not step.observation_text:
        return
    failed = failure(step)
    colour = "green" if step.returncode == 0 and not failed else "red"
    elided = f" · {step.output_elided:,} characters elided by the agent" if step.output_elided else ""
    note = " · format error" if step.format_error else ""
    badge = f" {escape.badge('orange', failed)}" if failed else ""
    code = escape.badge(colour, f"return code {readable.fmt(step.returncode)}")
    st.markdown(f"#### Output{badge} {code}{elided}{note}")
    text = step.output if step.output is not None else step.observation_text
    blocks.long_text(text, f"{key}.output", empty="(no output)")


def why_this_reward(end: ending.Ending, key: str) -> None:
    """The episode's outcome and reward in words, what was submitted and what the verifier said."""
    st.markdown("#### Why this reward")
    colour = "green" if end.reward is not None and end.reward > 0 else "red" if end.reward is not None else "gray"
    st.markdown(f":{colour}-badge[{'unscored' if end.reward is None else f'reward {end.reward:g}'}] "
                f"{escape.line(end.explanation)}")
    if end.submission is not None:
        lines = len(end.submission.splitlines())
        st.markdown(f"**Submitted diff** ({lines:,} lines, {escape.line(end.submission_source)})")
        blocks.long_text(end.submission, f"{key}.submission", language="diff", empty="(nothing submitted)")
    verifier = end.verifier
    if verifier is not None:
        code = "" if verifier.returncode is None else f" · exit code {verifier.returncode}"
        reward = "" if verifier.reward is None else f" · reward {verifier.reward:g}"
        st.markdown(f"**Verifier output**{code}{reward}")
        if verifier.error:
            st.error(f"The verifier failed: {escape.line(verifier.error)}")
        if verifier.output is not None:
            blocks.long_text(verifier.output, f"{key}.verifier", empty="(no output)")
        if verifier.reward_file is not None:
            st.caption(f"Reward file: {escape.line(verifier.reward_file.strip()) or '(empty)'}")
        if verifier.commands:
            with st.expander(f"Every verifier command ({len(verifier.commands)})", icon=":material/terminal:"):
                for n, command in enumerate(verifier.commands):
                    blocks.text_block(command.command, language="bash")
                    st.caption(f"return code {readable.fmt(command.returncode)}")
                    blocks.long_text(command.output, f"{key}.verifier.{n}", empty="(no output)")
    elif end.failing_tests:  # named by an evaluation report, not by a verifier run the recording holds
        sources = ", ".join(dict.fromkeys(t.source for t in end.failing_tests))
        st.caption(f"The failing tests are read from {escape.line(sources)}; the recording itself holds no verifier "
                   "run.")
    else:
        st.caption("The recording holds no verifier output (a recorder that keeps it writes a `verifier` entry).")


def prompt_change(episode: model.Episode, k: int, change: model.ContextChange, key: str) -> None:
    """What entered the model's context since its previous call, matched by content; what left it or changed."""
    step = episode.step(k)
    st.markdown("#### Prompt: new since the previous call")
    note, source = activations_panel.clipped_note(episode, k)
    st.caption(f"{change.summary()} (matched by content) · the model saw {step.context_len} message(s) in all{note}",
               help=source)
    if not change.extends:
        parts = [f"{len(change.dropped)} message(s) of the previous context are gone"]
        if change.rewritten:
            parts.append(f"{len(change.rewritten)} rewritten")
        if change.reordered:
            parts.append("kept messages reordered")
        st.warning(f"Earlier context was dropped or rewritten before this call: {', '.join(parts)}; "
                   f"{len(change.kept)} message(s) carried over.", icon=":material/content_cut:")
        if change.dropped and st.toggle(f"Show the {len(change.dropped)} dropped message(s)",
                                        key="episode.show_dropped"):
            st.markdown(f"##### Dropped messages ({len(change.dropped)}, numbered as in the previous call)")
            context(change.dropped, f"{key}.dropped", numbers=positions(change.dropped, episode.previous_context(k)))
        if change.rewritten and st.toggle(f"Show the {len(change.rewritten)} rewritten message(s)",
                                          key="episode.show_rewritten"):
            st.markdown(f"##### Rewritten messages ({len(change.rewritten)})")
            for before, after in change.rewritten:
                st.html(textdiff.to_html(before.content, after.content, a_name="before", b_name="after"))
        if change.new:  # under the dropped and rewritten ones: a heading says where the new ones start
            st.markdown(f"##### New messages ({len(change.new)})")
    if change.new:
        messages(change.new, f"{key}.new", numbers=positions(change.new, episode.context(k)))
    else:
        st.caption("No new message: the model answered the same context again.")
