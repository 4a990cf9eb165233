"""pygpu/__init__.pyi against the runtime.

The stub is parsed with `ast` (no type checker needed) and compared with
the module the test imports, on whatever backend it chose (the host backend
on a machine without a GPU):

- every public name of pygpu (``__all__``, the submodules) and every public
  attribute and method of its classes is declared;
- nothing declared is missing at runtime, except the names listed in
  ``RUNTIME_ABSENT`` (backend- or version-specific);
- where ``inspect.signature`` works on the runtime object, the stub's
  parameters have the same names and kinds (self/cls left out).
"""
import ast
import importlib
import inspect
import os
import sys

import pytest

import pygpu
import pygpu.lowlevel as lowlevel

STUB = os.path.join(os.path.dirname(os.path.abspath(pygpu.__file__)), "__init__.pyi")

# Declared in the stub but legitimately absent at runtime here: (class, member) -> why.
RUNTIME_ABSENT = {}
if pygpu.backend != "cuda":
    RUNTIME_ABSENT[("GPUArray", "__cuda_array_interface__")] = "CUDA backend only"
if sys.version_info < (3, 12):
    # The C types export buffers; the __buffer__ method appears only on 3.12+.
    RUNTIME_ABSENT[("HostAllocation", "__buffer__")] = "Python < 3.12"
    RUNTIME_ABSENT[("_DeviceArray", "__buffer__")] = "Python < 3.12"

# Stub-only (type_check_only) classes standing for runtime types that are not
# attributes of pygpu: stub name -> the runtime class.
PRIVATE_CLASSES = {
    "_ArrayFlags": type(pygpu.zeros(1).flags),
    "_Handle": lowlevel._Handle,
    "_PointerWrapper": lowlevel._PointerWrapper,
    "_DeviceArray": lowlevel._DeviceArray,
}

SUBMODULES = ("driver", "lowlevel")

# Runtime callables without an inspectable signature: name -> [(parameter, kind)],
# as their C argument lists define them.  Empty now that every C callable has a
# text signature inspect can read (tests/test_api_docs.py checks that).
KNOWN_SIGNATURES = {}

# Dunders that make a protocol: declared in the stub whenever a class defines them.
PROTOCOL_DUNDERS = {
    "__int__", "__index__", "__float__", "__bool__", "__len__", "__iter__", "__getitem__", "__setitem__",
    "__contains__", "__enter__", "__exit__", "__array__", "__dlpack__", "__dlpack_device__",
    "__cuda_array_interface__", "__buffer__",
}


# ---- the stub, parsed -------------------------------------------------------------

def _is_property(fn):
    return any(isinstance(d, ast.Name) and d.id == "property" for d in fn.decorator_list)


def _is_overload(fn):
    return any(isinstance(d, ast.Name) and d.id == "overload" for d in fn.decorator_list)


