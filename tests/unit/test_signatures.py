"""No function of toyspt restates a configuration one argument at a time: at most
:data:`MAX_WIDE` functions take more than :data:`MAX_PARAMETERS` parameters (counted from the
source with ast: positional, keyword-only, ``*args`` and ``**kwargs``; ``self`` and ``cls``
not). A run's settings travel as one value (toyspt.train.config.RunConfig)."""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "toyspt"
MAX_PARAMETERS, MAX_WIDE = 8, 3


def parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = fn.args
    names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)]
    return len(names) - (names[:1] in (["self"], ["cls"])) + (a.vararg is not None) + (a.kwarg is not None)


def wide_functions() -> list[tuple[int, str]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and parameters(node) > MAX_PARAMETERS:
                out.append((parameters(node), f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name}"))
    return sorted(out, reverse=True)


def test_at_most_three_functions_take_more_than_eight_parameters():
    wide = wide_functions()
    assert len(wide) <= MAX_WIDE, f"{len(wide)} functions over {MAX_PARAMETERS} parameters: {wide}"


def test_the_count_sees_every_kind_of_parameter():
    fn = ast.parse("def f(self, a, /, b, *c, d, **e): pass").body[0]
    assert parameters(fn) == 5
    assert parameters(ast.parse("def g(cls): pass").body[0]) == 0
    assert parameters(ast.parse("def h(x, cls): pass").body[0]) == 2
    assert (PACKAGE / "train" / "run.py").is_file()  # the count reads the package itself
