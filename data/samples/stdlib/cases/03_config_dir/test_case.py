from fixed import DEFAULT_SETTINGS, ensure_config_file


def test_creates_missing_parents(tmp_path):
    settings = ensure_config_file(str(tmp_path), "myapp")
    assert settings == tmp_path / ".config" / "myapp" / "settings.ini"
    assert settings.read_text(encoding="utf-8") == DEFAULT_SETTINGS


def test_second_call_keeps_user_edits(tmp_path):
    settings = ensure_config_file(str(tmp_path), "myapp")
    settings.write_text("[general]\ntheme = dark\n", encoding="utf-8")
    again = ensure_config_file(str(tmp_path), "myapp")
    assert again == settings
    assert "dark" in again.read_text(encoding="utf-8")


def test_two_apps_share_config_root(tmp_path):
    first = ensure_config_file(str(tmp_path), "one")
    second = ensure_config_file(str(tmp_path), "two")
    assert first.parent.parent == second.parent.parent
