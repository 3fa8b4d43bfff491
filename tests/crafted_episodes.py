"""Small hand-made episodes for pure-logic tests: an episode whose actions ran given commands."""

from __future__ import annotations

from typing import Any

from ares_viewer import model


def episode(
    *runs: tuple[str, int | None],
    episode_id: str | None = None,
    reward: float | None = 0.0,
    task: str = "t",
    outcome: model.Outcome = model.Outcome.COMPLETED,
    metadata: dict[str, Any] | None = None,
) -> model.Episode:
    """An episode whose actions ran ``runs`` (command, return code) in order."""
    steps = [model.Step(index=0, kind=model.StepKind.FIRST)]
    steps += [
        model.Step(index=k, kind=model.StepKind.MID, command=c, returncode=rc) for k, (c, rc) in enumerate(runs, 1)
    ]
    return model.Episode(
        episode_id=episode_id or f"crafted-{len(runs)}-{reward}-{task}",
        task_name=task,
        outcome=outcome,
        total_reward=reward,
        start_time=None,
        end_time=None,
        truncated=False,
        system_prompt=None,
        steps=tuple(steps),
        path="crafted.json",
        format="ares",
        metadata=metadata or {},
        warnings=(),
        messages=(),
        links=(),
    )
