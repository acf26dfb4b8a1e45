"""Pull e-mail addresses out of free text such as support messages."""

import re

EMAIL_PATTERN = r"[\w.+-]+@(?:[\w-]+\.)+[A-Za-z]{2,}"


def extract_emails(text: str) -> list[str]:
    """Every address in ``text``, in order of appearance."""
    return re.findall(EMAIL_PATTERN, text)


def unique_domains(text: str) -> list[str]:
    """Sorted, lower-cased domains of the addresses found in ``text``."""
    return sorted({address.split("@", 1)[1].lower() for address in re.findall(EMAIL_PATTERN, text)})
