"""The files a trainer command runs: the scripts it names, the modules they import and the files they name, followed
to a fixed point without importing or running anything.

A command's arguments that are existing files (a script, a config it reads) and the module after `-m` are the
roots. A Python file is read as an AST: each `import` and `from ... import` (relative ones too), each
`importlib.import_module("...")` / `__import__("...")` with a literal name, is looked up on the path the trainer
would see (the script's folder, or the working folder for `-m`; PYTHONPATH; the interpreter's path; folders its
string literals name, as a `sys.path.insert(0, "lib")` adds) and followed when it resolves to a file outside the
Python environment (the standard library, site-packages, and campaign's own package are covered by the installed
versions instead). A string literal naming an existing file (`open("conf.yaml")`, `runpy.run_path("helper.py")`)
is a file the trainer reads, and followed too. A shell script's words that name existing files are followed the
same way. Modules resolved at run time from computed names cannot be seen here.
"""

from __future__ import annotations

import ast
import os
import shlex
import site
import sys
import sysconfig
from collections.abc import Iterable, Sequence
from pathlib import Path

import campaign

MAX_FILES = 2000  # a closure larger than this is cut there (named in the record: a key ending "(more)")
MAX_PARSE_BYTES = 8 << 20  # a source file larger than this is hashed but not parsed


def environment_roots() -> tuple[Path, ...]:
    """Folders whose files are the Python environment (covered by the installed packages' versions): the standard
    library, site-packages (system and user), and campaign's own package."""
    paths = sysconfig.get_paths()
    roots = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    roots.update(site.getsitepackages() if hasattr(site, "getsitepackages") else [])
    roots.add(site.getusersitepackages())
    roots.update({sys.base_prefix + "/lib", sys.prefix + "/lib"})
    roots.add(str(Path(campaign.__file__).parent))
    return tuple(Path(r).resolve() for r in roots if r)


def _in_environment(path: Path, roots: Sequence[Path]) -> bool:
    return any(path.is_relative_to(root) for root in roots)


def module_file(name: str, cwd: Path, search: Iterable[str] | None = None) -> Path | None:
    """The file `python -m name` runs, looked up on the path (the working folder first, as `-m` does) without
    importing anything: `a/b.py`, or `a/b/__main__.py` for a package."""
    parts = name.split(".")
    if not all(part.isidentifier() for part in parts):
        return None
    for entry in [str(cwd), *(sys.path if search is None else search)]:
        base = Path(entry or ".").joinpath(*parts)
        for candidate in (base.with_suffix(".py"), base / "__main__.py"):
            if candidate.is_file():
                return candidate.resolve()
    return None


def _module_files(name: str, search: Sequence[Path]) -> list[tuple[Path, str]]:
    """The files importing `name` executes, each with its module name: each parent package's __init__.py and the
    module's own file (a .py, a package's __init__.py, or a compiled extension); [] when not found on `search`."""
    parts = name.split(".")
    if not all(part.isidentifier() for part in parts):
        return []
    for entry in search:
        out: list[tuple[Path, str]] = []
        base = entry
        for i, part in enumerate(parts):
            base = base / part
            here = ".".join(parts[: i + 1])
            if (base / "__init__.py").is_file():
                out.append(((base / "__init__.py").resolve(), here))
                continue
            if base.is_dir():
                continue  # a namespace package
            if i == len(parts) - 1:
                extensions = sorted(base.parent.glob(f"{part}.*.so")) if base.parent.is_dir() else []
                found = next((c for c in (base.with_suffix(".py"), *extensions) if c.is_file()), None)
                if found is not None:
                    out.append((found.resolve(), here))
                    break
            out = [] if i == 0 else out  # `from a import name`: name is not a module, a's files stand
            break
        if out:
            return out
    return []


def _imports(tree: ast.AST, module: str, is_package: bool) -> list[str]:
    """Absolute module names a module's source imports (`from a import b` yields a and a.b: b may be a module)."""
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                package = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                base = ".".join([*package, *([base] if base else [])])
            if base:
                names.append(base)
            names += [
                f"{base}.{alias.name}" if base else alias.name for alias in node.names if alias.name != "*"
            ]
        elif (
            isinstance(node, ast.Call)
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and (
                (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                or (isinstance(node.func, ast.Name) and node.func.id in ("__import__", "import_module"))
            )
        ):
            names.append(node.args[0].value)
    return names


def _literals(tree: ast.AST) -> list[str]:
    return [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant)
        and isinstance(n.value, str)
        and 0 < len(n.value) < 4096
        and "\n" not in n.value
    ]


