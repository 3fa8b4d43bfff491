"""The page figures of issue #33, each beside its target: Chromium against a real ``streamlit run`` server.

Writes two 200-step episodes of one task (cumulative observations, as ARES writes them; ``testdata.synthetic``),
indexes them, serves the app (this checkout) and drives Debian's Chromium through Playwright:

- Compare of the two episodes, cold: the first page of a fresh server (episodes not parsed, nothing aligned), to
  the aligned-steps table drawn and to Streamlit idle; and the same for the two longest real episodes of the public
  real run in ``../shared/real-runs/`` (``--real``: real episodes differ from generated ones in what costs: long,
  distinct commands and outputs, heredocs), where it is present;
- the Episode page, warm (the episode parsed): a link to step 100 until the step is drawn (content, checked at every
  frame: ``chromium.wait``), until its step timeline is drawn, and until Streamlit is idle; and when the step view
  and the step list's current row reached the page, as the page itself recorded;
- the next step with ``j``: on a page that has settled (its last part, the timeline's component, drawn), from the
  key press to the next step drawn and idle;
- the transcript (the reader, paged) of the same episode, from a link to its first page drawn and idle;
- the overview of 1,000,000 vs 100 Tinker rollouts is not re-measured here (it needs ~1.1 GB of data and minutes
  of indexing): ``python3 -m benchmarks.bench_scale`` prints it;
- the floor: a Streamlit page of one element, served and drawn the same way (what no page here can beat); and the
  floor at a page's path: the same element as the page at ``/p`` of a two-page app. Both are served as the app is
  (``ares_viewer_app.serving.served``: the page names its server, so a link to a path asks no ``/p/_stcore/health``);
- the floor of the Episode page's elements: a page of the elements the Episode page draws at a middle step, in its
  layout (``like_episode``: its pickers, buttons, slider, toggles, a step list and timeline of the episode's steps
  as plain HTML, the step's texts, the review form, its columns and expanders) with fixed content, at ``/p``, to its
  step marker (last, as on the page) and to idle: a lower bound of the Episode page's content in this server and
  browser (``bench_real_pages`` opens it in a new tab);
- Inspect AI's time to open one sample of the same episode (``read_eval_log_sample``) from a ``.eval`` log written by
  Inspect's own writer, where ``inspect-ai`` is installed.

Run: ``python3 -m benchmarks.bench_targets [--actions 200] [--repeat 3]``. Each figure is the best of ``--repeat``.
With ``--real-pages [RUNS]``, then issue #46's figures on real long episodes (``benchmarks.bench_real_pages``).
"""

from __future__ import annotations

import argparse
import logging
import os
import pathlib
import shutil
import tempfile
import time

from benchmarks import bench_index, chromium
from testdata import synthetic

# The public real run (mini-swe-agent on SWE-bench, copied byte for byte: its SOURCES.md), beside the checkout.
# Beside the main checkout (``../shared``), or beside a worktree's folder of worktrees (``../../shared``).
REAL_RUN = next((found for up in (2, 3) if (found := pathlib.Path(__file__).resolve().parents[up] / "shared"
                 / "real-runs" / "mswea2-deepseek-chat-dev").is_dir()),
                pathlib.Path(__file__).resolve().parents[2] / "shared" / "real-runs" / "mswea2-deepseek-chat-dev")

# The step timeline (``ares_viewer_app.views.episode.timeline``), drawn with step k shaded: the component (hover
# texts, clicks), or shown at all: the component or the still picture the page draws first (decoded).
_TIMELINE = """(k) => document.querySelector(`.ares-timeline [data-current-step="${k}"]`) !== null"""
_TIMELINE_SHOWN = """(k) => {
  const still = document.querySelector(`img.ares-timeline-picture[data-current-step="${k}"]`);
  return (still !== null && still.complete && still.naturalWidth > 0)
    || document.querySelector(`.ares-timeline [data-current-step="${k}"]`) !== null;
}"""


_STEP_LIST = ".ares-steps tr.current"
_PLOT = ".ares-timeline svg"


