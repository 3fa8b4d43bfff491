"""A counterfactual through a real in-process model: ARES's HookedTransformerLLMClient, its activations captured.

Runs in the Python 3.12 interp venv with the checkout on PYTHONPATH and a Docker engine with the sample base
image: continues ``--episode`` from ``--step`` with a hint added to the model's observation, through a
random-weight HookedTransformer behind ARES's own client (``counterfactual.ares_client``), inside
``automatic_activation_capture`` (``counterfactual.run(..., activations=capture)``): the capture is saved beside
the new episode with the tokens of every call. ``--fail-at N`` makes model call N raise (the episode ends
errored, its capture still saved). Prints one JSON object. ``--case OUT MAX_STEPS FAIL_AT`` (repeated; FAIL_AT
``-`` for none) runs several such counterfactuals one after the other in this one process (each with a model and a
capture of its own; torch and TransformerLens are imported once), printing one JSON object per case, in order.

    PYTHONPATH=. $(bash .ci/interp-venv.sh) testdata/ares_counterfactual.py --episode E.json --step 1 --out DIR
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import ares_capture

from ares_viewer import counterfactual
from ares_viewer.runs import run

HINT = "Hint: look at the tests first."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episode", required=True)
    parser.add_argument("--step", type=int, default=1)
    parser.add_argument("--out")
    parser.add_argument("--max-steps", type=int, default=2)
    parser.add_argument("--session", default=None)
    parser.add_argument("--fail-at", type=int, default=None, help="make this model call raise")
    parser.add_argument("--case", action="append", nargs=3, default=[], metavar=("OUT", "MAX_STEPS", "FAIL_AT"),
                        help="a counterfactual to run (repeatable; FAIL_AT - for none), instead of --out, "
                        "--max-steps and --fail-at")
    args = parser.parse_args()
    cases = [(out, int(steps), None if fail == "-" else int(fail)) for out, steps, fail in args.case] or [
        (args.out, args.max_steps, args.fail_at)]
    if any(out is None for out, _, _ in cases):
        parser.error("--out or --case is required")
    for out, max_steps, fail_at in cases:
        print(json.dumps(run_one(args.episode, args.step, out, max_steps, fail_at, args.session)), flush=True)


def run_one(episode: str, step: int, out: str, max_steps: int, fail_at: int | None, session: str | None) -> dict:
    """One counterfactual from ``step`` of ``episode`` into ``out``, through a fresh model inside its own capture."""
    model, _, client = ares_capture.build_client()
    from ares.contrib.mech_interp import activation_capture

    def hinted(messages: list[dict]) -> list[dict]:
        return [*messages[:-1], {**messages[-1], "content": f"{messages[-1]['content']}\n\n{HINT}"}]

    with activation_capture.automatic_activation_capture(model) as capture:
        try:
            result = counterfactual.run(
                run.load_episode(episode), step, edit=hinted, client=client_of(client, fail_at),
                out_dir=out, max_steps=max_steps, session=session, activations=capture)
        except counterfactual.CounterfactualError as exc:
            result = exc.result
    return {"out": out, "path": result.path, "episode_id": result.episode_id, "responses": list(result.responses),
            "status": result.status, "error": result.error}


def client_of(client, fail_at: int | None):
    """ARES's client as a counterfactual client; with ``fail_at``, that call raises before the model runs (as an
    endpoint that does not answer)."""
    ask = counterfactual.ares_client(client)
    calls = []

    async def call(messages, system_prompt):
        calls.append(1)
        if fail_at is not None and len(calls) >= fail_at:
            raise RuntimeError(f"scripted failure at model call {len(calls)}")
        return await ask(messages, system_prompt)

    return call


if __name__ == "__main__":
    main()
