import csv

from fixed import FIELDS, write_orders


def test_header_and_rows(tmp_path):
    target = tmp_path / "orders.csv"
    count = write_orders(str(target), [
        {"order_id": 1, "customer": "Ada", "total": "9.50"},
        {"order_id": 2, "customer": "Linus", "total": "12.00"},
    ])
    assert count == 2
    lines = target.read_text(encoding="utf-8").splitlines()
    assert lines[0] == ",".join(FIELDS)
    assert lines[1] == "1,Ada,9.50"


def test_round_trip_with_extra_keys(tmp_path):
    target = tmp_path / "orders.csv"
    write_orders(str(target), [{"order_id": 7, "customer": "Grace, H.", "total": "1", "note": "x"}])
    with open(target, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert rows == [{"order_id": "7", "customer": "Grace, H.", "total": "1"}]