def _base_name(node):
    if isinstance(node, ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


class _Stub:
    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            self.tree = ast.parse(f.read(), path)
        self.names = {}         # top-level name -> node
        self.classes = {}       # class name -> ClassDef
        self.functions = {}     # top-level function -> [FunctionDef, ...] (overloads)
        self.imports = set()
        self.all = None
        for node in self.tree.body:
            if isinstance(node, ast.ClassDef):
                self.classes[node.name] = node
                self.names[node.name] = node
            elif isinstance(node, ast.FunctionDef):
                self.functions.setdefault(node.name, []).append(node)
                self.names[node.name] = node
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                self.names[node.target.id] = node
            elif isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        self.names[t.id] = node
                        if t.id == "__all__":
                            self.all = [ast.literal_eval(e) for e in node.value.elts]
            elif isinstance(node, ast.ImportFrom) and node.level == 1:
                for alias in node.names:
                    if alias.asname == alias.name:      # explicit re-export
                        self.imports.add(alias.name)
                        self.names[alias.name] = node

    def own_members(self, cls):
        """{member: [nodes]} declared in class `cls` itself."""
        out = {}
        for node in self.classes[cls].body:
            if isinstance(node, ast.FunctionDef):
                out.setdefault(node.name, []).append(node)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                out.setdefault(node.target.id, []).append(node)
            elif isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        out.setdefault(t.id, []).append(node)
        return out

    def members(self, cls):
        """{member: (defining class, [nodes])}, following the bases declared in the stub."""
        out = {}
        for base in reversed(self.classes[cls].bases):
            name = _base_name(base)
            if name in self.classes:
                out.update(self.members(name))
        out.update({m: (cls, nodes) for m, nodes in self.own_members(cls).items()})
        return out


STUB_AST = _Stub(STUB)

# Lowlevel names are loaded on first use: touch one so that they are all in place.
pygpu.cudaGetDevice  # noqa: B018

RUNTIME_CLASSES = {n: getattr(pygpu, n) for n in pygpu.__all__ if isinstance(getattr(pygpu, n), type)}
RUNTIME_CLASSES.update(PRIVATE_CLASSES)
CORE_CLASSES = ("GPUArray", "Stream", "Event", "Device", "DeviceAllocation", "HostAllocation")


def _runtime_public(cls):
    """The public names of runtime class `cls`: what it adds to object, plus protocol dunders."""
    builtin = set().union(*(dir(k) for k in cls.__mro__ if k.__module__ == "builtins"))
    names = {n for n in dir(cls) if not n.startswith("_") and n not in builtin}
    for klass in cls.__mro__[:-1]:
        if klass.__module__ == "builtins":
            continue
        names |= PROTOCOL_DUNDERS & set(vars(klass))
    return names


# ---- (a) every runtime name is declared --------------------------------------------

def test_stub_parses_and_declares_all():
    assert STUB_AST.all is not None, "the stub declares no __all__"
    assert sorted(STUB_AST.all) == sorted(pygpu.__all__)


@pytest.mark.parametrize("name", pygpu.__all__)
def test_public_name_declared(name):
    assert name in STUB_AST.names, f"pygpu.{name} is not declared in {STUB}"


def test_submodules_declared():
    for name in SUBMODULES:
        assert name in STUB_AST.imports, f"pygpu.{name} is not declared (from . import {name} as {name})"


def test_core_classes_checked():
    for name in CORE_CLASSES:
        assert name in RUNTIME_CLASSES and name in STUB_AST.classes


@pytest.mark.parametrize("cls", sorted(RUNTIME_CLASSES))
def test_class_members_declared(cls):
    if cls in STUB_AST.classes:
        declared = STUB_AST.members(cls)
    else:  # an alias such as ptr_wrapper_int8 = pointer_wrapper_int8
        node = STUB_AST.names[cls]
        assert isinstance(node, ast.Assign) and isinstance(node.value, ast.Name), cls
        declared = STUB_AST.members(node.value.id)
    missing = sorted(_runtime_public(RUNTIME_CLASSES[cls]) - set(declared))
    assert not missing, f"{cls}: not declared in the stub: {missing}"


# ---- (b) nothing declared is missing at runtime ------------------------------------

def test_declared_names_exist():
    missing = []
    for name in STUB_AST.names:
        if name in SUBMODULES:
            importlib.import_module(f"pygpu.{name}")
            continue
        if name.startswith("_") and not (name.startswith("__") and name.endswith("__")):
            continue  # stub-only helpers (aliases, TypedDicts, type_check_only classes)
        if name == "__all__":
            continue
        if not hasattr(pygpu, name):
            missing.append(name)
    assert not missing, f"declared in the stub but not in pygpu: {missing}"


def test_private_stub_classes_are_type_check_only():
    for name in PRIVATE_CLASSES:
        decorators = [d.id for d in STUB_AST.classes[name].decorator_list if isinstance(d, ast.Name)]
        assert "type_check_only" in decorators, name


@pytest.mark.parametrize("cls", sorted(n for n in STUB_AST.classes if n in RUNTIME_CLASSES))
def test_declared_members_exist(cls):
    runtime = RUNTIME_CLASSES[cls]
    # Exceptions set their attributes in __init__: look on an instance.
    where = runtime() if issubclass(runtime, BaseException) else runtime
    missing = []
    for member, (owner, _nodes) in STUB_AST.members(cls).items():
        if (owner, member) in RUNTIME_ABSENT:
            assert not hasattr(runtime, member), (
                f"{owner}.{member} is listed as absent ({RUNTIME_ABSENT[(owner, member)]}) but exists: "
                "drop it from RUNTIME_ABSENT")
            continue
        if not hasattr(where, member):
            missing.append(member)
    assert not missing, f"{cls}: declared in the stub but missing at runtime: {missing}"


def test_runtime_absent_are_declared():
    for owner, member in RUNTIME_ABSENT:
        assert member in STUB_AST.own_members(owner), (owner, member)


# ---- (c) parameter names ------------------------------------------------------------

def _stub_params(fn, drop_first):
    a = fn.args
    params = [(p.arg, "POSITIONAL_ONLY") for p in a.posonlyargs]
    params += [(p.arg, "POSITIONAL_OR_KEYWORD") for p in a.args]
    if a.vararg:
        params.append((a.vararg.arg, "VAR_POSITIONAL"))
    params += [(p.arg, "KEYWORD_ONLY") for p in a.kwonlyargs]
    if a.kwarg:
        params.append((a.kwarg.arg, "VAR_KEYWORD"))
    return params[1:] if drop_first else params


def _runtime_params(obj, drop_self):
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    params = [(p.name, p.kind.name) for p in sig.parameters.values()]
    if drop_self and params and params[0][0] == "self":
        params = params[1:]
    return params


def _check(label, runtime, overloads):
    """Runtime parameters against a stub function (or its overloads); an error string or None."""
    stubs = list(overloads)
    if runtime is None:
        return None
    if any(kind == "VAR_POSITIONAL" for _n, kind in runtime) and len(stubs) > 1:
        return None  # f(*args): the overloads spell out the forms the runtime accepts
    if len(stubs) == 1:
        return None if stubs[0] == runtime else f"{label}: stub {stubs[0]} != runtime {runtime}"
    if runtime not in stubs:
        return f"{label}: no overload matches the runtime's {runtime}: {stubs}"
    names = {n for n, _k in runtime}
    for s in stubs:
        extra = {n for n, _k in s} - names
        if extra:
            return f"{label}: overload {s} has parameters the runtime lacks: {sorted(extra)}"
    return None


def _functions(nodes):
    return [n for n in nodes if isinstance(n, ast.FunctionDef) and not _is_property(n)]


def _check_functions(label, runtime_obj, nodes, drop_first, drop_self):
    fns = _functions(nodes)
    if not fns:
        return None
    if len(fns) > 1 and not all(_is_overload(f) for f in fns):
        return f"{label}: declared {len(fns)} times without @overload"
    return _check(label, _runtime_params(runtime_obj, drop_self), [_stub_params(f, drop_first) for f in fns])


def test_module_function_signatures():
    errors, checked = [], 0
    for name, fns in STUB_AST.functions.items():
        obj = getattr(pygpu, name)
        runtime = _runtime_params(obj, False)
        if runtime is None and name in KNOWN_SIGNATURES:
            runtime = KNOWN_SIGNATURES[name]
        err = _check(name, runtime, [_stub_params(f, False) for f in fns])
        checked += runtime is not None
        if err:
            errors.append(err)
    assert not errors, "\n".join(errors)
    assert checked > 50


@pytest.mark.parametrize("cls", sorted(n for n in STUB_AST.classes if n in RUNTIME_CLASSES))
def test_method_signatures(cls):
    runtime_cls = RUNTIME_CLASSES[cls]
    members = STUB_AST.members(cls)
    errors = []
    # The constructor: __init__ or __new__ of the stub against the class's signature.
    ctor = members.get("__init__") or members.get("__new__")
    if ctor:
        runtime = _runtime_params(runtime_cls, False)
        if runtime is None:
            runtime = KNOWN_SIGNATURES.get(cls)
        err = _check(f"{cls}()", runtime, [_stub_params(f, True) for f in _functions(ctor[1])])
        if err:
            errors.append(err)
    for member, (_owner, nodes) in members.items():
        if member in ("__init__", "__new__") or not hasattr(runtime_cls, member):
            continue
        attr = inspect.getattr_static(runtime_cls, member)
        if isinstance(attr, (property, staticmethod, classmethod)) or not callable(getattr(runtime_cls, member)):
            continue
        if attr is getattr(object, member, None):
            continue  # object's own slot (__eq__, __hash__, ...): nothing of PyGPU's to compare
        err = _check_functions(f"{cls}.{member}", getattr(runtime_cls, member), nodes, True, True)
        if err:
            errors.append(err)
    assert not errors, "\n".join(errors)


def test_package_ships_stub():
    root = os.path.dirname(os.path.abspath(pygpu.__file__))
    assert os.path.exists(os.path.join(root, "py.typed"))
    pyproject = os.path.join(os.path.dirname(root), "pyproject.toml")
    if not os.path.exists(pyproject):
        pytest.skip("not a source checkout")
    try:
        import tomllib
    except ImportError:
        pytest.skip("tomllib needs Python 3.11")
    with open(pyproject, "rb") as f:
        data = tomllib.load(f)
    shipped = data["tool"]["setuptools"]["package-data"]["pygpu"]
    assert "py.typed" in shipped and "*.pyi" in shipped
