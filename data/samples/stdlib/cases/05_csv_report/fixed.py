"""Export order records to a CSV file that spreadsheet tools can open."""

import csv

FIELDS = ["order_id", "customer", "total"]


def write_orders(path: str, orders: list[dict]) -> int:
    """Write ``orders`` to ``path`` with a header row; extra keys are ignored.

    Returns the number of data rows written.
    """
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=FIELDS, extrasaction="ignore")
        writer.writeheader()
        for order in orders:
            writer.writerow(order)
    return len(orders)
