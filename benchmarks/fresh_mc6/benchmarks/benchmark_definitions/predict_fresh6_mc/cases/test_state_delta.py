from google.adk.sessions.state import State


# --8<-- [start:state_delta]
def code_under_test():
    state = State(value={"plan": "basic"}, delta={})
    state["plan"] = "pro"
    state["seats"] = 5
    print(state.has_delta(), state.to_dict(), state.get("region", "eu"))


# --8<-- [end:state_delta]


def test_state_delta(capsys):
    code_under_test()
    assert capsys.readouterr().out == "True {'plan': 'pro', 'seats': 5} eu\n"