def _named_path(text: str, folders: Sequence[Path]) -> Path | None:
    """The existing file or folder a word names, relative to one of `folders` (or absolute)."""
    if "\0" in text or not text.strip() or text in (".", "..", "/"):
        return None
    candidate = Path(text).expanduser()
    try:
        for base in [Path("/")] if candidate.is_absolute() else folders:
            path = base / candidate
            if path.exists():
                return path.resolve()
    except (OSError, ValueError):
        return None
    return None


def _is_python(path: Path, head: bytes) -> bool:
    return path.suffix in (".py", ".pyw") or (head.startswith(b"#!") and b"python" in head.split(b"\n", 1)[0])


def trainer_files(
    command: Sequence[str], cwd: Path, key: str = "rehearsal.command"
) -> list[tuple[str, Path]]:
    """Every file outside the Python environment that `command`, started in `cwd`, runs, imports or names, each
    with the key that reaches it: `rehearsal.command[2]` for a file the command names, `rehearsal.command[2]
    imports helper` or `... names conf.yaml` for one found by following it."""
    roots = environment_roots()
    extra_path = [Path(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    interpreter_path = [Path(p or cwd) for p in sys.path]
    out: dict[Path, str] = {}
    project: list[Path] = [cwd.resolve()]

    def _is_project_file(p: Path) -> bool:
        """A file a literal or a shell word names is followed when it lies under the working folder or a folder of
        a file the command names (not /proc, /etc or a device, whose bytes are not the trainer's)."""
        system = p.parts[1:2] in (("proc",), ("sys",), ("dev",))
        return not system and any(p.is_relative_to(base) for base in project)

    # (file, key, module name or "", the folder the interpreter puts first on the path)
    todo: list[tuple[Path, str, str, Path]] = []

    def add(path: Path, why: str, module: str, first: Path) -> None:
        path = path.resolve()
        if path in out or _in_environment(path, roots) or not path.is_file() or len(out) >= MAX_FILES:
            return
        out[path] = why
        todo.append((path, why, module, first))

    for i, arg in enumerate(command):
        arg_key = f"{key}[{i}]"
        if i > 0 and command[i - 1] == "-m":
            found = module_file(arg, cwd)
            if found is not None:
                # `-m a.b` runs a/__init__.py, then a/b.py (or a/b/__init__.py and a/b/__main__.py)
                name = (
                    f"{arg}.__main__" if found.name == "__main__.py" and not arg.endswith("__main__") else arg
                )
                parents = name.rsplit(".", 1)[0] if "." in name else ""
                for f, package in (
                    _module_files(parents, [cwd, *extra_path, *interpreter_path]) if parents else []
                ):
                    add(f, arg_key, package, cwd)
                add(found, arg_key, name, cwd)
            continue
        if i == 0 and os.sep not in arg:
            continue  # a program found on PATH (python, torchrun): an installed tool, not the user's script
        path = Path(arg) if Path(arg).is_absolute() else cwd / arg
        if path.is_file():
            project.append(path.resolve().parent)
            add(path, arg_key, "", path.resolve().parent)

    while todo:
        path, why, module, first = todo.pop()
        root_key = why.split(" ", 1)[0]
        try:
            with open(path, "rb") as handle:
                raw = handle.read(MAX_PARSE_BYTES + 1)
        except OSError:
            continue
        if len(raw) > MAX_PARSE_BYTES or b"\0" in raw[:8192]:
            continue  # binary or too large: hashed, not followed
        folders = [path.parent, cwd]
        if _is_python(path, raw[:256]):
            try:
                tree = ast.parse(raw, filename=str(path))
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue  # the trainer will fail to start: the rehearsal gate says so
            named = [p for p in (_named_path(t, folders) for t in _literals(tree)) if p is not None]
            search = [first, *[p for p in named if p.is_dir()], *extra_path, *interpreter_path]
            is_package = path.name == "__init__.py"
            for name in dict.fromkeys(_imports(tree, module or path.stem, is_package)):
                for f, mod in _module_files(name, search):
                    add(f, f"{root_key} imports {mod}", mod, first)
            for p in named:
                if p.is_file() and _is_project_file(p):
                    add(p, f"{root_key} names {p.name}", "", p.parent)
        else:
            try:
                words = shlex.split(raw.decode("utf-8", "replace"), comments=True)
            except ValueError:
                words = raw.decode("utf-8", "replace").split()
            for word in words:
                shell_path = _named_path(word, folders)
                if shell_path is not None and shell_path.is_file() and _is_project_file(shell_path):
                    add(shell_path, f"{root_key} names {shell_path.name}", "", shell_path.parent)
    return [(why, path) for path, why in out.items()]
