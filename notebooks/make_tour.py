"""Writes tour.ipynb (outputs empty; CI executes it): ``python notebooks/make_tour.py``."""

from __future__ import annotations

import pathlib

import nbformat

CELLS = [
    ("md", "# A tour of ares-viewer from a notebook\n\nThe same objects and figures the app shows, from "
           "Python: open a run, find the failures, read what the model saw at one step, diff responses, "
           "align a failed attempt with a successful one, search."),
    ("code", "import pathlib\n\nimport ares_viewer\nfrom ares_viewer import align, plots, search, textdiff\n\n"
             "# The bundled sample runs, found from the repository root or any folder below it.\n"
             "here = pathlib.Path.cwd()\n"
             "root = next(p for p in (here, *here.parents) if (p / 'sample_runs').is_dir()) / 'sample_runs'\n"
             "location = sorted(p for p in root.iterdir() if p.is_dir() and any(p.glob('*.json')))[0]\n"
             "run = ares_viewer.open_run(location)\nrun"),
    ("md", "## The run\n\nHeadline figures, and one row per episode."),
    ("code", "run.stats()"),
    ("code", "run.episodes[['task_name', 'outcome', 'total_reward', 'num_actions', 'total_cost', 'episode_id']]"),
    ("code", "plots.reward_vs_actions(run.episodes)"),
    ("code", "plots.success_by_task(run.episodes)"),
    ("md", "Why episodes failed: alike failures grouped, with their counts and episodes."),
    ("code", "run.failures()[['reason', 'episodes', 'tasks']]"),
    ("md", "The same failures clustered by root cause read from each episode (the error at the bottom of its "
           "chain, the tests its verifier failed, its last failing command), and what the agents did: each "
           "behaviour flag's rate among solved and failed episodes (docs/behaviours.md)."),
    ("code", "from ares_viewer import fsdiff\nfrom ares_viewer.analysis import behaviours, failure_clusters\n\n"
             "failure_clusters.of_run(run)[['cause', 'kind', 'episodes', 'share']]"),
    ("code", "behaviours.rates(behaviours.run_table(run, fsdiff.paths_by_step))"
             "[['flag', 'solved_rate', 'failed_rate', 'difference']]"),
    ("md", "## A failed episode\n\nA finished attempt with no reward, at a task another attempt solved."),
    ("code", "frame = run.episodes\nsolved_tasks = set(frame.loc[frame.total_reward > 0, 'task_name'])\n"
             "failed = frame[(frame.total_reward <= 0) & frame.task_name.isin(solved_tasks)]\n"
             "episode = run.episode(failed.episode_id.iloc[0])\nepisode"),
    ("code", "plots.step_timeline(episode.steps_frame())"),
    ("md", "What entered the model's context before its second action, and what it answered:"),
    ("code", "for message in episode.new_messages(2):\n    print(f'--- {message.role}')\n"
             "    print(message.content[:500])\nprint('=== response')\nprint(episode.step(2).response)"),
    ("code", "print(textdiff.unified(episode.step(1).response, episode.step(2).response, "
             "a_name='step 1', b_name='step 2'))"),
    ("md", "## Failed vs solved, aligned\n\nSteps are paired by command similarity (a global alignment with "
           "gaps); marked: where the failed attempt first did something the solved one did not."),
    ("code", "solved = run.episode(run.other_attempt(episode.episode_id))  # the best other attempt at the task\n"
             "pairs = align.align_episodes(episode, solved)\nat = align.divergence(pairs, side='a')\n"
             "for i, pair in enumerate(pairs):\n"
             "    a = episode.step(pair.a).command if pair.a is not None else '—'\n"
             "    b = solved.step(pair.b).command if pair.b is not None else '—'\n"
             "    mark = '  <- diverged' if i == at else ''\n"
             "    a, b = str(a).splitlines()[0][:50], str(b).splitlines()[0][:50]\n"
             "    print(f'{pair.similarity:4.2f} | {a:<50} | {b}{mark}')"),
    ("md", "## Search"),
    ("code", "for hit in search.hits(run, r'Traceback|Error', regex=True, limit=5):\n"
             "    print(hit.episode_id[:8], hit.step, hit.field, hit.snippet[:100])"),
]


def build() -> nbformat.NotebookNode:
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.cells = [nbformat.v4.new_markdown_cell(src) if kind == "md" else nbformat.v4.new_code_cell(src)
                      for kind, src in CELLS]
    return notebook


if __name__ == "__main__":
    nbformat.write(build(), pathlib.Path(__file__).with_name("tour.ipynb"))
