"""Where a page's time goes in Chromium: a CPU profile and a timeline trace of one page load, summarised.

``recorded(page)`` wraps one navigation (or key press) of a Playwright page and collects, through the page's Chrome
DevTools Protocol session:

- V8's sampling CPU profile (``Profiler``): the self time of each JavaScript function, and the same summed by where
  the script comes from (Streamlit's bundle, a component's script, Plotly, the page's own scripts);
- a timeline trace (``Tracing``, ``devtools.timeline``): the renderer main thread's time by kind of work (script,
  style, layout, paint, parsing, garbage collection), counted once (the time of the work inside a task, not the
  task's);
- what the server sent over the websocket (frames and bytes) and what the page holds afterwards (elements, iframes,
  Plotly charts);
- the CPU seconds every Chromium process spent meanwhile (``SystemInfo.getProcessInfo``), which hold on a shared
  machine better than wall seconds do.

``summary(...)`` prints it; ``python3 -m benchmarks.bench_real_pages --profile DIR`` writes one per slow page.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import pathlib
import time
from collections.abc import Iterator

# Trace events of the renderer's main thread that are work of their own kind (the rest, e.g. "RunTask", only
# contain them). Script time is what V8 reports itself; the CPU profile splits it by function.
_KINDS = {
    "FunctionCall": "script", "EvaluateScript": "script", "v8.compile": "script compile",
    "v8.compileModule": "script compile", "V8.CompileCode": "script compile", "CompileScript": "script compile",
    "EventDispatch": "script", "TimerFire": "script", "FireAnimationFrame": "script", "v8.evaluateModule": "script",
    "RunMicrotasks": "script", "V8.Execute": "script",
    "UpdateLayoutTree": "style", "RecalculateStyles": "style", "ParseAuthorStyleSheet": "style",
    "Layout": "layout", "UpdateLayerTree": "layout", "PrePaint": "paint", "Paint": "paint",
    "PaintImage": "paint", "Layerize": "paint", "Commit": "paint", "DecodeImage": "image decode",
    "ImageDecodeTask": "image decode", "Decode Image": "image decode",
    "ParseHTML": "parse HTML", "MinorGC": "GC", "MajorGC": "GC", "V8.GC_SCAVENGER": "GC",
    "BlinkGC.AtomicPhase": "GC", "V8.GC_MARK_COMPACTOR": "GC", "MinorMS": "GC",
    "ResourceReceivedData": "network", "ResourceFinish": "network", "ResourceSendRequest": "network",
}
_TRACE_CATEGORIES = ["devtools.timeline", "disabled-by-default-devtools.timeline", "v8.execute", "v8",
                     "blink.user_timing"]


@dataclasses.dataclass
class Recording:
    """What one recorded page load cost (``recorded``)."""

    wall: float = 0.0
    profile: dict = dataclasses.field(default_factory=dict)
    events: list = dataclasses.field(default_factory=list)
    frames: int = 0
    frame_bytes: int = 0
    largest_frame: int = 0
    cpu: dict = dataclasses.field(default_factory=dict)
    dom: dict = dataclasses.field(default_factory=dict)


def _cpu_times(browser_session) -> dict[str, float]:
    """Cumulative CPU seconds of each Chromium process, by ``type:id``."""
    try:
        info = browser_session.send("SystemInfo.getProcessInfo")
    except Exception:  # an old Chromium without it: no CPU figures
        return {}
    return {f"{p['type']}:{p['id']}": float(p["cpuTime"]) for p in info.get("processInfo", [])}


_DOM = """() => ({
  elements: document.getElementsByTagName('*').length,
  iframes: document.getElementsByTagName('iframe').length,
  plotly: document.querySelectorAll('[data-testid="stPlotlyChart"]').length,
  svg_nodes: document.querySelectorAll('svg *').length,
  html_bytes: document.documentElement.outerHTML.length,
})"""


@contextlib.contextmanager
def traced(page, session, categories: list[str]) -> Iterator[list[dict]]:
    """The trace events of ``categories`` (a timeline trace of the ``with`` block, through the page's DevTools
    ``session``), in the list yielded once the block has ended."""
    trace: list[dict] = []
    done: list[bool] = []
    session.on("Tracing.dataCollected", lambda event: trace.extend(event["value"]))
    session.on("Tracing.tracingComplete", lambda _: done.append(True))
    session.send("Tracing.start", {"categories": ",".join(categories), "transferMode": "ReportEvents"})
    try:
        yield trace
    finally:
        session.send("Tracing.end")
        deadline = time.perf_counter() + 30
        while not done and time.perf_counter() < deadline:
            page.wait_for_timeout(20)


@contextlib.contextmanager
def recorded(page) -> Iterator[Recording]:
    """Record what the page does inside the ``with`` block (a navigation, a key press and its waits)."""
    record = Recording()
    session = page.context.new_cdp_session(page)
    browser_session = page.context.browser.new_browser_cdp_session()

    def frame(payload) -> None:
        size = len(payload)
        record.frames += 1
        record.frame_bytes += size
        record.largest_frame = max(record.largest_frame, size)

    def socket(ws) -> None:
        ws.on("framereceived", frame)

    page.on("websocket", socket)
    session.send("Profiler.enable")
    session.send("Profiler.setSamplingInterval", {"interval": 200})
    try:
        with traced(page, session, _TRACE_CATEGORIES) as trace:
            before = _cpu_times(browser_session)
            session.send("Profiler.start")
            start = time.perf_counter()
            try:
                yield record
            finally:
                record.wall = time.perf_counter() - start
                record.profile = session.send("Profiler.stop")["profile"]
                after = _cpu_times(browser_session)
                record.cpu = {name: after[name] - before.get(name, 0.0) for name in after}
        record.events = trace
    finally:
        page.remove_listener("websocket", socket)
        with contextlib.suppress(Exception):
            record.dom = page.evaluate(_DOM)
        session.detach()
        browser_session.detach()


def _source(url: str) -> str:
    """Where a script comes from, in a word."""
    if not url:
        return "(native / V8)"
    name = url.rsplit("/", 1)[-1].split("?", 1)[0]
    if "plotly" in url.lower() or name.startswith("plotly"):
        return "Plotly"
    if "/component" in url or "bidi-components" in url or "ares_viewer" in url:
        return "components (ares_viewer)"
    if "/static/js/" in url or "/static/" in url:
        return f"Streamlit bundle ({name.split('.', 1)[0]})"
    if url.startswith("data:") or url.startswith("blob:"):
        return "inline/blob"
    return f"other ({name[:40]})"


def self_times(profile: dict) -> tuple[collections.Counter, collections.Counter]:
    """Milliseconds of self time by function (``name (file:line)``) and by script source (``_source``)."""
    nodes = {node["id"]: node for node in profile.get("nodes", [])}
    by_node: collections.Counter = collections.Counter()
    for node_id, delta in zip(profile.get("samples", []), profile.get("timeDeltas", []), strict=False):
        by_node[node_id] += delta / 1000
    functions: collections.Counter = collections.Counter()
    sources: collections.Counter = collections.Counter()
    for node_id, ms in by_node.items():
        frame = nodes[node_id]["callFrame"]
        name = frame.get("functionName") or "(anonymous)"
        url = frame.get("url", "")
        if name in ("(idle)", "(program)", "(garbage collector)", "(root)"):
            functions[name] += ms
            sources[name] += ms
            continue
        where = url.rsplit("/", 1)[-1].split("?", 1)[0][:48]
        functions[f"{name} ({where}:{frame.get('lineNumber', 0) + 1})"] += ms
        sources[_source(url)] += ms
    return functions, sources


def main_thread_kinds(events: list[dict]) -> collections.Counter:
    """Milliseconds of the renderer main threads' work by kind (``_KINDS``; ``other: <name>`` for the other trace
    events), each counted once: an event's own time, less that of the events inside it (which count for their own
    kinds); and the threads' busy time (tasks, whose own time is left out of the kinds)."""
    main = {(e["pid"], e["tid"]) for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"
            and e.get("args", {}).get("name") == "CrRendererMain"}
    on_main = [e for e in events if e.get("ph") == "X" and (e["pid"], e["tid"]) in main]
    kinds: collections.Counter = collections.Counter()
    for thread in main:
        spans = sorted(((e["ts"], e["ts"] + e.get("dur", 0), _KINDS.get(e["name"], f"other: {e['name']}"), _cpu(e))
                        for e in on_main if (e["pid"], e["tid"]) == thread and e["name"] not in _TASKS),
                       key=lambda s: (s[0], -s[1]))
        stack: list[list] = []  # [end, kind, own time]
        for begin, end, kind, cpu in spans:
            while stack and stack[-1][0] <= begin:
                closed = stack.pop()
                kinds[closed[1]] += closed[2]
            if stack:
                stack[-1][2] -= cpu
            stack.append([end, kind, cpu])
        for closed in stack:
            kinds[closed[1]] += closed[2]
    busy = sum(_cpu(e) for e in on_main if e["name"] in _TASKS)
    kinds["main thread busy (all tasks, CPU)"] = busy
    # the profiler's own start (it walks the heap's code: over a second on a page that loaded Plotly) is not the page's
    kinds["main thread busy, less the profiler's start"] = busy - kinds.get(f"other: {_PROFILER_START}", 0)
    return collections.Counter({k: v / 1000 for k, v in kinds.items()})


