from google.adk.code_executors import CodeExecutorContext
from google.adk.sessions.state import State


# --8<-- [start:code_executor_error_count]
def code_under_test():
    state = State(value={}, delta={})
    context = CodeExecutorContext(state)
    context.increment_error_count("inv-1")
    context.increment_error_count("inv-1")
    print(context.get_error_count("inv-1"), context.get_error_count("inv-2"))
    context.reset_error_count("inv-1")
    print(context.get_error_count("inv-1"), state.to_dict())


# --8<-- [end:code_executor_error_count]


def test_code_executor_error_count(capsys):
    code_under_test()
    assert capsys.readouterr().out == ("2 0\n0 {'_code_execution_context': {}, '_code_executor_error_counts': {}}\n")
