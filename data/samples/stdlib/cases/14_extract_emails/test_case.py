from fixed import extract_emails, unique_domains

MESSAGE = "Contact ann@example.com or bob.smith+x@mail.co.uk. Cc: ANN@Example.com!"


def test_full_addresses_are_returned():
    assert extract_emails(MESSAGE) == ["ann@example.com", "bob.smith+x@mail.co.uk", "ANN@Example.com"]


def test_domains():
    assert unique_domains(MESSAGE) == ["example.com", "mail.co.uk"]


def test_no_addresses():
    assert extract_emails("no contact info here") == []
