"""No function of toyspt (or of theory/) runs over :data:`MAX_LINES` lines, counted from the source
with ast from its ``def`` line to its last line (docstring, nested functions and comments
included): a longer one is split into named steps or a small class."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("toyspt", "theory")
MAX_LINES = 80


def lines(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    return fn.end_lineno - fn.lineno + 1


def long_functions(limit: int = MAX_LINES) -> list[tuple[int, str]]:
    out = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and lines(node) > limit:
                    out.append((lines(node), f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"))
    return sorted(out, reverse=True)


def test_no_function_runs_over_eighty_lines():
    long = long_functions()
    assert not long, f"functions over {MAX_LINES} lines (split them into named steps): {long}"


def test_the_count_reads_def_to_last_line_and_sees_nested_functions():
    fn = ast.parse("def f():\n    '''doc'''\n\n    def g():\n        return 1\n    return g\n").body[0]
    assert lines(fn) == 6 and lines(fn.body[1]) == 2
    assert long_functions(limit=20)  # the count reads the folders themselves: some function is over 20 lines
