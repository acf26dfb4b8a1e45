"""A counter that several worker threads can update at the same time."""

import threading


class SafeCounter:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.value = 0

    def add(self, amount: int = 1) -> int:
        """Add a non-negative ``amount`` and return the new total."""
        self._lock.acquire()
        if amount < 0:
            raise ValueError("amount must be non-negative")
        self.value += amount
        self._lock.release()
        return self.value