# A lower bound of the Episode page: the elements it draws at the middle step of an episode of ``steps`` steps, in
# its order and its layout (the same element containers, columns, expanders and form; 59 element containers and 30
# vertical blocks at step 57 of the real 115-step episode of ``bench_real_pages``, as the page draws them): the
# sidebar's pickers, the episode picker, the header, its closed submission expander, "Worth a look", the find bar,
# the step list, navigation, slider, the step's texts, diff toggles, the review form, the timeline and its still
# picture, the closed decisive-step expander. Every one has fixed content and no run is read; the step list and
# the timeline are plain HTML rather than components (lighter than the page's), the step marker last, as on the page.
_LIKE_EPISODE = """
import base64
import streamlit as st
st.set_page_config(layout="wide")  # as the app's
steps = {steps}
text = lambda n, k: '<pre style="white-space:pre-wrap">' + ("output line %d " % k) * (n // 14) + "</pre>"
rows = "".join(f"<tr><td>{{k}}</td><td>{{'action' if k else 'first'}}</td><td>{{k % 3}}</td>"
               f"<td>grep -n foo src/f{{k}}.py</td><td></td></tr>" for k in range(steps + 1))
bars = "".join(f'<rect x="{{k * 8}}" y="{{40 - k % 37}}" width="7" height="{{k % 37 + 1}}"/>' for k in range(steps + 1))
svg = f'<svg width="1000" height="262">{{bars}}</svg>'
with st.sidebar:
    st.selectbox("Run", ["long", "small-a"], key="run")
    st.selectbox("Open", ["folder", "file"], key="open")
    st.button("Reload the run", key="reload")
    st.markdown("115 episodes · 2 tasks")
pick = st.columns(3)
pick[0].selectbox("Episode", [f"episode-{{k:04d}} · calc__calc-3 · 0.0" for k in range(steps)], key="pick")
pick[1].text_input("Find episodes", key="find_episodes")
pick[2].toggle("Unsolved", key="unsolved")
st.markdown("### calc__calc-3 :green-badge[completed] :green-badge[solved]")
st.html('<div class="figures">' + "".join(f"<span><b>{{k * 7}}</b> figure {{k}}</span>" for k in range(6)) + "</div>")
st.caption("`long/calc__calc-3` · runs/long/calc__calc-3.traj.json · format mini-swe-agent · exit status Submitted")
st.markdown("**SWE-bench evaluation** :green-badge[resolved] reward 1, from `report.json`")
with st.expander("Submission (985 lines)"):
    st.html(text(2800, 0))
    st.button("Show all 41,379 characters", key="submission_all")
look = st.columns([1, 5])
look[0].caption("Worth a look")
for k in (3, 113, 115):
    look[1].button(f"step {{k}}: failed command (rc 1)", key=f"look{{k}}", type="tertiary")
st.html("<div hidden>" + "key script " * 330 + "</div>")  # the page's two scripts: shown as nothing
st.html("<div hidden>" + "copy script " * 100 + "</div>")
with st.container():
    bar = st.columns(5)
    bar[0].segmented_control("View", ["Step", "Transcript"], default="Step", key="view")
    bar[1].text_input("Find in this episode", key="find")
    left, right = st.columns(2)
    with left:
        top = st.columns([3, 2])
        top[0].toggle("Failed steps only", key="failed")
        pair = top[1].columns(2)
        pair[0].button(":material/keyboard_double_arrow_left:", key="prev_failed")
        pair[1].button(":material/keyboard_double_arrow_right:", key="next_failed")
        with st.container(key="steplist"):
            st.html(f'<div style="max-height:640px;overflow-y:auto"><table>{{rows}}</table></div>')
    with right:
        for column, name in zip(st.columns(4), ("First", "Prev", "Next", "Last")):
            column.button(name, icon=":material/chevron_right:", key=name)
        st.slider("Step", 0, steps, steps // 2, key="slider", label_visibility="collapsed")
        st.caption(f"step {{steps // 2}} (MID) · 19.6 s · 13,000 prompt / 150 generated tokens · context 113 messages")
        st.markdown("**Response**")
        st.html(text(800, 1))
        st.html(text(1000, 2))
        st.markdown("**Output** return code 1")
        st.html(text(1100, 3))
        st.caption("No filesystem snapshots were recorded for this episode.")
        st.markdown("**Prompt**: new since the previous call")
        st.caption("111 kept, 2 new, 0 dropped, 0 rewritten")
        st.markdown("**message 112** · assistant · 148 chars")
        st.html(text(800, 4))
        st.html(text(700, 5))
        st.markdown("**message 113** · tool · 1,826 chars")
        st.html(text(1900, 6))
        st.button("Show all 1,826 characters", key="message_all", type="tertiary")
        st.toggle("Response diff", value=True, key="diff")
        st.radio("Response diff against", ["previous step", "another episode"], horizontal=True, key="against")
        st.html(text(950, 7))
        st.toggle("Full context (113 messages)", key="full")
        st.toggle("System prompt", key="system")
        st.markdown("#### Review notes")
        st.text_input("Your name", key="name")
        with st.form("review"):
            fields = st.columns(2)
            fields[0].text_input("Label", key="label")
            fields[0].text_input("File (optional)", key="file")
            fields[1].text_area("Note", key="note")
            st.form_submit_button("Add to step")
    with st.container(key="timeline_box"):
        st.html(f'<img src="data:image/svg+xml;base64,{{base64.b64encode(svg.encode()).decode()}}" width="1000">')
        st.html(svg)
    st.html('<div data-ares-step="1"></div>')
with st.expander("Decisive step"):
    pass
"""


