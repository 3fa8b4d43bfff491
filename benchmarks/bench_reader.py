"""How fast the Episode page's reader shows a long episode: the transcript a page at a time, and find.

Writes one 200-step episode, then drives the real app with AppTest (the same script as under ``streamlit run``,
no browser), the episode already parsed (warm), best of ``--repeat`` runs each:

- baseline: the same transcript with every step on one page (the transcript before it was paged), and
  ``orjson.loads`` of the file;
- the reader: the transcript's first page (25 steps), its last page, and the step view after a find;
- find: ``analysis.find`` over the episode (every hit, the library alone);
- in Chromium (Debian's, when there): a real server, the time from a link to the transcript's first page drawn
  and Streamlit idle, the next page, a find typed to its hit count, against the step view of the same episode
  (the page the reader leaves), measured in the same run. AppTest times the server's script only; the browser
  also draws what it was sent, which is where the unpaged transcript spent its 10-13 s (issue #33).

Run: ``python3 -m benchmarks.bench_reader [--actions 200] [--output-chars 2100] [--no-browser]``.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import tempfile
import time

import orjson

from benchmarks import chromium
from benchmarks.chromium import best

REPO = pathlib.Path(__file__).resolve().parent.parent
MAIN = str(REPO / "app" / "main.py")


def _arguments() -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actions", type=int, default=200)
    parser.add_argument("--output-chars", type=int, default=2100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-browser", action="store_true", help="AppTest figures only")
    return parser.parse_args()


def main() -> None:
    args = _arguments()

    work = pathlib.Path(tempfile.mkdtemp(prefix="ares-bench-reader-"))
    os.environ["ARES_VIEWER_RUNS"] = str(work / "runs")
    os.environ["ARES_VIEWER_CACHE"] = str(work / "cache")
    from streamlit.testing.v1 import AppTest

    import ares_viewer
    from ares_viewer.analysis import find
    from ares_viewer_app.routing import pages
    from ares_viewer_app.views.episode import reader
    from testdata import synthetic

    folder = work / "runs" / "long"
    folder.mkdir(parents=True)
    doc = synthetic.episode_dict(actions=args.actions, output_chars=args.output_chars, seed=7)
    path = synthetic.write_episode(folder, doc)
    episode_id = doc["episode_id"]
    data = pathlib.Path(path).read_bytes()
    t_orjson = best(lambda: orjson.loads(data), args.repeat)

    def render(**params) -> None:
        at = AppTest.from_file(MAIN, default_timeout=300)
        for key, value in params.items():
            at.query_params[key] = value
        at.switch_page(pages.path("episode"))
        at.run()
        assert not at.exception, at.exception

    render(run="long", episode=episode_id, step="1")  # index and parse: every figure below is warm
    page_steps = reader.PAGE_STEPS
    reader.PAGE_STEPS = args.actions + 1  # the transcript unpaged, as it was
    try:
        t_all = best(lambda: render(run="long", episode=episode_id, view="transcript"), args.repeat)
    finally:
        reader.PAGE_STEPS = page_steps
    last_page = str(reader.page_of(args.actions))
    t_first = best(lambda: render(run="long", episode=episode_id, view="transcript"), args.repeat)
    t_last = best(lambda: render(run="long", episode=episode_id, view="transcript", tpage=last_page), args.repeat)
    t_find_page = best(lambda: render(run="long", episode=episode_id, find="def parse", hit="40"), args.repeat)
    episode = ares_viewer.open_run(folder).episode(episode_id)
    found = find.find(episode, "def parse", limit=10**6, seconds=60)
    t_find = best(lambda: find.find(episode, "def parse", limit=10**6, seconds=60), args.repeat)

    mb = 1024 * 1024
    print(f"episode: {args.actions} actions, {len(data) / mb:.1f} MB; best of {args.repeat}, warm, AppTest")
    print(f"baseline  orjson.loads of the file          {t_orjson:7.3f} s")
    print(f"baseline  transcript, all {args.actions + 1} steps on a page  {t_all:7.3f} s")
    print(
        f"reader    transcript page 1 ({reader.PAGE_STEPS} steps)       {t_first:7.3f} s   "
        f"{t_first / t_all:5.2f}x the unpaged script"
    )
    print(f"reader    transcript page {last_page} (the last)       {t_last:7.3f} s")
    print(f"reader    step view at find hit 40           {t_find_page:7.3f} s")
    print(
        f"find      {len(found.hits):,} hits of 'def parse' (library)   {t_find:7.3f} s   "
        f"{t_find / t_orjson:5.1f}x orjson.loads"
    )
    if not args.no_browser and pathlib.Path(chromium.CHROMIUM).exists():
        in_chromium(work, episode_id, last_page, args.repeat)
    shutil.rmtree(work, ignore_errors=True)


def in_chromium(work: pathlib.Path, episode_id: str, last_page: str, repeat: int) -> None:
    """The reader's figures in Chromium against the step view's, best of ``repeat``."""
    env = {"ARES_VIEWER_RUNS": str(work / "runs"), "ARES_VIEWER_CACHE": str(work / "cache")}
    with chromium.served_page(env, work / "server.log") as (page, url):
        base = f"{url}/episode?run=long&episode={episode_id}"

        def shown(link: str, selector: str) -> None:
            chromium.shown(page, link, selector)

        shown(base + "&step=1", "[data-ares-step='1']")  # warm: the run indexed, the episode parsed
        t_step = best(lambda: shown(base + "&step=100", "[data-ares-step='100']"), repeat)
        t_read = best(lambda: shown(base + "&view=transcript", ".st-key-episode_read_step_24"), repeat)
        t_last = best(
            lambda: shown(base + f"&view=transcript&tpage={last_page}", ".st-key-episode_read_step_200"), repeat
        )

        def next_page() -> None:
            shown(base + "&view=transcript", ".st-key-episode_read_step_24")
            start = time.perf_counter()
            page.get_by_role("button", name="Next steps").first.click()
            chromium.wait(page, ".st-key-episode_read_step_49")
            page.wait_for_function(chromium.IDLE)
            return time.perf_counter() - start

        def typed_find() -> float:
            shown(base + "&step=1", "[data-ares-step='1']")
            box = page.get_by_role("textbox", name="Find in this episode")
            box.fill("def parse")
            start = time.perf_counter()
            box.press("Enter")
            chromium.wait(page, text="Hit 1 of")
            page.wait_for_function(chromium.IDLE)
            return time.perf_counter() - start

        t_next = min(next_page() for _ in range(repeat))
        t_find = min(typed_find() for _ in range(repeat))
    print("in Chromium, 1500 x 1000, warm, link to drawn and idle:")
    print(f"baseline  step view, step 100                {t_step:7.3f} s")
    print(
        f"reader    transcript page 1                  {t_read:7.3f} s   {t_read / t_step:5.1f}x the step view"
        f"   target < 2 s: {'ok' if t_read < 2 else 'MISSED'}"
    )
    print(f"reader    transcript page {last_page} (the last)       {t_last:7.3f} s")
    print(f"reader    next page (click to idle)          {t_next:7.3f} s")
    print(f"reader    find typed, Enter to hit count     {t_find:7.3f} s")


if __name__ == "__main__":
    main()
