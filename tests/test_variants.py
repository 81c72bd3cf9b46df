"""variant(): an edited copy of a function or class, as a notebook's traps make them."""
import linecache
import sys
import types

import pytest

from lab_utils.variants import variant


def notebook_class(monkeypatch, source: str, name: str):
    """A class defined as a notebook cell defines it: its module has no file, its source is only in linecache."""
    module = types.ModuleType("notebook_kernel")  # like a kernel's __main__: no __file__
    monkeypatch.setitem(sys.modules, module.__name__, module)
    filename = "<notebook cell 1>"
    monkeypatch.setitem(linecache.cache, filename, (len(source), None, source.splitlines(True), filename))
    exec(compile(source, filename, "exec"), vars(module))
    return getattr(module, name)


def test_a_class_defined_in_a_notebook_cell_is_edited_like_a_function(monkeypatch, capsys):
    cell = ("import math\n\n\nclass Scale:\n    @staticmethod\n    def forward(x):\n        return x * 2\n\n"
            "    @staticmethod\n    def backward(grad):\n        return grad\n\n\nprint('the rest of the cell')\n")
    right = notebook_class(monkeypatch, cell, "Scale")
    trap = variant(right, {"        return grad": "        return grad * 3"}, name="three times")
    assert (right.backward(1), trap.backward(1), trap.forward(1)) == (1, 3, 2)
    assert "+        return grad * 3" in capsys.readouterr().out
    with pytest.raises(ValueError, match="occurs 0 times"):
        variant(right, {"return x * 5": "return x"}, name="missing")