def like_episode(steps: int) -> str:
    """The script of the Episode page's elements (``_LIKE_EPISODE``) for an episode of ``steps`` steps."""
    return _LIKE_EPISODE.format(steps=steps)


def _served(script: str) -> str:
    """An entry file that runs ``script`` (one line) and is served as the app's are
    (``ares_viewer_app.serving.served``)."""
    return ("import streamlit as st\n"
            f"if __name__ == '__main__':\n    {script}\n"
            "else:\n    from ares_viewer_app.serving import served\n"
            "    app = st.App(__file__, middleware=served.middleware())\n")


def at_path(script: pathlib.Path) -> str:
    """An entry file (``_served``) of a two-page app whose page at ``/p`` runs ``script``."""
    return _served("st.navigation([st.Page(lambda: None, title='home', default=True), "
                   f"st.Page({str(script)!r}, url_path='p')]).run()")


def write_pair(folder: pathlib.Path, actions: int, output_chars: int) -> tuple[str, str]:
    """Two episodes of one task, ``actions`` steps each: a failed one and a solved one; their ids."""
    folder.mkdir(parents=True)
    ids = []
    for seed, reward in ((11, 0.0), (12, 1.0)):
        doc = synthetic.episode_dict(
            task_name="calc__calc-3", actions=actions, reward=reward, output_chars=output_chars, seed=seed
        )
        synthetic.write_episode(folder, doc)
        ids.append(doc["episode_id"])
    return ids[0], ids[1]


def inspect_open_one(folder: pathlib.Path, work: pathlib.Path, episode_id: str, repeat: int) -> float | None:
    """Seconds Inspect AI takes to read one sample (the episode) from the ``.eval`` log its writer made of
    ``folder``; None without ``inspect-ai``."""
    log = work / "episodes.eval"
    if bench_index.inspect_log_of(folder, log) is None:
        return None
    from inspect_ai import log as inspect_log

    return chromium.best(lambda: inspect_log.read_eval_log_sample(str(log), id=episode_id), repeat)


def _written(path: pathlib.Path, text: str) -> pathlib.Path:
    """``path``, with ``text`` written to it."""
    path.write_text(text)
    return path


def real_compare(source: pathlib.Path, work: pathlib.Path, env: dict[str, str], repeat: int) -> list[tuple]:
    """Compare of the two longest episodes of a real run, cold (a fresh server each time): its figure rows."""
    import ares_viewer

    if not source.is_dir():
        return [("Compare of two real episodes, cold", None, f"no real run at {source}")]
    shutil.copytree(source, work / "runs" / "real")
    run = ares_viewer.open_run(work / "runs" / "real")
    longest = run.episodes.sort_values("num_actions", ascending=False).head(2)
    a, b = longest["episode_id"].tolist()
    sizes = " x ".join(str(n) for n in longest["num_actions"])
    times = []
    for n in range(repeat):
        with chromium.served_page(env, work / f"real-{n}.log") as (page, url):
            times.append(chromium.shown(page, f"{url}/compare?run=real&episode={a}&other={b}",
                                        text="aligned (rows|steps)"))
    drawn, idle = min(c for c, _ in times), min(i for _, i in times)
    return [(f"Compare of two real episodes ({sizes}), cold: drawn", drawn, verdict(drawn, 3.0)),
            (f"Compare of two real episodes ({sizes}), cold: idle", idle, "")]


