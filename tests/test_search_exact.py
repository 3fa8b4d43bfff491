"""The byte-prefiltered search finds exactly what searching every episode finds, on every format's runs and on a
Tinker run written with escapes, unicode, content parts and prompts of its own."""

from __future__ import annotations

import json
import pathlib
import random
import re

import pytest

import ares_viewer
from ares_viewer import search
from benchmarks import bench_scale

REPO = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"


def reference(run, query, *, regex=False, case=False, fields=search.FIELDS):
    """What searching every episode one by one finds (the search before the byte prefilter)."""
    pattern = search.compile_pattern(query, regex=regex, case=case)
    return [hit for episode_id in run.episode_ids
            for hit in search.episode_hits(run.episode(episode_id), pattern, fields)]


def found(run, query, **options):
    return list(search.hits(run, query, limit=10**9, **options))


def _special_rollout(iteration: int, group: int, traj: int) -> dict:
    doc = bench_scale._rollout(iteration, group, traj, random.Random(group * 8 + traj))
    step = doc["steps"][0]
    said = step["trace"]["policy_response"]["messages"][0]
    prompt = step["trace"]["prompt"]["messages"]
    if traj == 1:
        said["content"] = 'She said "déjà vu" at C:\\temp\\new — naïve straße \U0001f600 K\u212a ſ'
    if traj == 2:
        said["content"] = [{"type": "text", "text": "The ans"}, {"type": "text", "text": "wer is glued"}]
    if traj == 3:
        prompt[0]["content"] = f"You are the rare-system-prompt tutor #{group}."
        prompt[1]["content"] = f"A question only the task has: quokka{group}\nsecond line\ttabbed"
    if traj == 4:
        said["content"] = ("Line one\nline two </output> <returncode>1</returncode> a/b 1e5 "
                           "[... 3 characters elided ...]")
    return doc


def write_special_run(folder: pathlib.Path) -> pathlib.Path:
    """Two iteration files of 40 rollouts: one written escaping non-ASCII (``json.dumps``' default), one not."""
    for iteration, ascii_only in ((0, True), (1, False)):
        target = folder / f"iteration_{iteration:06d}" / "train_rollout_summaries.jsonl"
        target.parent.mkdir(parents=True)
        target.write_text("".join(json.dumps(_special_rollout(iteration, i // 8, i % 8), ensure_ascii=ascii_only)
                                  + "\n" for i in range(40)), encoding="utf-8")
    return folder


QUERIES = ['"déjà vu"', 'said "', "C:\\temp", "\\new", "DÉJÀ", "straße", "STRASSE", "\U0001f600", "kk", "KKS", "ſ",
           "answer is", "The answer is glued", "wer is", "rare-system-prompt", "quokka3", "second line tabbed",
           "line\ttabbed", "</output>", "returncode", "1e5", "3 characters", "elided", "a/b", "boxed{", "\\boxed",
           "nothing-here-at-all", "é", "—"]


@pytest.fixture(scope="module")
def special_run(tmp_path_factory):
    return ares_viewer.open_run(write_special_run(tmp_path_factory.mktemp("special")), use_cache=False)


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("case", [False, True])
def test_plain_queries_find_what_every_episode_finds(special_run, query, case):
    assert found(special_run, query, case=case) == reference(special_run, query, case=case)


@pytest.mark.parametrize("query", [r"quokka\d+", r"d[ée]j[àa]", r"\\new", r"answer is \\boxed\{\d+\}", r"^Line",
                                   r"(?i)DÉJÀ vu", r'(?x) said \s "', r"kk\w", r"STRASSE|straße", r"the ans(?=wer)",
                                   r"line\ttabbed", r"rare-system-\w+ tutor #\d"])
def test_regex_queries_find_what_every_episode_finds(special_run, query):
    """A regular expression is tested for the literal text its top level requires."""
    for case in (False, True):
        assert found(special_run, query, regex=True, case=case) == reference(special_run, query, regex=True, case=case)


def test_prompt_fields_alone(special_run):
    for query in ("rare-system-prompt", "quokka4", "careful math tutor"):
        for fields in (["system"], ["task"], ["thought", "output"]):
            hits = found(special_run, query, fields=fields)
            assert hits == reference(special_run, query, fields=fields)
    assert {h.field for h in found(special_run, "quokka4")} == {"task"}


def _text_samples(run, rng, count):
    """Pieces of the texts a search looks in: whole words and arbitrary cuts (across lines, quotes, escapes)."""
    texts = []
    for episode in run:
        texts += [t for f in search.PROMPT_FIELDS if (t := search.prompt_text(episode, f))]
        for step in episode.actions:
            texts += [t for f in search.STEP_FIELDS if (t := search._field_text(step, f))]
    samples = []
    for _ in range(count):
        text = rng.choice(texts)
        start = rng.randrange(len(text))
        samples.append(text[start:start + rng.randrange(1, 40)])
    return [s for s in samples if s]


@pytest.mark.parametrize("location", [REPO / "sample_runs" / "demo-run", FIXTURES / "tinker", FIXTURES / "ray",
                                      FIXTURES / "mini-swe-agent", FIXTURES / "mini-swe-agent-real", "special"])
def test_pieces_of_the_runs_own_text(location, special_run):
    run = special_run if location == "special" else ares_viewer.open_run(location, use_cache=False)
    rng = random.Random(7)
    for query in _text_samples(run, rng, 25):
        for case in (False, True):
            assert found(run, query, case=case) == reference(run, query, case=case), query
        as_regex = re.escape(query)  # the literal text a regular expression's byte test asks for
        assert found(run, as_regex, regex=True) == reference(run, as_regex, regex=True), query
