"""The default agent's text protocol: one bash block per response, results in tags."""

from ares_viewer.base import agent_text
from testdata import synthetic


def test_single_bash_block_is_the_command():
    parsed = agent_text.parse_response("THOUGHT: look\n\n```bash\nls -la\n```\n")
    assert parsed.thought == "THOUGHT: look"
    assert parsed.command == "ls -la"


def test_two_blocks_mean_no_command():
    parsed = agent_text.parse_response("```bash\nls\n```\nand\n```bash\npwd\n```")
    assert parsed.command is None and parsed.bash_blocks == 2


def test_plain_result():
    result = agent_text.parse_result(synthetic.result_message(2, "boom\n"))
    assert result.returncode == 2 and result.output == "boom\n" and not result.format_error


def test_elided_result_keeps_head_and_tail():
    output = "a" * 6000 + "MIDDLE" + "b" * 8000
    result = agent_text.parse_result(synthetic.result_message(0, output))
    assert result.elided_chars == len(output) - 10000
    assert result.output.startswith("a" * 5000) and result.output.endswith("b" * 5000)
    assert "MIDDLE" not in result.output


def test_format_error_message():
    result = agent_text.parse_result("Please always provide EXACTLY ONE action in triple backticks, found 2 actions.")
    assert result.format_error and result.returncode is None


def test_submission_is_recognised():
    text = synthetic.result_message(0, "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\ndiff --git a/x b/x\n")
    assert agent_text.parse_result(text).submitted


def test_tool_call_arguments():
    assert agent_text.command_from_tool_call("bash", '{"command": "pytest -q"}') == "pytest -q"
    assert agent_text.command_from_tool_call("bash", "not json") == "not json"


def test_what_the_counterfactual_loop_writes_the_readers_read_back():
    """One declaration of the protocol: the format error and result message written are the ones parsed."""
    assert agent_text.parse_result(agent_text.format_error(2)).format_error
    result = agent_text.parse_result(agent_text.result_message(None, "no code\n"))
    assert result.returncode == -1 and result.output == "no code\n"
    for marker in agent_text.SUBMIT_MARKERS:
        command = f"echo {marker} && git diff --cached"
        assert agent_text.is_submit(command)
        assert agent_text.submitted_text(f"{marker}\ndiff --git a/x b/x\n") == "diff --git a/x b/x\n"
    assert not agent_text.is_submit("echo done")
