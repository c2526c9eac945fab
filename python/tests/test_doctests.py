"""The examples in pyramesh's docstrings, run as doctests."""
import doctest

import numpy as np

import pyramesh


def test_docstring_examples():
    result = doctest.testmod(pyramesh, extraglobs={"pyramesh": pyramesh, "np": np},
                             optionflags=doctest.NORMALIZE_WHITESPACE, report=True)
    assert result.attempted >= 20
    assert result.failed == 0


def test_stubs_cover_the_api():
    """The type stubs name every public function and class."""
    import ast
    import os

    path = os.path.join(os.path.dirname(pyramesh.__file__), "__init__.pyi")
    with open(path) as f:
        tree = ast.parse(f.read())
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    names |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
              if isinstance(t, ast.Name)}
    missing = set(pyramesh.__all__) - names
    assert not missing, missing
    assert os.path.exists(os.path.join(os.path.dirname(pyramesh.__file__), "py.typed"))
