from pathlib import Path

from google.adk.evaluation.local_eval_sets_manager import LocalEvalSetsManager


# --8<-- [start:eval_set_file_layout]
def code_under_test(root: Path):
    manager = LocalEvalSetsManager(agents_dir=str(root))
    manager.create_eval_set(app_name="weather_agent", eval_set_id="smoke_tests")
    print(sorted(str(path.relative_to(root)) for path in root.rglob("*") if path.is_file()))


# --8<-- [end:eval_set_file_layout]


def test_eval_set_file_layout(tmp_path, capsys):
    code_under_test(tmp_path)
    assert capsys.readouterr().out == "['weather_agent/smoke_tests.evalset.json']\n"
