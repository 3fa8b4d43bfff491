"""How fast the app shows a big episode, and how much one step's view sends to the browser.

Writes one 250-step episode of about 30 MB (cumulative observations, as ARES writes them), then drives
the real app with AppTest (the same script runs as under ``streamlit run``; only the browser is absent):

- baseline: ``orjson.loads`` and ``json.loads`` of the file (the least any reader must do);
- cold open: a deep link to the episode's first step in a fresh process state (index + parse + render);
- warm open: the run already open, the episode not yet parsed (a click in the overview);
- one step: the Next button (the step viewer is a fragment) and a jump to the last step;
- bytes sent: the protobuf size of every element the page rendered, for a step with the default view
  and with the full context asked for.

Run: ``python3 -m benchmarks.bench_app [--actions 250] [--output-chars 2100]``.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import sys
import tempfile
import time

import orjson

REPO = pathlib.Path(__file__).resolve().parent.parent
MAIN = str(REPO / "app" / "main.py")


def sent_bytes(node) -> int:
    """Protobuf bytes of an AppTest element tree: what the server sends for those elements."""
    total = 0
    proto = getattr(node, "proto", None)
    if proto is not None and hasattr(proto, "ByteSize"):
        total += proto.ByteSize()
    for child in getattr(node, "children", {}).values():
        total += sent_bytes(child)
    return total


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def _arguments() -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actions", type=int, default=250)
    parser.add_argument("--output-chars", type=int, default=2100)
    return parser.parse_args()


def main() -> None:
    args = _arguments()

    work = pathlib.Path(tempfile.mkdtemp(prefix="ares-bench-"))
    os.environ["ARES_VIEWER_RUNS"] = str(work / "runs")
    os.environ["ARES_VIEWER_CACHE"] = str(work / "cache")
    from streamlit.testing.v1 import AppTest

    from ares_viewer_app.data import loaders
    from ares_viewer_app.routing import pages
    from testdata import synthetic

    folder = work / "runs" / "big"
    folder.mkdir(parents=True)
    doc = synthetic.episode_dict(actions=args.actions, output_chars=args.output_chars,
                                 drop_context_at=args.actions // 2)
    path = synthetic.write_episode(folder, doc)
    size = os.path.getsize(path)
    episode_id = doc["episode_id"]
    del doc

    data = pathlib.Path(path).read_bytes()
    _, t_orjson = timed(lambda: orjson.loads(data))
    _, t_json = timed(lambda: json.loads(data))

    def app(**params):
        at = AppTest.from_file(MAIN, default_timeout=120)
        for key, value in params.items():
            at.query_params[key] = value
        at.switch_page(pages.path("episode"))
        return at

    cold = app(run="big", episode=episode_id, step="1")
    _, t_cold = timed(cold.run)
    assert not cold.exception, cold.exception
    bytes_first = sent_bytes(cold._tree)

    # Warm index, episode not parsed: what a click in the overview costs.
    loaders.load_run(loaders.location("big"))._open.clear()
    warm = app(run="big", episode=episode_id, step="1")
    _, t_warm = timed(warm.run)

    _, t_next = timed(warm.button(key="episode_next").click().run)
    last = app(run="big", episode=episode_id, step=str(args.actions))
    _, t_last = timed(last.run)
    bytes_last = sent_bytes(last._tree)
    last.toggle(key="episode.show_context").set_value(True)
    _, t_context = timed(last.run)
    bytes_context = sent_bytes(last._tree)

    mb = 1024 * 1024
    print(f"episode: {args.actions} actions, {size / mb:.1f} MB  ({path})")
    print(f"baseline  orjson.loads            {t_orjson:7.3f} s")
    print(f"baseline  json.loads              {t_json:7.3f} s")
    print(f"cold open to step 1 (index+parse) {t_cold:7.3f} s   {t_cold / t_orjson:5.1f}x orjson.loads")
    print(f"warm open to step 1 (parse)       {t_warm:7.3f} s   {t_warm / t_orjson:5.1f}x orjson.loads"
          f"   target < 1.5 s: {'ok' if t_warm < 1.5 else 'MISSED'}")
    print(f"next step (fragment rerun)        {t_next:7.3f} s")
    print(f"deep link to last step (parsed)   {t_last:7.3f} s")
    print(f"last step + full context toggle   {t_context:7.3f} s")
    print(f"sent, page at step 1              {bytes_first / 1024:7.1f} KB   {bytes_first / size:.4f}x file")
    print(f"sent, page at last step           {bytes_last / 1024:7.1f} KB   target < 1024 KB: "
          f"{'ok' if bytes_last < mb else 'MISSED'}")
    print(f"sent, last step with full context {bytes_context / 1024:7.1f} KB   (asked for)")
    print(f"caches: {loaders.MAX_RUNS} runs (cache_resource max_entries), 16 parsed episodes per run, "
          f"32 alignments")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
