from google.adk.tools.openapi_tool.auth.auth_helpers import token_to_scheme_credential


# --8<-- [start:oauth2_token_scheme]
def code_under_test():
    auth_scheme, auth_credential = token_to_scheme_credential("oauth2Token", "header", "Authorization", "s3cr3t-token")
    print(type(auth_scheme).__name__, auth_credential.auth_type.value, auth_credential.http.scheme, auth_credential.http.credentials.token)


# --8<-- [end:oauth2_token_scheme]


def test_oauth2_token_scheme(capsys):
    code_under_test()
    assert capsys.readouterr().out == "HTTPBearer http bearer s3cr3t-token\n"
