"""The Activations page in a real browser, on a capture recorded through real ARES (``interp_run``: a random-weight
HookedTransformer behind ARES's own client, its episodes run in containers): every head at a named query token,
attention by message segment, the logits' top predictions and norms every hook can be read on. The figures are
read from the page's own Plotly charts and checked against the tensors (torch.load of the step files)."""

from __future__ import annotations

import math
import urllib.parse

import numpy as np
import pytest
from conftest import serve_app
from playwright.sync_api import expect

import ares_viewer
from ares_viewer import activations

pytestmark = [pytest.mark.browser, pytest.mark.interp, pytest.mark.docker]

EPISODE = "kv-episode"
STEP = 2

# Each chart's title, data and shapes, as Plotly drew them in the page (its full data: arrays decoded).
CHARTS = """() => [...document.querySelectorAll('.js-plotly-plot')].map(e => ({
    title: (e.layout.title && e.layout.title.text) || '',
    data: (e._fullData || []).map(t => ({type: t.type, name: t.name || '', x: t.x ? Array.from(t.x) : [],
                            y: t.y ? Array.from(t.y) : [], z: t.z ? Array.from(t.z, r => Array.from(r)) : [],
                            text: t.text ? Array.from(t.text, r => Array.isArray(r) ? Array.from(r) : r) : []})),
    shapes: (e.layout.shapes || []).map(s => ({x0: s.x0, dash: s.line && s.line.dash})),
    annotations: (e.layout.annotations || []).map(a => a.text)}))"""