def verdict(seconds: float, target: float) -> str:
    return f"target <= {target:g} s: {'ok' if seconds <= target else 'MISSED'}"


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actions", type=int, default=200)
    parser.add_argument("--output-chars", type=int, default=2100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--real", type=pathlib.Path, default=REAL_RUN, help="a real run to compare two episodes of")
    parser.add_argument("--real-pages", type=pathlib.Path, nargs="?", const=False, default=None, metavar="RUNS",
                        help="also issue #46's figures on real long episodes (benchmarks.bench_real_pages; RUNS: "
                             "keep its written runs there)")
    return parser.parse_args()


def next_step(page, url: str, mid: int) -> float:
    """Seconds from ``j`` on the Episode page at step ``mid`` (``url``), settled, to step ``mid + 1`` shown and the
    page idle."""
    chromium.shown(page, url, f"[data-ares-step='{mid}']")
    page.wait_for_function(_TIMELINE, arg=mid)  # the page settled: its last part (the timeline) drawn
    page.wait_for_function("window.__aresViewerKeys === true")
    page.evaluate("document.activeElement && document.activeElement.blur()")
    start = time.perf_counter()
    page.keyboard.press("j")
    chromium.wait(page, f"[data-ares-step='{mid + 1}']", visible=False)
    page.wait_for_function(chromium.IDLE)
    return time.perf_counter() - start


def main() -> None:
    args = _arguments()

    work = pathlib.Path(tempfile.mkdtemp(prefix="ares-bench-targets-"))
    env = {"ARES_VIEWER_RUNS": str(work / "runs"), "ARES_VIEWER_CACHE": str(work / "cache")}
    os.environ.update(env)
    logging.getLogger("streamlit").setLevel(logging.ERROR)  # reader's caches, imported without a server
    import ares_viewer
    from ares_viewer_app.views.episode import reader

    folder = work / "runs" / "pair"
    a, b = write_pair(folder, args.actions, args.output_chars)
    ares_viewer.open_run(folder)  # the index is built: Compare cold means unparsed and unaligned, not unindexed
    mid, size = args.actions // 2, sum(p.stat().st_size for p in folder.glob("*.json"))
    t_inspect = inspect_open_one(folder, work, a, args.repeat)

    # the least a Streamlit page costs: one marker element, nothing else; and the same page, at /p of a two-page app
    floor_script = _written(work / "floor.py", _served("st.html('<div data-ares-step=\"1\"></div>')"))
    paths_script = _written(work / "paths.py", at_path(floor_script))

    def floor_times(script: pathlib.Path, path: str) -> list[tuple[float, float]]:
        """The floor page served from ``script`` and opened at ``path``: a first visit, then ``--repeat`` timed."""
        with chromium.served_page(env, work / f"{script.stem}.log", script=str(script)) as (page, url):
            chromium.shown(page, url + path, "[data-ares-step='1']")
            return [chromium.shown(page, url + path, "[data-ares-step='1']") for _ in range(args.repeat)]

    # the Episode page's kinds of elements, at /p of a two-page app
    like_script = _written(work / "like_episode.py", like_episode(args.actions))
    like_paths = _written(work / "like_paths.py", at_path(like_script))
    floor, floor_path = floor_times(floor_script, ""), floor_times(paths_script, "/p")
    like = floor_times(like_paths, "/p")
    compare = []
    for n in range(args.repeat):  # each cold: a fresh server
        with chromium.served_page(env, work / f"server-{n}.log") as (page, url):
            compare.append(
                chromium.shown(page, f"{url}/compare?run=pair&episode={a}&other={b}", text="aligned (rows|steps)")
            )
    with chromium.served_page(env, work / "server.log") as (page, url):
        episode_url = f"{url}/episode?run=pair&episode={a}"
        chromium.shown(page, episode_url + "&step=1", "[data-ares-step='1']")  # parsed: what follows is warm
        step_marker = f"[data-ares-step='{mid}']"
        chromium.record_first_seen(page, {"step view": step_marker, "step list": _STEP_LIST, "timeline": _PLOT})

        def open_step() -> tuple[float, ...]:
            page.goto("about:blank")
            start = time.perf_counter()
            page.goto(episode_url + f"&step={mid}")
            chromium.wait(page, step_marker, visible=False)
            content = time.perf_counter() - start
            page.wait_for_function(_TIMELINE_SHOWN, arg=mid, polling="raf")
            shown = time.perf_counter() - start
            page.wait_for_function(chromium.IDLE)
            idle = time.perf_counter() - start
            page.wait_for_function(_TIMELINE, arg=mid)
            chromium.wait(page, _STEP_LIST, visible=False)  # a loaded machine can draw it after the timeline
            seen = chromium.first_seen(page)
            return content, time.perf_counter() - start, idle, seen["step view"], seen["step list"], shown

        opened = [open_step() for _ in range(args.repeat)]

        t_next = chromium.best(lambda: next_step(page, episode_url + f"&step={mid}", mid), args.repeat)
        page_end = f".st-key-episode_read_step_{reader.PAGE_STEPS - 1}"  # the first page's last step
        transcript = [chromium.shown(page, episode_url + "&view=transcript", page_end) for _ in range(args.repeat)]

    real = real_compare(args.real, work, env, args.repeat)
    t_compare, t_compare_idle = min(c for c, _ in compare), min(i for _, i in compare)
    t_content, t_timeline, t_idle, t_view_dom, t_list_dom, t_shown = (min(o[i] for o in opened) for i in range(6))
    t_read, t_read_idle = min(c for c, _ in transcript), min(i for _, i in transcript)
    n = args.actions
    rows = [
        ("Inspect read_eval_log_sample, one sample", t_inspect,
         "the same episode, Inspect's writer" if t_inspect is not None else "inspect-ai not installed"),
        ("floor: a one-element Streamlit page, idle", min(i for _, i in floor), "no app, same server and browser"),
        ("floor at a page's path (/p), idle", min(i for _, i in floor_path), "the same page, opened at a path"),
        ("floor of the Episode page's elements (/p): marker", min(c for c, _ in like),
         "its 59 elements in its layout, fixed content"),
        ("floor of the Episode page's elements (/p): idle", min(i for _, i in like), "no run read, no component"),
        (f"Episode page step {mid}, warm: step view in DOM", t_view_dom, "what the page recorded itself"),
        (f"Episode page step {mid}, warm: step list in DOM", t_list_dom, "its current row, as the page recorded it"),
        (f"Episode page step {mid}, warm: content", t_content, verdict(t_content, 0.5)),
        (f"Episode page step {mid}, warm: timeline shown", t_shown,
         f"target: with the content (after it by {min(o[5] - o[0] for o in opened):.3f}-"
         f"{max(o[5] - o[0] for o in opened):.3f} s)"),
        (f"Episode page step {mid}, warm: timeline clickable", t_timeline, "its component drawn"),
        (f"Episode page step {mid}, warm: idle", t_idle, verdict(t_idle, 1.0)),
        ("next step with j, to drawn and idle", t_next, verdict(t_next, 0.3)),
        (f"Compare {n} x {n}, cold: aligned table drawn", t_compare, verdict(t_compare, 3.0)),
        (f"Compare {n} x {n}, cold: idle", t_compare_idle, ""),
        *real,
        (f"transcript of {n} steps: first page drawn", t_read, ""),
        (f"transcript of {n} steps: to idle", t_read_idle, verdict(t_read_idle, 2.0)),
    ]
    print(f"episodes: 2 x {n} actions, {size / 1e6:.0f} MB; Chromium 1500 x 1000; best of {args.repeat}")
    for name, seconds, note in rows:
        figure = "not measured" if seconds is None else f"{seconds:7.3f} s"
        print(f"{name:<48} {figure:>10}   {note}")
    print(
        f"{'overview, 1,000,000 vs 100 Tinker rollouts':<48} not measured here: python3 -m benchmarks.bench_scale "
        "(target ratio <= 1.3)"
    )
    shutil.rmtree(work, ignore_errors=True)
    if args.real_pages is not None:
        from benchmarks import bench_real_pages

        bench_real_pages.measure(args.real_pages or None, args.real, args.repeat)


if __name__ == "__main__":
    main()
