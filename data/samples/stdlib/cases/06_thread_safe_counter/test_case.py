import threading

import pytest

from fixed import SafeCounter


def test_many_threads_add_up():
    counter = SafeCounter()

    def work():
        for _ in range(1000):
            counter.add()

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert counter.value == 8000


def test_rejected_amount_does_not_leave_counter_stuck():
    counter = SafeCounter()
    with pytest.raises(ValueError):
        counter.add(-1)
    worker = threading.Thread(target=counter.add, args=(5,), daemon=True)
    worker.start()
    worker.join(timeout=2)
    assert not worker.is_alive(), "add() blocked after an earlier error"
    assert counter.value == 5
