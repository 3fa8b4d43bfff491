from textkit import slugify


def test_ascii():
    assert slugify("Hello, World!") == "hello-world"


def test_accents():
    assert slugify("Crème brûlée à la carte") == "creme-brulee-a-la-carte"


def test_uppercase_accents():
    assert slugify("Ångström ÜBER") == "angstrom-uber"


def test_no_ascii_form():
    assert slugify("日本語 guide") == "guide"


def test_only_symbols():
    assert slugify("¿¡!?") == ""
