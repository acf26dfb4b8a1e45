from google.adk.sessions.state import State


# --8<-- [start:state_value_and_delta]
def code_under_test():
    state = State(value={"plan": "basic"}, delta={"credits": 5})
    state["plan"] = "pro"
    print(state.get("credits"), state.has_delta())
    print(state.to_dict())


# --8<-- [end:state_value_and_delta]


def test_state_value_and_delta(capsys):
    """Expected: a read sees the pending delta, and a write goes into both the value and the delta."""
    code_under_test()
    assert capsys.readouterr().out.splitlines() == ["5 True", "{'plan': 'pro', 'credits': 5}"]
