from fixed import Cart


def test_new_carts_do_not_share_state():
    first = Cart("ann")
    second = Cart("bob")
    first.add("apple", 2)
    assert second.items == []
    assert second.quantities == {}


def test_add_accumulates():
    cart = Cart("ann")
    cart.add("apple")
    cart.add("pear", 3)
    cart.add("apple")
    assert cart.items == ["apple", "pear"]
    assert cart.quantities == {"apple": 2, "pear": 3}
    assert cart.total_units() == 5


def test_explicit_items():
    cart = Cart("cy", items=["tea"], quantities={"tea": 1})
    assert cart.total_units() == 1
