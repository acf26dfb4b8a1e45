from pathlib import Path

from google.adk.cli.utils.agent_loader import AgentLoader


# --8<-- [start:list_agents]
def code_under_test(root: Path):
    (root / "weather").mkdir()
    (root / "weather" / "__init__.py").write_text("from . import agent\n")
    (root / "weather" / "agent.py").write_text("")
    (root / "greeter").mkdir()
    (root / "greeter" / "root_agent.yaml").write_text("name: greeter\nmodel: gemini-2.0-flash\n")
    (root / "notes").mkdir()
    (root / "notes" / "todo.md").write_text("- add a billing agent\n")
    (root / "__pycache__").mkdir()
    (root / "README.md").write_text("# Agents\n")
    print(AgentLoader(agents_dir=str(root)).list_agents())


# --8<-- [end:list_agents]


def test_list_agents(tmp_path, capsys):
    code_under_test(tmp_path)
    assert capsys.readouterr().out == "['greeter', 'weather']\n"
