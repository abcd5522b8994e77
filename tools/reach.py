"""Which kit modules, and how many of their lines, a function reaches: a static call graph read from the AST alone.

    python tools/reach.py rleif_kit.ppo.stage.train
    python tools/reach.py rleif_kit.rewards.reward.RewardScorer rleif_kit.ppo.trainer.train_ppo --json
    python tools/reach.py rleif_kit.ppo.trainer.train_ppo --defs      # also name the reached definitions
    python tools/reach.py rleif_kit.ppo.trainer.train_ppo --annotations   # type annotations count as references
    python tools/reach.py kit.mod.f --package kit --root DIR        # another package, DIR/kit/**.py
    python tools/reach.py rleif_kit.ppo.trainer.train_ppo --stop rleif_kit.core,rleif_kit.worlds
                                                # the layers a reader takes as known: neither counted nor followed

A root is ``module.function``, ``module.Class.method`` or ``module.Class``; several roots are reached together.
Nothing is imported: every ``<package>/**.py`` under the repository root is parsed (stdlib only, Python 3.11).

What it prints: one line per reached module (its path from the root, its package: the first component after the
package's own name, the module's lines: ``len(file.read_text().splitlines())``, and the lines of the reached
definitions in it), then ``N files, L lines (F lines in the reached functions) in P packages``. ``--json``: the
same as JSON, each module with its reached definitions.

What counts as reached, from a root, to a fixed point:

- every name or attribute a reached function reads that resolves to a definition of the package: calls and plain
  references alike (a callback passed by name counts), through ``import``/``from ... import`` (``as`` aliases,
  relative imports, module aliases, re-exports followed to the definition, ``*`` imports, imports inside the
  function); nested functions and lambdas are part of their function; type annotations are not read (unless
  ``--annotations``: then ``paths: RunPaths`` reaches RunPaths and its properties);
- ``self.m``/``cls.m`` in a method: ``m`` of the class or its kit base classes, ``super().m`` of the bases;
- a class: its header, decorators, bases and class-level statements (so a dataclass's fields, the init its
  decorator generates), its ``__init__``, ``__post_init__``, ``__new__`` and properties, and its kit base classes;
  a method reached reaches its class;
- an attribute of an unknown receiver (a local, a parameter, ``self.x.m``): ``m`` of every reached class (its own
  or inherited from a kit base), as instances usually come from reached constructors; likewise a call of a local
  or of ``self.x`` → ``__call__``, ``with`` → ``__enter__``/``__exit__``, ``for`` → ``__iter__``/``__next__``, a
  subscript → ``__getitem__``;
- a module-level name a reached function reads (``X = make_table()`` reaches ``make_table`` too).

The lines of a definition are its span, decorators included; those of a class are its span less its methods',
each reached method adding its own; a module-level assignment read counts its statement's lines.

What it misses: anything resolved at run time (``importlib.import_module`` of a string, ``getattr`` by name, a
registry of names, module ``__getattr__`` redirects), functions reached only through an object it cannot see
being built (an instance of a class no reached code names), and dunder methods beyond those above (operators,
``__len__``, ``__repr__``). Kit imports it cannot resolve are listed on stderr.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
WITH_CLASS = ("__init__", "__post_init__", "__new__")  # reached with their class
PROPERTY = {"property", "cached_property", "setter", "getter", "deleter"}  # decorators' last names

Binding = tuple  # ("def", key) | ("import", module) | ("from", module, name)
Target = tuple  # ("def", key) | ("module", name) | ("self", class key) | ("super", class key) | ("attr", name)


@dataclass
class Def:
    key: str  # "module:qualname"
    module: str
    qualname: str
    kind: str  # "function" | "class" | "method" | "variable"
    nodes: list[ast.AST] = field(default_factory=list)  # more than one where the name is bound again
    cls: str | None = None  # a method's class key


@dataclass
class Module:
    name: str
    path: Path
    is_pkg: bool
    lines: int
    bindings: dict[str, Binding] = field(default_factory=dict)
    stars: list[str] = field(default_factory=list)


@dataclass
class Scope:
    module: str
    cls: str | None = None  # the class key of a method or a class body
    self_name: str | None = None  # a method's first parameter
    imports: dict[str, Binding] = field(default_factory=dict)  # imports inside the function
    local: set[str] = field(default_factory=set)  # names the function binds itself


def _span(node: ast.AST) -> range:
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return range(first, node.end_lineno + 1)


def _last_name(expr: ast.AST) -> str:
    return expr.attr if isinstance(expr, ast.Attribute) else expr.id if isinstance(expr, ast.Name) else ""


def _children(node: ast.AST, annotations: bool = False):
    """The nodes under ``node``, itself included, less type annotations (which run nothing) unless ``annotations``."""
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        for name, value in ast.iter_fields(n):
            if name in ("annotation", "returns") and not annotations:
                continue
            if isinstance(value, ast.AST):
                stack.append(value)
            elif isinstance(value, list):
                stack.extend(v for v in value if isinstance(v, ast.AST))


class Index:
    """The definitions and import bindings of every module of ``package`` under ``root``."""

    def __init__(self, root: Path, package: str, annotations: bool = False):
        self.root, self.package, self.annotations = root, package, annotations
        self.modules: dict[str, Module] = {}
        self.defs: dict[str, Def] = {}
        self.methods: dict[str, dict[str, str]] = {}  # class key -> method name -> key
        self.unresolved: set[str] = set()  # kit names the reached code imports that no module defines
        self._bases: dict[str, list[str]] = {}
        self._edges: dict[str, tuple[set[str], set[str]]] = {}
        pkg_dir = root / package
        if not (pkg_dir / "__init__.py").is_file():
            raise ValueError(f"{pkg_dir} is not a package")
        for path in sorted(pkg_dir.rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if any(p.startswith(".") or p == "__pycache__" for p in parts):
                continue
            is_pkg = parts[-1] == "__init__"
            name = ".".join(parts[:-1] if is_pkg else parts)
            text = path.read_text()
            try:
                tree = ast.parse(text, str(path))
            except SyntaxError as e:
                print(f"note: {path} does not parse ({e.msg}), left out", file=sys.stderr)
                continue
            self.modules[name] = mod = Module(name, path, is_pkg, len(text.splitlines()))
            self._collect(mod, tree.body)

    # ------------------------------------------------------------------ the tables

    def _add(self, key: str, module: str, qualname: str, kind: str, node: ast.AST, cls: str | None = None) -> None:
        d = self.defs.setdefault(key, Def(key, module, qualname, kind, cls=cls))
        d.nodes.append(node)

    def _collect(self, mod: Module, body: list[ast.stmt]) -> None:
        for stmt in body:
            if isinstance(stmt, FUNCS):
                key = f"{mod.name}:{stmt.name}"
                self._add(key, mod.name, stmt.name, "function", stmt)
                mod.bindings[stmt.name] = ("def", key)
            elif isinstance(stmt, ast.ClassDef):
                key = f"{mod.name}:{stmt.name}"
                self._add(key, mod.name, stmt.name, "class", stmt)
                mod.bindings[stmt.name] = ("def", key)
                table = self.methods.setdefault(key, {})
                for item in stmt.body:
                    if isinstance(item, FUNCS):
                        table[item.name] = f"{key}.{item.name}"
                        self._add(table[item.name], mod.name, f"{stmt.name}.{item.name}", "method", item, cls=key)
            elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
                for name, binding in self._import_bindings(mod, stmt):
                    if name == "*":
                        mod.stars.append(binding[1])
                    else:
                        mod.bindings[name] = binding
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                for target in targets:
                    for n in ast.walk(target):
                        if isinstance(n, ast.Name):
                            key = f"{mod.name}:{n.id}"
                            self._add(key, mod.name, n.id, "variable", stmt)
                            mod.bindings[n.id] = ("def", key)
            elif isinstance(stmt, ast.If):
                self._collect(mod, stmt.body + stmt.orelse)
            elif isinstance(stmt, ast.Try | ast.TryStar):
                self._collect(mod, stmt.body + [s for h in stmt.handlers for s in h.body] + stmt.orelse
                              + stmt.finalbody)

    def _import_bindings(self, mod: Module, stmt: ast.Import | ast.ImportFrom):
        if isinstance(stmt, ast.Import):
            for a in stmt.names:
                yield (a.asname, ("import", a.name)) if a.asname else (a.name.split(".")[0],
                                                                       ("import", a.name.split(".")[0]))
            return
        base = stmt.module or ""
        if stmt.level:
            parts = mod.name.split(".") if mod.is_pkg else mod.name.split(".")[:-1]
            parts = parts[:len(parts) - (stmt.level - 1)]
            base = ".".join(parts + ([stmt.module] if stmt.module else []))
        for a in stmt.names:
            yield a.asname or a.name, ("from", base, a.name)

    def _is_kit(self, name: str) -> bool:
        return name == self.package or name.startswith(self.package + ".")

    # ------------------------------------------------------------------ resolving names

    def lookup(self, module: str, name: str, seen: set | None = None) -> Target | None:
        """What ``name`` bound at the top of ``module`` is, re-exports followed."""
        mod, seen = self.modules.get(module), seen if seen is not None else set()
        if mod is None or (module, name) in seen:
            return None
        seen.add((module, name))
        if name in mod.bindings:
            return self.follow(mod.bindings[name], seen)
        for star in mod.stars:
            if (found := self.attr_of_module(star, name, seen)) is not None:
                return found
        return None

    def attr_of_module(self, module: str, attr: str, seen: set | None = None) -> Target | None:
        found = self.lookup(module, attr, seen)
        if found is None and f"{module}.{attr}" in self.modules:
            return ("module", f"{module}.{attr}")
        return found

    def follow(self, binding: Binding, seen: set | None = None) -> Target | None:
        if binding[0] == "def":
            return binding
        if binding[0] == "import":
            if binding[1] in self.modules:
                return ("module", binding[1])
            if self._is_kit(binding[1]):
                self.unresolved.add(binding[1])
            return None
        found = self.attr_of_module(binding[1], binding[2], seen)
        if found is None and self._is_kit(binding[1]):
            self.unresolved.add(f"{binding[1]}.{binding[2]}")
        return found

    def bases(self, cls: str) -> list[str]:
        """The kit classes among ``cls``'s bases."""
        if cls not in self._bases:
            self._bases[cls] = []
            d = self.defs[cls]
            scope = Scope(d.module)
            for node in d.nodes:
                for expr in node.bases:
                    t = self.resolve(expr, scope)
                    if t and t[0] == "def" and self.defs[t[1]].kind == "class":
                        self._bases[cls].append(t[1])
        return self._bases[cls]

    def method(self, cls: str, name: str, inherited_only: bool = False, seen: set | None = None) -> str | None:
        """The key of method ``name`` of class ``cls``, looked up in its kit bases too (depth first)."""
        seen = seen if seen is not None else set()
        if cls in seen:
            return None
        seen.add(cls)
        if not inherited_only and name in self.methods.get(cls, {}):
            return self.methods[cls][name]
        for base in self.bases(cls):
            if (found := self.method(base, name, False, seen)) is not None:
                return found
        return None

    def resolve(self, node: ast.AST, scope: Scope) -> Target | None:
        """What a Name / Attribute / ``super()`` expression is, as far as the package's own definitions go."""
        if isinstance(node, ast.Name):
            if scope.self_name and node.id == scope.self_name:
                return ("self", scope.cls)
            if node.id in scope.imports:
                return self.follow(scope.imports[node.id])
            if node.id in scope.local:
                return None
            return self.lookup(scope.module, node.id)
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value, scope)
            if base is None or base[0] == "attr":
                return ("attr", node.attr)
            if base[0] == "module":
                found = self.attr_of_module(base[1], node.attr)
                if found is None and not node.attr.startswith("__"):
                    self.unresolved.add(f"{base[1]}.{node.attr}")
                return found
            if base[0] in ("self", "super"):
                key = self.method(base[1], node.attr, inherited_only=base[0] == "super")
                return ("def", key) if key else ("attr", node.attr) if base[0] == "self" else None
            d = self.defs[base[1]]
            if d.kind == "class":
                key = self.method(d.key, node.attr)
                return ("def", key) if key else None
            return ("attr", node.attr)  # an attribute of a function's or a module variable's value
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"
                and scope.cls and "super" not in scope.local):
            return ("super", scope.cls)
        return None

    # ------------------------------------------------------------------ the graph

    def _function_scope(self, d: Def, node: ast.AST) -> Scope:
        mod = self.modules[d.module]
        scope = Scope(d.module, cls=d.cls)
        if d.kind == "method":
            args = node.args.posonlyargs + node.args.args
            static = any(_last_name(e) == "staticmethod" for e in node.decorator_list)
            scope.self_name = args[0].arg if args and not static else None
        bound, declared = set(), set()
        for n in ast.walk(node):
            if isinstance(n, ast.arg):
                bound.add(n.arg)
            elif isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
                bound.add(n.id)
            elif (isinstance(n, FUNCS + (ast.ClassDef,)) and n is not node
                  or isinstance(n, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and n.name):
                bound.add(n.name)
            elif isinstance(n, ast.Global):
                declared.update(n.names)
            elif isinstance(n, (ast.Import, ast.ImportFrom)):
                scope.imports.update((k, v) for k, v in self._import_bindings(mod, n) if k != "*")
        scope.local = bound - declared - set(scope.imports)
        return scope

    def edges(self, key: str) -> tuple[set[str], set[str]]:
        """(the definitions ``key`` reaches directly, the attribute names it reads on unknown receivers)."""
        if key in self._edges:
            return self._edges[key]
        d, found, wanted = self.defs[key], set(), set()
        for node in d.nodes:
            if d.kind in ("function", "method"):
                scope, roots = self._function_scope(d, node), [node]
            elif d.kind == "class":
                scope = Scope(d.module, cls=key)
                roots = node.decorator_list + node.bases + node.keywords + [s for s in node.body
                                                                           if not isinstance(s, FUNCS)]
                scope.local = {n.id for r in roots for n in ast.walk(r)
                               if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            else:
                scope, roots = Scope(d.module), [node.value]
            for root in roots:
                self._scan(root, scope, found, wanted)
        if d.kind == "class":
            found.update(self.bases(key))
            for name, m in self.methods.get(key, {}).items():
                decorators = {_last_name(e) for e in self.defs[m].nodes[-1].decorator_list}
                if name in WITH_CLASS or decorators & PROPERTY:
                    found.add(m)
        if d.kind == "method":
            found.add(d.cls)
        found.discard(key)
        self._edges[key] = found, wanted
        return found, wanted

    def _scan(self, root: ast.AST, scope: Scope, found: set[str], wanted: set[str]) -> None:
        for n in _children(root, self.annotations):
            if isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Load):
                t = self.resolve(n, scope)
                if t and t[0] == "def":
                    found.add(t[1])
                elif t and t[0] == "attr":
                    wanted.add(t[1])
            elif isinstance(n, ast.Call):
                f = n.func
                if (isinstance(f, ast.Name) and f.id in scope.local
                        or isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
                        and f.value.id == scope.self_name and self.resolve(f, scope)[0] == "attr"
                        or not isinstance(f, (ast.Name, ast.Attribute))):
                    wanted.add("__call__")  # a local, an attribute of self or an expression, called
            elif isinstance(n, ast.With):
                wanted.update(("__enter__", "__exit__"))
            elif isinstance(n, ast.AsyncWith):
                wanted.update(("__aenter__", "__aexit__"))
            elif isinstance(n, (ast.For, ast.comprehension)):
                wanted.update(("__iter__", "__next__"))
            elif isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load):
                wanted.add("__getitem__")

    def root_key(self, dotted: str) -> str:
        parts = dotted.split(".")
        for i in range(len(parts), 0, -1):
            module = ".".join(parts[:i])
            if module in self.modules:
                break
        else:
            raise ValueError(f"{dotted}: no module of {self.package} under {self.root}")
        rest = parts[i:]
        if not rest:
            raise ValueError(f"{dotted} is a module: name a function, a class or a method in it")
        t = self.attr_of_module(module, rest[0])
        if not t or t[0] != "def":
            raise ValueError(f"{dotted}: {module} defines no {rest[0]}")
        key = t[1]
        for name in rest[1:]:
            if self.defs[key].kind != "class" or (key := self.method(key, name)) is None:
                raise ValueError(f"{dotted}: no method {name}")
        return key

    def reach(self, roots: list[str], stop: tuple[str, ...] = ()) -> set[str]:
        """Every definition the roots reach, to a fixed point over the methods of the reached classes; a definition
        in a module under one of the ``stop`` prefixes is neither counted nor followed."""
        work, reached, wanted = [self.root_key(r) for r in roots], set(), set()
        stopped = lambda key: any(self.defs[key].module == s or self.defs[key].module.startswith(s + ".")  # noqa: E731
                                  for s in stop)
        while work:
            while work:
                key = work.pop()
                if key not in reached and not stopped(key):
                    reached.add(key)
                    found, names = self.edges(key)
                    work.extend(found - reached)
                    wanted |= names
            for cls in [k for k in reached if self.defs[k].kind == "class"]:
                work.extend(m for name in wanted if (m := self.method(cls, name)) and m not in reached
                            and not stopped(m))
        return reached

    # ------------------------------------------------------------------ the report

    def lines_of(self, key: str) -> set[int]:
        d, lines = self.defs[key], set()
        for node in d.nodes:
            lines.update(_span(node))
            if d.kind == "class":
                for item in node.body:
                    if isinstance(item, FUNCS):
                        lines.difference_update(_span(item))
        return lines

    def report(self, roots: list[str], stop: tuple[str, ...] = ()) -> dict:
        reached = self.reach(roots, stop)
        per_module: dict[str, list[str]] = {}
        for key in reached:
            per_module.setdefault(self.defs[key].module, []).append(key)
        rows = []
        for name, keys in per_module.items():
            mod, lines = self.modules[name], set()
            for key in keys:
                lines |= self.lines_of(key)
            parts = name.split(".")
            rows.append({"path": mod.path.relative_to(self.root).as_posix(), "package": parts[1] if len(parts) > 1
                         else parts[0], "lines": mod.lines, "reached_lines": len(lines),
                         "definitions": sorted(self.defs[k].qualname for k in keys)})
        rows.sort(key=lambda r: r["path"])
        totals = {"files": len(rows), "lines": sum(r["lines"] for r in rows),
                  "reached_lines": sum(r["reached_lines"] for r in rows),
                  "packages": len({r["package"] for r in rows})}
        return {"roots": roots, "package": self.package, "stop": list(stop), "modules": rows, "totals": totals}


