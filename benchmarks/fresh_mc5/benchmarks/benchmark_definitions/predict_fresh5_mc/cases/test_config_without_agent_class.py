import tempfile
from pathlib import Path

from google.adk.agents import config_agent_utils

CONFIG_DIR = Path(tempfile.mkdtemp(prefix="fresh5_"))


# --8<-- [start:config_without_agent_class]
HELPER_YAML = """\
name: helper
model: gemini-2.0-flash
instruction: Answer in one sentence.
"""


def code_under_test():
    path = CONFIG_DIR / "root_agent.yaml"
    path.write_text(HELPER_YAML)
    agent = config_agent_utils.from_config(str(path))
    print(type(agent).__name__, agent.name, agent.model)


# --8<-- [end:config_without_agent_class]


def test_config_without_agent_class(capsys):
    """Expected: a config without agent_class builds an LlmAgent."""
    code_under_test()
    assert capsys.readouterr().out.strip() == "LlmAgent helper gemini-2.0-flash"
