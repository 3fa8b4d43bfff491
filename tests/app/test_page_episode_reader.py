"""The Episode page's reader for long episodes in AppTest: the transcript paged, long outputs folded, find in the
episode (hit count, previous/next hit, the match marked as escaped text, the hit steps in the step list)."""

from __future__ import annotations

import page_text
import pytest

from testdata import synthetic

STEPS = 60
MARKUP = "<b>bold</b> [link](http://example.com) :red[x]"


@pytest.fixture
def long_run(tmp_path, monkeypatch):
    """A run of one 60-action episode with 4,000-character outputs; step 7's command holds markup and the word
    NEEDLE, which steps 7, 31 and 52 print."""
    folder = tmp_path / "runs" / "long"
    folder.mkdir(parents=True)
    doc = synthetic.episode_dict(actions=STEPS, seed=5, output_chars=4_000)
    doc["steps"][7]["action"]["data"][0]["content"] = f"THOUGHT: look.\n\n```bash\necho NEEDLE '{MARKUP}'\n```"
    for k in (7, 31, 52):
        result = doc["steps"][k]["observation"]["messages"][-1]
        result["content"] = result["content"].replace("<output>\n", f"<output>\nfound the needle here ({k})\n", 1)
    synthetic.write_episode(folder, doc)
    monkeypatch.setenv("ARES_VIEWER_RUNS", str(tmp_path / "runs"))
    return doc["episode_id"]


def htmls(at) -> list[str]:
    return [element.proto.body for element in at.get("html")]


def step_headers(at) -> list[str]:
    return [m.value for m in at.markdown if m.value.startswith("**Step ")]


def test_the_transcript_shows_25_steps_a_page_and_pages_through_the_url(long_run, app):
    at = app("episode", run="long", episode=long_run, view="transcript")
    assert not at.exception
    headers = step_headers(at)
    assert len(headers) == 25 and headers[0].startswith("**Step 0**") and headers[-1].startswith("**Step 24**")
    assert "Page 1 of 3" in page_text.of(at)
    at.button(key="episode.tpage_next.top").click().run()
    assert at.query_params["tpage"] == "2"
    assert step_headers(at)[0].startswith("**Step 25**") and step_headers(at)[-1].startswith("**Step 49**")
    at = app("episode", run="long", episode=long_run, view="transcript", tpage="3")
    assert [h.split("**")[1] for h in step_headers(at)] == [f"Step {k}" for k in range(50, STEPS + 1)]
    at = app("episode", run="long", episode=long_run, view="transcript", tpage="9")
    assert "This transcript has no page 9: its pages are 1 to 3." in page_text.shown(page_text.of(at))
    assert step_headers(at)[0].startswith("**Step 0**")


def test_long_outputs_are_folded_until_show_all(long_run, app):
    at = app("episode", run="long", episode=long_run, view="transcript")
    folded = [c.value for c in page_text.blocks(at) if "characters," in c.value and "hidden" in c.value]
    assert len(folded) >= 10  # the long outputs on the page show their head and tail
    key = next(b.key for b in at.button if b.key and b.key.endswith(".3.output"))
    at.button(key=key).click().run()
    assert len([c.value for c in page_text.blocks(at) if "hidden" in c.value]) == len(folded) - 1


def test_find_counts_hits_and_steps_between_them_in_the_url(long_run, app):
    at = app("episode", run="long", episode=long_run, step="1")
    at.text_input(key="episode.find").input("needle").run()
    assert at.query_params["find"] == "needle"
    assert at.query_params["hit"] == "1" and at.query_params["step"] == "7"
    shown = page_text.shown(page_text.of(at))
    assert "**Hit 1 of 4** · step 7 · command · 3 steps with hits" in shown
    at.button(key="episode.hit_next").click().run()
    assert (at.query_params["hit"], at.query_params["step"]) == ("2", "7")
    assert "**Hit 2 of 4** · step 7 · output" in page_text.shown(page_text.of(at))
    at.button(key="episode.hit_next").click().run()
    assert (at.query_params["hit"], at.query_params["step"]) == ("3", "31")
    for _ in range(2):
        at.button(key="episode.hit_next").click().run()
    assert at.query_params["hit"] == "1"  # past the last hit, the first again
    at.button(key="episode.hit_prev").click().run()
    assert at.query_params["hit"] == "4"
    # The step list counts each step's hits in its marks column.
    table = page_text.step_list(at)
    marks = dict(zip(table["step"], table["rc"], strict=True))
    assert {k for k, m in marks.items() if "found" in m} == {7, 31, 52}
    assert "2 found" in marks[7] and "1 found" in marks[31]


def test_the_hit_is_marked_in_escaped_text(long_run, app):
    at = app("episode", run="long", episode=long_run, find="NEEDLE", hit="1", step="7")
    (hit,) = [h for h in htmls(at) if h.startswith("<pre data-ares-hit")]
    assert "<mark" in hit and ">NEEDLE</mark>" in hit
    assert "&lt;b&gt;bold&lt;/b&gt;" in hit and "<b>" not in hit  # the file's markup is text


def test_find_in_the_transcript_opens_the_hit_s_page(long_run, app):
    at = app("episode", run="long", episode=long_run, view="transcript")
    at.text_input(key="episode.find").input("needle here (52)").run()
    assert at.query_params["tpage"] == "3"
    assert any("Step 52" in h and "hit 1 of 1" in page_text.shown(h) for h in step_headers(at))
    at.text_input(key="episode.find").input("needle here (7)").run()
    assert "tpage" not in at.query_params  # the first page is the default
    assert step_headers(at)[0].startswith("**Step 0**")
