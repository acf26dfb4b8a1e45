from google.adk.utils.model_name_utils import extract_model_name, is_gemini_model


# --8<-- [start:model_name_parsing]
def code_under_test():
    names = [
        "projects/acme/locations/us-central1/publishers/google/models/gemini-2.0-flash-001",
        "apigee/gemini-2.5-flash",
    ]
    print([(extract_model_name(name), is_gemini_model(name)) for name in names])


# --8<-- [end:model_name_parsing]


def test_model_name_parsing(capsys):
    code_under_test()
    assert capsys.readouterr().out == "[('gemini-2.0-flash-001', True), ('gemini-2.5-flash', True)]\n"
