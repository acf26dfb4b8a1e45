from google.adk.planners import PlanReActPlanner
from google.genai import types


# --8<-- [start:react_final_answer]
def code_under_test():
    planner = PlanReActPlanner()
    parts = [types.Part(text="/*PLANNING*/ Check the forecast. /*FINAL_ANSWER*/ Sunny in Oslo.")]
    for part in planner.process_planning_response(None, parts):
        print(part.thought, repr(part.text.strip()))


# --8<-- [end:react_final_answer]


def test_react_final_answer(capsys):
    code_under_test()
    assert capsys.readouterr().out == "True 'Check the forecast.'\nNone 'Sunny in Oslo.'\n"
