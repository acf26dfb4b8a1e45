"""Make sure an application's settings file exists under a base directory."""

from pathlib import Path

DEFAULT_SETTINGS = "[general]\ntheme = light\n"


def ensure_config_file(base_dir: str, app_name: str) -> Path:
    """Create ``<base_dir>/.config/<app_name>/settings.ini`` if needed and return its path.

    Missing parent folders are created; an existing settings file is left untouched.
    """
    config_dir = Path(base_dir) / ".config" / app_name
    config_dir.mkdir(parents=True, exist_ok=True)
    settings = config_dir / "settings.ini"
    if not settings.exists():
        settings.write_text(DEFAULT_SETTINGS, encoding="utf-8")
    return settings