def _cpu(event: dict) -> float:
    """An event's thread time (CPU, microseconds): what it cost, whatever else ran on the machine; its wall time
    where the trace has no thread time."""
    return event.get("tdur", event.get("dur", 0))


_PROFILER_START = "CpuProfiler::StartProfiling"
_TASKS = ("RunTask", "ThreadControllerImpl::RunTask")


def summary(name: str, record: Recording, top: int = 15) -> str:
    """The recording as text: wall and CPU seconds, the main thread by kind, script by source, the top functions,
    the websocket's traffic and the page's size."""
    functions, sources = self_times(record.profile)
    sampled = sum(functions.values())
    renderer = sum(v for k, v in record.cpu.items() if k.startswith("renderer"))
    lines = [f"== {name}",
             f"wall {record.wall:.3f} s; Chromium CPU {sum(record.cpu.values()):.3f} s (renderer {renderer:.3f} s, "
             + ", ".join(f"{k.split(':')[0]} {v:.2f}" for k, v in sorted(record.cpu.items(), key=lambda kv: -kv[1])
                         if v >= 0.01) + ")",
             f"websocket: {record.frames} frames from the server, {record.frame_bytes / 1024:.1f} KiB "
             f"(largest {record.largest_frame / 1024:.1f} KiB)",
             "page afterwards: " + ", ".join(f"{k} {v:,}" for k, v in record.dom.items()),
             "renderer main thread by kind (ms of its CPU time):"]
    kinds = main_thread_kinds(record.events)
    others = [(kind, ms) for kind, ms in kinds.most_common() if kind.startswith("other: ")]
    for kind, ms in [(kind, ms) for kind, ms in kinds.most_common() if not kind.startswith("other: ")]:
        lines.append(f"  {ms:9.1f}  {kind}")
    lines.append(f"  {sum(ms for _, ms in others):9.1f}  other events, the largest: "
                 + ", ".join(f"{kind[7:]} {ms:.0f}" for kind, ms in others[:6]))
    busy = sampled - functions["(idle)"]
    lines.append(f"JavaScript CPU profile by source (ms of self time, wall-clock samples; {busy:.0f} ms not idle of "
                 f"{sampled:.0f} sampled):")
    for source, ms in sources.most_common():
        if source != "(idle)" and ms >= 1:
            lines.append(f"  {ms:9.1f}  {source}")
    lines.append(f"top {top} functions by self time (ms):")
    for function, ms in [(f, ms) for f, ms in functions.most_common() if f != "(idle)"][:top]:
        lines.append(f"  {ms:9.1f}  {function}")
    return "\n".join(lines)


def write(folder: pathlib.Path, name: str, record: Recording) -> str:
    """Write the recording's summary (``name.txt``) and its raw CPU profile (``name.cpuprofile``, which Chromium's
    DevTools opens) to ``folder``; return the summary."""
    folder.mkdir(parents=True, exist_ok=True)
    text = summary(name, record)
    slug = "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-")
    (folder / f"{slug}.txt").write_text(text + "\n")
    (folder / f"{slug}.cpuprofile").write_text(json.dumps(record.profile))
    return text
