"""The house rules, checked on the code: the folders of ``toyspt/`` are the layers (plus
``theory/``, installed as ``toyspt.theory``), every import points to the same or a lower
layer (so there is no cycle between layers, and none inside one either), every module
imports on its own, and no module grows past the size we can read."""
import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 400
# The layer diagram, lowest first: every folder of toyspt/ is one layer (theory/ is the
# package toyspt.theory). A new folder must be placed here, or the test below fails.
LAYERS = ("util", "data", "kinds", "nn", "train", "probe", "runs", "analysis", "theory", "ucr", "lra", "studies",
          "figs", "cli")


def modules() -> dict[str, Path]:
    """Dotted module name -> file, for toyspt/ and theory/ (as toyspt.theory)."""
    out = {}
    for base, prefix in ((ROOT / "toyspt", ("toyspt",)), (ROOT / "theory", ("toyspt", "theory"))):
        for p in sorted(base.rglob("*.py")):
            parts = prefix + p.relative_to(base).with_suffix("").parts
            out[".".join(parts).removesuffix(".__init__")] = p
    return out


def layer(module: str) -> float:
    """Rank of a module's layer. The root package (toyspt/__init__: the version and the lazy
    table of public names) sits just above util, the only layer it imports, and below every
    layer that imports it (for ``__version__``)."""
    parts = module.split(".")
    return 0.5 if len(parts) == 1 else LAYERS.index(parts[1])


STRING_IMPORTS = ("import_module", "__import__")  # calls that import the module their string names


def named_modules(node: ast.AST) -> list[str]:
    """The toyspt modules a string in ``node`` names as an import: the argument of
    ``importlib.import_module("...")`` or ``__import__("...")``, or a string that is nothing but
    a toyspt module's dotted name, as tables of modules to load hold (an entry point's
    ``module:function``, as toyspt.cli.main's table of subcommands, is not: it names what to call)."""
    if isinstance(node, ast.Call):
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
        if name in STRING_IMPORTS and node.args and isinstance(node.args[0], ast.Constant):
            return [str(node.args[0].value)]
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(MODULE_NAME, node.value):
        return [node.value]
    return []


MODULE_NAME = r"toyspt(\.[a-z_][a-z0-9_]*)+"


def import_graph() -> dict[str, set[str]]:
    """module -> toyspt modules it imports (anywhere in its body, lazy imports too, and modules
    it imports by name in a string: ``import_module("toyspt.x.y")``, a table of module names).
    The root package's lazy table of public names is the one place that names every layer: it
    loads nothing until a name is used, and no module of toyspt imports those names from it."""
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
            elif m != "toyspt":
                deps |= {resolve(n) for n in named_modules(node) if n.startswith("toyspt.")}
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


def test_every_folder_is_a_layer_and_no_module_sits_loose():
    folders = {p.name for p in (ROOT / "toyspt").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders | {"theory"} == set(LAYERS), sorted(folders ^ (set(LAYERS) - {"theory"}))
    loose = sorted(p.name for p in (ROOT / "toyspt").glob("*.py") if p.name != "__init__.py")
    assert not loose, f"modules outside the layer folders: {loose}"


def test_imports_point_down():
    graph = import_graph()
    up = {m: sorted(d for d in deps if layer(d) > layer(m)) for m, deps in graph.items()}
    assert not {m: d for m, d in up.items() if d}


def test_a_planted_upward_import_is_found():
    assert layer("toyspt.cli.main") > layer("toyspt.nn.model") > layer("toyspt")
    graph = {"toyspt.nn.model": {"toyspt.figs.task"}}
    assert [m for m, deps in graph.items() if any(layer(d) > layer(m) for d in deps)] == ["toyspt.nn.model"]


def test_a_module_imported_by_its_name_in_a_string_is_an_import():
    code = ("import importlib\nKINDS = ('toyspt.ucr.kind', 'toyspt.cli.ucr:register')\n"
            "importlib.import_module('toyspt.figs.task')\n__import__('toyspt.lra.model')\ndoc = 'toyspt is here'\n")
    named = {n for node in ast.walk(ast.parse(code)) for n in named_modules(node)}
    assert named == {"toyspt.ucr.kind", "toyspt.figs.task", "toyspt.lra.model"}


def test_import_graph_is_acyclic():
    cycle = find_cycle(import_graph())
    assert cycle is None, " -> ".join(cycle)


def test_cycle_finder_finds_a_planted_cycle():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert find_cycle(g) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_module_is_too_long():
    long = {m: n for m, p in modules().items() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, long


def test_every_module_imports_on_its_own():
    """Each module imports first in a clean toyspt namespace (torch stays loaded); the
    ``__main__`` modules are programs, run by ``python -m``, not imported."""
    runnable = sorted(m for m in modules() if not m.endswith(".__main__"))
    code = (
        "import importlib, sys, torch\n"
        f"mods = {runnable!r}\n"
        "for m in mods:\n"
        "    for k in [k for k in sys.modules if k == 'toyspt' or k.startswith('toyspt.')]:\n"
        "        del sys.modules[k]\n"
        "    importlib.import_module(m)\n"
        "print(len(mods))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout.strip()) == len(runnable)


def test_theory_is_not_a_top_level_package_when_installed():
    """Installed, theory/ is toyspt.theory; outside the repository no ``theory`` imports."""
    out = subprocess.run([sys.executable, "-c", "import importlib.util as u, toyspt.theory as t; "
                          "print(u.find_spec('theory') is None, t.__name__)"],
                         cwd="/", capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True", "toyspt.theory"]
