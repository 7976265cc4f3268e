"""The house rules of ARCHITECTURE.md, checked on the code: imports point down (no cycle),
every module imports on its own, no module grows past the size we can read, and each
layer imports nothing above it."""
import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 400
# modules of the run system and above (entry points, figures); nothing below may import them
UPPER = ("toyspt.runs", "toyspt.figs", "toyspt.cli", "toyspt.cli_flags", "toyspt.figs_cli", "toyspt.probe_cli",
         "toyspt.ucr_cli", "toyspt.lra.cli", "toyspt.arms", "toyspt.ucr_runs", "toyspt.lra.demo")
LOWER = ("toyspt.tasks", "toyspt.positional", "toyspt.attention", "toyspt.model", "toyspt.recipes",
         "toyspt.train", "toyspt.vectorized", "toyspt.directions", "toyspt.probes", "toyspt.tracking",
         "toyspt.ucr", "toyspt.atomic", "toyspt.lra.listops", "toyspt.lra.inputs", "toyspt.lra.model",
         "toyspt.lra.lightning", "toyspt.lra.checkpoint", "toyspt.lra.report")


def modules() -> dict[str, Path]:
    return {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
            for p in sorted((ROOT / "toyspt").rglob("*.py"))}


def import_graph() -> dict[str, set[str]]:
    """module -> toyspt modules it imports (anywhere in its body), from the source."""
    mods = modules()

    def resolve(name: str) -> str:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name

    graph = {}
    for m, path in mods.items():
        pkg = m if path.name == "__init__.py" else m.rpartition(".")[0]
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                deps |= {resolve(a.name) for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = pkg.split(".")
                    base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
                deps |= {resolve(f"{base}.{a.name}") for a in node.names} | {resolve(base)}
        graph[m] = {d for d in deps if d and d != m and not m.startswith(d + ".")}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(u):
        state[u] = 1
        stack.append(u)
        for v in sorted(graph.get(u, ())):
            if state.get(v) == 1:
                return stack[stack.index(v):] + [v]
            if not state.get(v) and (c := visit(v)):
                return c
        stack.pop()
        state[u] = 2
        return None

    for m in sorted(graph):
        if not state.get(m) and (c := visit(m)):
            return c
    return None


def test_import_graph_is_acyclic():
    cycle = find_cycle(import_graph())
    assert cycle is None, " -> ".join(cycle)


def test_cycle_finder_finds_a_planted_cycle():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert find_cycle(g) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_lower_layers_import_nothing_above_them():
    graph = import_graph()
    assert set(LOWER) <= set(graph), sorted(set(LOWER) - set(graph))
    bad = {m: sorted(d for d in graph[m] if d.startswith(UPPER)) for m in LOWER}
    assert not {m: d for m, d in bad.items() if d}


def test_no_module_is_too_long():
    long = {m: n for m, p in modules().items() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, long


def test_every_module_imports_on_its_own():
    """Each toyspt module imports first in a clean toyspt namespace (torch stays loaded)."""
    code = (
        "import importlib, sys, torch\n"
        f"mods = {sorted(modules())!r}\n"
        "for m in mods:\n"
        "    for k in [k for k in sys.modules if k == 'toyspt' or k.startswith(('toyspt.', 'theory'))]:\n"
        "        del sys.modules[k]\n"
        "    importlib.import_module(m)\n"
        "print(len(mods))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout.strip()) == len(modules())
