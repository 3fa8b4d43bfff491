"""Inspect AI logs written by ``inspect-ai`` itself, for the tests of the ``inspect_ai`` adapter and its benchmark.

One tiny task with Inspect's mock model (``mockllm/model``) answering by the sample's input, a shell-like tool
defined here (it returns a string; no sandbox), a scorer with an explanation, a sample whose tool raises (the
sample errors) and a sample that never stops calling the tool (``message_limit`` ends it).
"""

from __future__ import annotations

import concurrent.futures
import pathlib

from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.model import (
    ChatMessageAssistant,
    ChatMessageTool,
    ContentReasoning,
    ContentText,
    ModelOutput,
    ModelUsage,
    get_model,
)
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, scorer
from inspect_ai.solver import TaskState, generate, use_tools
from inspect_ai.tool import tool

MODEL = "mockllm/model"
# Sample id -> what the sample does.
SAMPLES = {
    "solve": "lists the folder with the tool, then answers 42 (scored C)",
    "wrong": "answers 41 at once (scored I)",
    "crash": "runs a command that makes the tool raise: the sample errors",
    "loop": "calls the tool until the message limit ends it",
    "typo": "calls the tool with an argument it does not take (Inspect refuses the call before running it: a "
            "parsing error), then answers 42",
}
# The scorer asks the (mock) model for a note too: a model-graded scorer's call, which is not a step.
MESSAGE_LIMIT = 6


@tool
def shell(files: int = 0):
    """``files``: how many more file names a listing shows (Inspect moves a text of over 100 characters into the
    sample's attachments)."""

    async def execute(cmd: str) -> str:
        """Run a shell command.

        Args:
            cmd: the command to run.
        """
        if cmd == "boom":
            raise RuntimeError("the tool exploded")
        return f"$ {cmd}\nanswer.txt\nnotes.md" + "".join(f"\nfile-{n}.txt" for n in range(files))

    return execute


@scorer(metrics=[accuracy()])
def contains_target():
    async def score(state: TaskState, target: Target) -> Score:
        answer = state.output.completion
        found = target.text in answer
        # A model-graded note: the grader's call is a model event of the scorer, not a step of the agent.
        note = await get_model(MODEL, custom_outputs=_respond).generate(f"grade: {answer}")
        return Score(value=CORRECT if found else INCORRECT, answer=answer,
                     explanation=f"the answer {'contains' if found else 'lacks'} the target {target.text!r}",
                     metadata={"target": target.text, "grader": note.completion})

    return score


def _respond(messages, tools, tool_choice, config) -> ModelOutput:
    output = _answer(messages)
    # Usage given, so the mock model does not count tokens itself (its tokenizer would be downloaded).
    output.usage = ModelUsage(input_tokens=10 * len(messages), output_tokens=7, total_tokens=10 * len(messages) + 7)
    return output


def _answer(messages) -> ModelOutput:
    task = messages[0].text if messages else ""
    if task.startswith("grade: "):
        return ModelOutput.from_content(MODEL, "GRADE: noted")
    results = sum(isinstance(m, ChatMessageTool) for m in messages)
    if task == "wrong":
        return ModelOutput.from_content(MODEL, "I think it is 41")
    if task == "crash":
        return ModelOutput.for_tool_call(MODEL, "shell", {"cmd": "boom"})
    if task == "typo":
        return ModelOutput.from_content(MODEL, "It is 42") if results else ModelOutput.for_tool_call(
            MODEL, "shell", {"command": "ls"})
    if task == "solve" and results:  # with the model's reasoning, as a reasoning model answers
        return ModelOutput.from_message(ChatMessageAssistant(
            content=[ContentReasoning(reasoning="6 times 7 is 42"), ContentText(text="The answer is 42")],
            model=MODEL, source="generate"))
    return ModelOutput.for_tool_call(MODEL, "shell", {"cmd": f"ls step{results}"})


def write_logs(folder: pathlib.Path, log_format: str = "eval", epochs: int = 1, copies: int = 1,
               files: int = 0) -> pathlib.Path:
    """Run the task with Inspect, writing its log into ``folder`` in ``log_format`` (``eval`` or ``json``).

    ``copies``: how many samples of each kind (ids ``solve``, ... for one; ``solve-0``, ``solve-1``, ... for more).
    ``files``: how many more file names the shell's listings show (``shell``).
    """
    dataset = [Sample(id=name if copies == 1 else f"{name}-{n}", input=name, target="42")
               for n in range(copies) for name in SAMPLES]
    task = Task(dataset=dataset,
                solver=[use_tools(shell(files)), generate()], scorer=contains_target(), message_limit=MESSAGE_LIMIT,
                name="arith")
    # Inspect runs its own event loop; a thread of its own keeps it clear of one already running in this
    # thread (Playwright's sync API leaves one for the rest of a test session).
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        logs = pool.submit(inspect_eval, task, model=get_model(MODEL, custom_outputs=_respond), log_dir=str(folder),
                           log_format=log_format, display="none", epochs=epochs, fail_on_error=False).result()
    return pathlib.Path(logs[0].location)


FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "inspect"
"""The committed log ``arith.eval`` (the hostile archives are built from it), written by
``python3 -m testdata.inspect_logs``."""


def write_fixtures(folder: pathlib.Path = FIXTURES, formats: tuple[str, ...] = ("eval",)) -> list[pathlib.Path]:
    """Write the task's log in ``formats`` into ``folder`` under stable names (``arith.eval``, ``arith.json``)."""
    import tempfile

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for log_format in formats:
        with tempfile.TemporaryDirectory() as tmp:
            log = write_logs(pathlib.Path(tmp), log_format)
            target = folder / f"arith.{log_format}"
            target.write_bytes(log.read_bytes())
            written.append(target)
    return written


if __name__ == "__main__":
    for path in write_fixtures():
        print(f"{path} ({path.stat().st_size:,} bytes)")