def _missing_value(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


@pytest.fixture(scope="module")
def interp_app(interp_run, tmp_path_factory):
    """The app serving the recorded run (its own cache and review database)."""
    log_dir = tmp_path_factory.mktemp("interp-server")
    with serve_app(interp_run.root, tmp_path_factory.mktemp("interp-cache"), log_dir / "review.sqlite",
                   log_dir) as url:
        yield url


@pytest.fixture(scope="module")
def linked(interp_run) -> activations.Linked:
    found = activations.find(ares_viewer.open_run(str(interp_run.run)).episode(EPISODE))
    assert found is not None
    return found


def _open(page, url: str, tab: str, wait_idle, **params) -> None:
    """The page at step ``STEP`` of the episode, on ``tab``. The page draws five charts of a real capture (every
    tab runs), which a loaded machine takes a while to lay out: the waits are a minute."""
    page.set_default_timeout(60_000)
    expect.set_options(timeout=60_000)
    query = {"run": "interp-run", "episode": EPISODE, "step": str(STEP), **params}
    page.goto(f"{url}/activations?{urllib.parse.urlencode(query)}")
    expect(page.get_by_text("model call(s)", exact=False)).to_be_visible()
    wait_idle(page)
    page.get_by_role("tab", name=tab, exact=True).click()
    expect(page.get_by_role("tab", name=tab, exact=True)).to_have_attribute("aria-selected", "true")
    wait_idle(page)


def _chart(page, title_part: str) -> dict:
    for _ in range(120):
        found = [c for c in page.evaluate(CHARTS) if title_part in c["title"]]
        if found:
            return found[0]
        page.wait_for_timeout(500)
    raise AssertionError(f"no chart titled …{title_part}… in {[c['title'] for c in page.evaluate(CHARTS)]}")


def test_every_head_is_drawn_at_a_named_response_token_with_the_boundary_marked(page, interp_app, linked, torch,
                                                                              wait_idle):
    meta = linked.capture.meta(STEP - 1)
    tokens, prompt_length = meta["tokens"], meta["prompt_length"]
    query = len(tokens) - 2  # the KV-cached last pass fed the last token but one
    _open(page, interp_app, "Attention", wait_idle)
    named = f"position {query}: {tokens[query]!r} (response token {query - prompt_length + 1})"
    expect(page.get_by_text(f"Attention of {named}", exact=False)).to_be_visible()
    grid = _chart(page, "layers × heads")
    reference = torch.load(linked.capture.path(STEP - 1), weights_only=True)
    layers = sorted(int(n.split(".")[1]) for n in reference if n.endswith("attn.hook_pattern"))
    heads = reference["blocks.0.attn.hook_pattern"].shape[1]
    assert len(grid["data"]) == len(layers) * heads  # every head of every layer
    assert grid["annotations"][: len(layers) * heads] == [f"L{la} H{h}" for la in layers for h in range(heads)]
    last = grid["data"][-1]
    expected = reference[f"blocks.{layers[-1]}.attn.hook_pattern"][0, heads - 1, -1].numpy()
    assert np.allclose(last["y"], expected, atol=1e-6)
    assert {"x0": prompt_length - 0.5, "dash": "dash"} in grid["shapes"]  # the prompt/response boundary
    expect(page.get_by_text(f"response from position {prompt_length}", exact=False)).to_be_visible()


def test_attention_by_segment_marks_the_messages_the_clipping_removed(page, interp_app, linked, wait_idle):
    _open(page, interp_app, "Segments", wait_idle)
    chart = _chart(page, "Attention by message segment")
    heat = chart["data"][0]
    assert heat["y"] == [str(s) for s in linked.steps()]
    # The real prompts lost their end (TransformerLens truncates on the right): the first message was cut, the
    # later ones were never seen; they say "absent", with no value, never 0.
    context = linked.episode.context(STEP)
    row = heat["y"].index(str(STEP))
    first = heat["text"][row][0 if heat["x"][0] != "template" else 1]
    assert first.endswith("cut"), heat["text"][row]
    absent = [heat["x"][c] for c, text in enumerate(heat["text"][row]) if text.startswith("absent")]
    assert len(absent) == len(context) - 1
    assert all(_missing_value(heat["z"][row][heat["x"].index(name)]) for name in absent)
    seen = [v for v in heat["z"][row] if not _missing_value(v)]
    assert math.isclose(sum(seen), 1.0, abs_tol=1e-4)  # the masses add up to the query's whole attention
    expect(page.get_by_text("clipped away, never seen (no value, not 0)", exact=False)).to_be_visible()


def test_the_top_predictions_and_the_chosen_tokens_logprob_come_from_the_logits(page, interp_app, linked, torch,
                                                                             wait_idle):
    meta = linked.capture.meta(STEP - 1)
    reference = torch.load(linked.capture.path(STEP - 1), weights_only=True)["unembed.hook_out"][0, -1]
    logprobs = reference.double().log_softmax(-1)
    chosen = meta["token_ids"][-1]
    _open(page, interp_app, "This step", wait_idle)
    # The recorder saved the same logprob from its own forward pass: both are on the page.
    expect(page.get_by_text(f"logprob {float(logprobs[chosen]):.4f}", exact=False).first).to_be_visible()
    expect(page.get_by_text(f"the recorder saved {meta['logprobs'][-1]:.4f}", exact=False).first).to_be_visible()
    table = page.locator('[data-testid="stTable"]').first
    expect(table.locator("tbody tr")).to_have_count(10)
    top = [int(i) for i in logprobs.argsort(descending=True)[:10]]
    column = table.locator("thead tr th").all_inner_texts().index("token_id")
    ids = [int(row.locator("th, td").all_inner_texts()[column]) for row in table.locator("tbody tr").all()]
    assert ids == top
    expect(table).to_contain_text(f"{float(logprobs[top[0]]):.4f}")


def test_norms_come_in_forward_order_each_hook_on_its_own_scale(page, interp_app, linked, torch, wait_idle):
    reference = torch.load(linked.capture.path(STEP - 1), weights_only=True)
    _open(page, interp_app, "This step", wait_idle)
    heat = _chart(page, f"Step {STEP}: norm of each hook by layer")["data"][0]
    hooks = heat["x"]
    assert hooks.index("hook_resid_pre") < hooks.index("attn.hook_pattern") < hooks.index("hook_resid_post")
    assert hooks[-1] == "unembed.hook_out" and hooks.index("ln_final.hook_scale") < hooks.index("unembed.hook_out")
    assert hooks[0] == "hook_pos_embed"  # the first hook ARES's capture recorded
    unembed = float(reference["unembed.hook_out"].double().norm(dim=-1).mean())
    final = heat["y"].index("final")
    assert heat["text"][final][hooks.index("unembed.hook_out")] == f"{unembed:.3g}"  # the raw norm is shown
    # Each hook on its own scale: every column peaks at 1, the unembedding's large norm no longer dwarfs them.
    for c in range(len(hooks)):
        column = [row[c] for row in heat["z"] if not _missing_value(row[c])]
        assert max(column) == pytest.approx(1.0)
    page.get_by_text("log scale", exact=True).click()
    wait_idle(page)
    heat = _chart(page, "norm of each hook by layer, log scale")["data"][0]
    assert heat["z"][final][hooks.index("unembed.hook_out")] == pytest.approx(math.log10(unembed), rel=1e-4)
