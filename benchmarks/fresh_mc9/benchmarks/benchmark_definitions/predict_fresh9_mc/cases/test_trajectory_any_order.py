from google.adk.evaluation.eval_case import IntermediateData, Invocation
from google.adk.evaluation.eval_metrics import EvalMetric, ToolTrajectoryCriterion
from google.adk.evaluation.trajectory_evaluator import TrajectoryEvaluator
from google.genai import types


def invocation(*tool_names: str) -> Invocation:
    """One user turn whose intermediate data holds one tool call per name, each with args {"city": "Oslo"}."""
    return Invocation(
        user_content=types.Content(role="user", parts=[types.Part(text="Weather and local time in Oslo?")]),
        intermediate_data=IntermediateData(tool_uses=[types.FunctionCall(name=name, args={"city": "Oslo"}) for name in tool_names]),
    )


# --8<-- [start:trajectory_any_order]
def code_under_test():
    criterion = ToolTrajectoryCriterion(threshold=1.0, match_type=ToolTrajectoryCriterion.MatchType.ANY_ORDER)
    metric = EvalMetric(metric_name="tool_trajectory_avg_score", threshold=1.0, criterion=criterion)
    evaluator = TrajectoryEvaluator(eval_metric=metric)
    expected = [invocation("get_weather", "get_time")]
    actual = [invocation("get_time", "get_weather", "get_time")]
    result = evaluator.evaluate_invocations(actual, expected)
    print(result.overall_score, result.overall_eval_status.name)


# --8<-- [end:trajectory_any_order]


def test_trajectory_any_order(capsys):
    code_under_test()
    assert capsys.readouterr().out == "1.0 PASSED\n"
