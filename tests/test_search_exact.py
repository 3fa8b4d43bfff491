"""The byte-prefiltered search finds exactly what searching every episode finds, on every format's runs and on a
Tinker run written with escapes, unicode, content parts and prompts of its own; and on every one of those runs
rewritten as other JSON writers may write them: keys spelled with \\u escapes, ASCII letters of strings escaped."""

from __future__ import annotations

import json
import pathlib
import random
import re
import shutil

import pytest

import ares_viewer
from ares_viewer.analysis import search
from benchmarks import bench_scale
from tests import atif_fixtures

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
    if traj == 5:  # glued from parts, its words in no other record: only parsing finds it
        said["content"] = [{"type": "text", "text": "AssertionError: zebra-cros"}, {"type": "text", "text": "sing"}]
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
           "nothing-here-at-all", "é", "—", "AssertionError: zebra-crossing", "zebra-crossing"]


@pytest.fixture(scope="module")
def special_run(tmp_path_factory):
    return ares_viewer.open_run(write_special_run(tmp_path_factory.mktemp("special")), use_cache=False)


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("case", [False, True])
def test_plain_queries_find_what_every_episode_finds(special_run, query, case):
    assert found(special_run, query, case=case) == reference(special_run, query, case=case)


@pytest.mark.parametrize("query", [r"quokka\d+", r"d[ée]j[àa]", r"\\new", r"answer is \\boxed\{\d+\}", r"^Line",
                                   r"(?i)DÉJÀ vu", r'(?s) said\s"', r"kk\w", r"STRASSE|straße", r"the ans(?:wer)",
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
            texts += [t for f in search.STEP_FIELDS if (t := search.field_text(step, f))]
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


# Other writers' spellings of the same JSON: keys with their ASCII letters written as \\u escapes (``"\\u0063ontent"``),
# and every other ASCII letter of a string value so written (``"\\u0041ssertionError"``), hex digits in upper case.
def _escaped_string(text: str, escape) -> str:
    return '"' + "".join(f"\\u{ord(c):04X}" if escape(c, i) else json.dumps(c, ensure_ascii=False)[1:-1]
                         for i, c in enumerate(text)) + '"'


def escaping_dumps(value, *, keys: bool, values: bool) -> str:
    """``value`` as JSON, spelled as asked."""
    def letter(c, i):
        return c.isascii() and c.isalpha() and i % 2 == 0

    if isinstance(value, dict):
        return "{" + ", ".join(_escaped_string(k, lambda c, i: keys and c.isascii() and c.isalpha()) + ": "
                               + escaping_dumps(v, keys=keys, values=values) for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(escaping_dumps(v, keys=keys, values=values) for v in value) + "]"
    if isinstance(value, str):
        return _escaped_string(value, letter if values else lambda c, i: False)
    return json.dumps(value)


def rewrite_escaping(source: pathlib.Path, target: pathlib.Path, *, keys: bool, values: bool) -> pathlib.Path:
    """A copy of a run with each of its JSON and JSON Lines files spelled by ``escaping_dumps``."""
    shutil.copytree(source, target)
    for path in [*target.rglob("*.json"), *target.rglob("*.jsonl")]:
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".jsonl":
            path.write_text("".join(escaping_dumps(json.loads(line), keys=keys, values=values) + "\n"
                                    for line in text.splitlines() if line.strip()), encoding="utf-8")
        else:
            path.write_text(escaping_dumps(json.loads(text), keys=keys, values=values), encoding="utf-8")
    return target


def write_atif_job(folder: pathlib.Path) -> pathlib.Path:
    """A harbor job whose first trial's command, given as arguments that are a JSON string, holds quotes and a
    backslash: the file spells them escaped twice (``\\\\\\"``), and nowhere else."""
    job = atif_fixtures.write_job(folder)
    path = job / atif_fixtures.TRIAL / "agent" / "trajectory.json"
    doc = json.loads(path.read_text())
    doc["steps"][2]["tool_calls"][0]["arguments"] = {"command": 'grep -n "needle-in-quotes" src\\main.py'}
    for step in doc["steps"]:
        for call in step.get("tool_calls", ()):
            call["arguments"] = json.dumps(call["arguments"])
    path.write_text(json.dumps(doc, indent=2))
    return job


ESCAPED_QUERIES = ["AssertionError", "zebra-crossing", "AssertionError: zebra-crossing", "The answer is glued",
                   "answer", "quokka3", "déjà", "STRASSE", "kk", '"needle-in-quotes"', "src\\main.py", "needle",
                   "-n \"needle"]


@pytest.fixture(scope="module")
def runs_to_rewrite(tmp_path_factory):
    made = tmp_path_factory.mktemp("to-rewrite")
    return {"demo-run": REPO / "sample_runs" / "demo-run", "tinker": FIXTURES / "tinker", "ray": FIXTURES / "ray",
            "mini-swe-agent": FIXTURES / "mini-swe-agent", "mini-swe-agent-real": FIXTURES / "mini-swe-agent-real",
            "special": write_special_run(made / "special"), "atif": write_atif_job(made / "atif")}


@pytest.mark.parametrize(("name", "spelling"), [
    *((name, spelling) for name in ("demo-run", "tinker", "ray", "mini-swe-agent", "mini-swe-agent-real", "special",
                                    "atif") for spelling in ("keys", "values")),
    ("atif", "plain")])
def test_other_writers_spellings_find_what_every_episode_finds(runs_to_rewrite, tmp_path, name, spelling):
    source = runs_to_rewrite[name]
    location = source if spelling == "plain" else rewrite_escaping(
        source, tmp_path / name, keys=spelling == "keys", values=spelling == "values")
    run = ares_viewer.open_run(location, use_cache=False)
    assert len(run) == len(ares_viewer.open_run(source, use_cache=False))
    episodes = list(run)

    def every_episode(query, **options):
        pattern = search.compile_pattern(query, **options)
        return [hit for episode in episodes for hit in search.episode_hits(episode, pattern)]

    for query in ESCAPED_QUERIES + _text_samples(run, random.Random(11), 10):
        for case in (False, True):
            assert found(run, query, case=case) == every_episode(query, case=case), (query, case)
    for expression in (r"zebra-cros\w+", r'"needle-in-\w+"'):
        assert found(run, expression, regex=True) == every_episode(expression, regex=True), expression


def test_the_rewritten_runs_hold_what_the_byte_test_once_missed(runs_to_rewrite, tmp_path):
    """The cases above are live: the glued answer behind an escaped key, and the command quoted twice."""
    special = ares_viewer.open_run(rewrite_escaping(runs_to_rewrite["special"], tmp_path / "s", keys=True,
                                                    values=False), use_cache=False)
    assert len(found(special, "zebra-crossing")) == 10  # one rollout of each group
    assert b'"\\u0063\\u006F\\u006E' in next((tmp_path / "s").rglob("*.jsonl")).read_bytes()
    atif = ares_viewer.open_run(runs_to_rewrite["atif"], use_cache=False)
    assert [hit.field for hit in found(atif, '"needle-in-quotes"')] == ["command"]
    assert [hit.field for hit in found(atif, "src\\main.py")] == ["command"]
