"""Parsers of text an episode or a model supplies take time linear in it, and let other server threads run.

A model's answer (up to the client's 16 MB) and an agent's command are attacker text: a quadratic parser of either
stops an app server's other visitors (``re`` holds the interpreter for a whole match). Each parser here is run on
16 MB shaped against it, in a thread beside a ticker: it must finish in bounded time, and the ticker must keep
ticking meanwhile.
"""

from __future__ import annotations

import itertools
import threading
import time

import pytest

from ares_viewer.analysis import rubric
from ares_viewer.analysis import shell_commands as commands

MB16 = 16 * 1024 * 1024
BOUND_S = 30.0  # linear work on 16 MB takes a few seconds on a slow machine; the old parsers took hours
# The longest another thread may wait: one pass of a C scanner over 16 MB (``re`` holds the interpreter while it
# scans) takes a fraction of a second; the old parsers held it for minutes.
GAP_S = 3.0


def finishes_while_others_run(work) -> float:
    """Run ``work`` in a thread beside a ticker; the work's wall time, after asserting both went on."""
    done = threading.Event()
    ticks: list[float] = []

    def tick() -> None:
        while not done.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.01)

    ticker = threading.Thread(target=tick, daemon=True)
    worker = threading.Thread(target=lambda: (work(), done.set()), daemon=True)
    ticker.start()
    start = time.perf_counter()
    worker.start()
    worker.join(BOUND_S)
    took = time.perf_counter() - start
    done.set()
    ticker.join()
    assert not worker.is_alive(), f"still parsing after {BOUND_S} s"
    gaps = [b - a for a, b in itertools.pairwise(ticks)]
    assert max(gaps, default=0) < GAP_S, f"another thread waited {max(gaps):.2f} s"
    return took


@pytest.mark.parametrize(
    "answer",
    [
        pytest.param("{" * MB16, id="16 MB of {"),
        pytest.param('{"match": true, "steps": [' + "[" * (MB16 // 2) + "]}", id="deeply nested"),
        pytest.param("{ " * (MB16 // 2) + '{"match": false}', id="many opening braces, then the answer"),
    ],
)
def test_a_judges_answer_is_read_in_linear_time(answer, tmp_path):
    from testdata import synthetic

    synthetic.write_episode(tmp_path, synthetic.episode_dict(actions=2, seed=1))
    import ares_viewer

    run = ares_viewer.open_run(tmp_path)
    episode = run.episode(run.episode_ids[0])
    got: list[rubric.Verdict] = []
    finishes_while_others_run(lambda: got.append(rubric.read_answer(answer, episode)))
    assert got[0].answer == rubric.ERROR  # none of them is the JSON asked for
    assert rubric.read_answer('noise {"match": true, "steps": [1]} noise', episode).answer == rubric.YES


@pytest.mark.parametrize(
    "command",
    [
        pytest.param("sed -i " + "a\\ " * (MB16 // 3) + " tests/test_x.py", id="one 16 MB word of escaped spaces"),
        pytest.param("rm " + '"a b" ' * (MB16 // 6) + "tests/conftest.py", id="16 MB of quoted words"),
        pytest.param("cat <<EOF\n" * (MB16 // 8), id="16 MB of here-document openers"),
        pytest.param(">'" * (MB16 // 2), id="16 MB of redirections to unclosed quotes"),
    ],
)
def test_the_command_rules_read_a_16_mb_command_in_linear_time(command):
    commands.simple_commands.cache_clear()
    found: list[object] = []

    def rules() -> None:
        found.extend([commands.runs_tests(command), commands.installs_packages(command), commands.uses_network(command),
                      commands.touched_test_file(command)])

    finishes_while_others_run(rules)
    assert found[:3] == [False, False, False]


def test_shell_words_are_split_as_shlex_splits_them():
    import shlex

    for text in ['a "b c" d', "a 'b \\ c'", 'x\\ y "q\\"r" \'s\'t', "rm -f  tests/a.py\t'b c'", 'a"b"\'c\'\\d', ""]:
        assert commands.shell_split(text) == tuple(shlex.split(text)), text
    for broken in ['a "b', "a 'b", "a\\"]:
        with pytest.raises(ValueError):
            commands.shell_split(broken)
    assert commands.touched_test_file("sed -i 's/a/b/' tests/test_x.py") == "tests/test_x.py"