def render(report: dict, defs: bool = False) -> str:
    rows = report["modules"]
    w_path = max([len("path")] + [len(r["path"]) for r in rows])
    w_pkg = max([len("package")] + [len(r["package"]) for r in rows])
    out = [f"{'path':<{w_path}}  {'package':<{w_pkg}}  {'lines':>6}  {'reached':>7}"]
    for r in rows:
        out.append(f"{r['path']:<{w_path}}  {r['package']:<{w_pkg}}  {r['lines']:>6}  {r['reached_lines']:>7}")
        if defs:
            out.extend(f"    {q}" for q in r["definitions"])
    t = report["totals"]
    out.append(f"{t['files']} files, {t['lines']} lines ({t['reached_lines']} lines in the reached functions) "
               f"in {t['packages']} packages")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The kit modules (and lines) that functions reach, from the AST.")
    parser.add_argument("roots", nargs="+", help="module.function, module.Class.method or module.Class")
    parser.add_argument("--package", default="rleif_kit", help="the package to follow (default: rleif_kit)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the directory holding the package (default: the "
                        "repository root)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--defs", action="store_true", help="name the reached definitions under each module")
    parser.add_argument("--annotations", action="store_true", help="read type annotations too (an annotated "
                        "parameter's kit class counts as reached)")
    parser.add_argument("--stop", default="", help="comma-separated module prefixes neither counted nor followed: "
                        "the layers a reader takes as known (e.g. rleif_kit.core,rleif_kit.worlds)")
    args = parser.parse_args(argv)
    stop = tuple(s.strip() for s in args.stop.split(",") if s.strip())
    try:
        index = Index(args.root.resolve(), args.package, annotations=args.annotations)
        report = index.report(args.roots, stop)
    except ValueError as e:
        print(f"reach: {e}", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2) if args.json else render(report, defs=args.defs))
    for name in sorted(index.unresolved):
        print(f"note: {name} resolves to no definition of {args.package} (left out)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
