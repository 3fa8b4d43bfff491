from textkit import slugify


def test_ascii_title():
    assert slugify("Hello, World!") == "hello-world"


def test_accented_title():
    assert slugify("Crème brûlée") == "creme-brulee"
