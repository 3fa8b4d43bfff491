"""The page table (``pages.PAGES``) is where pages are declared: the sidebar and the URL's page settings come from
it, and a page added as one module and one row is served, its own URL key kept on it and left out elsewhere."""

from __future__ import annotations

import textwrap
import urllib.parse

import page_text
import pytest
from streamlit.testing.v1 import AppTest

from ares_viewer_app.routing import pages, state

# A page of its own, in a folder outside the app: its setting ``word`` bound to a text box, a link to the Episode page.
_NOTES = '''
import streamlit as st
from ares_viewer_app.routing import pages, state

state.bind("notes.word", "word", "")
st.text_input("Word", **state.synced("notes.word", "word"))
st.markdown(f"NOTES PAGE, word: {state.get('word') or 'none'}")
st.page_link(pages.path("episode"), label="To the episode", query_params=state.params())
'''
# The app's entry file, run with one more row.
_ENTRY = '''
import pathlib
from ares_viewer_app import main
from ares_viewer_app.routing import pages

NOTES = pages.Page("Notes", "notes", ":material/sticky_note_2:", "notes", keys=("word",),
                   folder=pathlib.Path(__file__).parent / "extra")
main.run((*pages.PAGES, NOTES))
'''


@pytest.fixture
def entry(tmp_path) -> str:
    (tmp_path / "extra" / "notes").mkdir(parents=True)
    (tmp_path / "extra" / "notes" / "notes.py").write_text(textwrap.dedent(_NOTES))
    (tmp_path / "entry.py").write_text(textwrap.dedent(_ENTRY))
    return str(tmp_path / "entry.py")


def _open(at: AppTest, script: str, **params: str) -> AppTest:
    """Open a page as a link does (its parameters) or as the sidebar does (none)."""
    at.query_params.clear()
    at.query_params.update(params)
    at.switch_page(script)
    return at.run()


def test_a_page_added_as_one_module_and_one_row_is_served_with_its_own_url_key(runs, entry, tmp_path):
    notes = str(tmp_path / "extra" / "notes" / "notes.py")
    at = _open(AppTest.from_file(entry, default_timeout=60), notes, run="run-a", word="hello")
    assert not at.exception
    assert "NOTES PAGE, word: hello" in page_text.of(at)
    assert at.text_input(key="notes.word").value == "hello"
    at.text_input(key="notes.word").input("bye").run()
    assert dict(at.query_params) == {"run": "run-a", "word": "bye"}
    link = at.get("page_link")[0].proto.query_string
    assert "word=" not in link and "run=run-a" in link  # a link to another page leaves the page's key behind
    episode = runs["run-a"]["failed"]
    _open(at, pages.path("episode"), **dict(urllib.parse.parse_qsl(link)), episode=episode)
    assert not at.exception
    assert "word" not in at.query_params and at.query_params["episode"] == episode
    _open(at, notes)  # the sidebar: no parameters; the page's setting comes back, to its URL too
    assert "NOTES PAGE, word: bye" in page_text.of(at)
    assert at.query_params["word"] == "bye" and at.query_params["run"] == "run-a"


def test_the_url_keys_of_the_pages_are_the_rows_keys_each_owned_by_one_page():
    owners = pages.owners()
    assert set(state.PAGE_KEYS) == {key for row in pages.PAGES for key in row.keys} == set(owners)
    assert not set(state.PAGE_KEYS) & set(state.KEYS)
    assert "word" not in owners  # the added page's key is its row's, not the app's
    assert owners["q"].title == "Search" and owners["tpage"].title == "Episode" and owners["flag"].url_path \
        == "run_overview"
    assert [row.url_path for row in pages.PAGES if row.default] == ["run_overview"]
    twice = (*pages.PAGES, pages.Page("Again", "again", ":material/search:", "again", keys=("q",)))
    with pytest.raises(ValueError, match="'search' and 'again' both own the URL key 'q'"):
        pages.owners(twice)


def test_the_sidebar_is_the_table_in_its_order_with_the_default_at_the_root_and_its_aliases_hidden():
    at = AppTest.from_string('''
import streamlit as st
from ares_viewer_app import main
from ares_viewer_app.routing import pages, state
for page in main.navigation(pages.PAGES, state.params):
    st.text(f"{page.title}|{page.url_path}|{page.visibility}")
''').run()
    listed = [element.value.split("|") for element in at.text]
    shown = [row.title for row in pages.PAGES]
    assert [title for title, _, visibility in listed if visibility == "visible"] == shown
    assert listed[:3] == [["Run overview", "", "visible"], ["Run overview", "overview", "hidden"],
                          ["Run overview", "home", "hidden"]]
    assert ["Search", "search", "visible"] in listed
