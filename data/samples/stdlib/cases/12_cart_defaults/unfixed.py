"""Shopping-cart record used by a checkout service."""

from dataclasses import dataclass


@dataclass
class Cart:
    owner: str
    items: list[str] = []
    quantities: dict[str, int] = {}

    def add(self, item: str, qty: int = 1) -> None:
        if qty < 1:
            raise ValueError("qty must be positive")
        if item not in self.quantities:
            self.items.append(item)
        self.quantities[item] = self.quantities.get(item, 0) + qty

    def total_units(self) -> int:
        return sum(self.quantities.values())
