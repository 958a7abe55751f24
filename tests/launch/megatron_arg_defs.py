#!/usr/bin/env python3
"""Megatron-LM's command-line flags, read from its source without importing it.

Usage: megatron_arg_defs.py MEGATRON_DIR  -> prints one JSON object:
  {"--flag": {"action": "store"|"store_true"|"store_false"|..., "type": "int"|"float"|"str"|
              "enum"|null, "choices": [...]|null, "nargs": ...|null, "origin": "file:line"}}

Why Python's ast and not a C++ scan: most of the flags the launcher renders are not written
as add_argument('--flag', ...) calls but generated from dataclass fields by
megatron/training/argument_utils.py's ArgumentGroupFactory (TransformerConfig,
TrainingConfig, CheckpointConfig, ...). This script re-implements that factory's rules on the
parsed source (the same rules, stated in its _extract_type and _build_argparse_kwargs_from_field):
  - flag name: --field-name (underscores -> hyphens); argparse_meta["arg_names"] overrides;
  - bool fields: store_true when the default is False, else store_false named --no-X, --disable-X;
  - Optional[T] / T | None -> T; list[T] -> nargs '+'; Literal[...] -> choices; Enum -> its
    member names as choices; argparse_meta keys override what was inferred;
  - fields named in exclude=[...] and fields with init=False are skipped; base classes first.
Plain add_argument calls anywhere in the given files are read as written. Where a type or
choices is not a literal (type=lambda ..., choices=SOME_LIST) it is reported as "unknown" / null
and only the flag's existence and arity are checked (looser, never a false failure). A dataclass
name defined in several files stops the script rather than guessing. Debian's torch is
too old to import Megatron (see the snapshot's SNAPSHOT.md), hence reading instead of importing.
"""
import ast
import json
import os
import sys

ARG_FILES = [
    "megatron/training/arguments.py",
    "megatron/training/argument_utils.py",
]


def const(node):
    try:
        return ast.literal_eval(node)
    except Exception:
        return None


def type_name(node):
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


class Index:
    """Every class definition under megatron/, by name."""

    def __init__(self, root):
        self.classes = {}
        for base, dirs, files in os.walk(os.path.join(root, "megatron")):
            dirs.sort()  # a deterministic order on every file system
            for f in sorted(files):
                if not f.endswith(".py"):
                    continue
                path = os.path.join(base, f)
                try:
                    tree = ast.parse(open(path, encoding="utf-8").read(), path)
                except (SyntaxError, UnicodeDecodeError):
                    continue
                for node in ast.walk(tree):
                    if isinstance(node, ast.ClassDef):
                        self.classes.setdefault(node.name, []).append((os.path.relpath(path, root), node))

    def find(self, name, prefer_dataclass=True):
        defs = self.classes.get(name, [])
        if prefer_dataclass:
            dc = [d for d in defs if any("dataclass" in ast.unparse(x) for x in d[1].decorator_list)]
            if dc:
                defs = dc
        return defs[0] if defs else (None, None)

    def enum_members(self, name):
        path, node = self.find(name, prefer_dataclass=False)
        if node is None or not any((type_name(b) or "").endswith("Enum") for b in node.bases):
            return None
        members = []
        for stmt in node.body:
            if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
                members.append(stmt.targets[0].id)
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
                members.append(stmt.target.id)
        return members


def infer_type(annotation, index):
    """(type, choices, nargs) from a field annotation, as ArgumentGroupFactory._extract_type."""
    a = annotation
    if isinstance(a, ast.Constant) and isinstance(a.value, str):  # "int" string annotations
        try:
            a = ast.parse(a.value, mode="eval").body
        except SyntaxError:
            return None, None, None
    if isinstance(a, ast.BinOp) and isinstance(a.op, ast.BitOr):  # T | None
        parts = []
        def flat(n):
            if isinstance(n, ast.BinOp) and isinstance(n.op, ast.BitOr):
                flat(n.left); flat(n.right)
            else:
                parts.append(n)
        flat(a)
        non_none = [p for p in parts if not (isinstance(p, ast.Constant) and p.value is None)]
        if len(non_none) == 1 and len(parts) == 2:
            return infer_type(non_none[0], index)
        return "unknown", None, None
    if isinstance(a, ast.Subscript):
        head = type_name(a.value)
        args = a.slice.elts if isinstance(a.slice, ast.Tuple) else [a.slice]
        if head == "Optional":
            return infer_type(args[0], index)
        if head == "Union":
            if len(args) == 2 and isinstance(args[1], ast.Constant) and args[1].value is None:
                return infer_type(args[0], index)
            return "unknown", None, None
        if head in ("list", "List"):
            t, c, _ = infer_type(args[0], index)
            return t, c, "+"
        if head == "Literal":
            values = [const(x) for x in args]
            kinds = {type(v).__name__ for v in values}
            return (kinds.pop() if len(kinds) == 1 else "unknown"), values, None
        return "unknown", None, None
    name = type_name(a)
    if name in ("int", "float", "str", "bool"):
        return name, None, None
    if name is not None:
        members = index.enum_members(name)
        if members is not None:
            return "enum", members, None
    return "unknown", None, None


def dataclass_fields(index, cls_name):
    """[(name, annotation, value, origin)] of a dataclass, base classes' fields first."""
    defs = [d for d in index.classes.get(cls_name, [])
            if any("dataclass" in ast.unparse(x) for x in d[1].decorator_list)]
    if len(defs) > 1:  # fail loudly rather than guess which one the factory is given
        raise SystemExit(f"dataclass {cls_name} is defined in several files: {[d[0] for d in defs]}")
    path, node = index.find(cls_name)
    if node is None:
        raise SystemExit(f"class {cls_name} not found in the snapshot")
    fields = {}
    for base in node.bases:
        bname = type_name(base)
        if bname and bname not in ("object", "Generic") and index.find(bname)[1] is not None:
            for f in dataclass_fields(index, bname):
                fields[f[0]] = f
    for stmt in node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            if "ClassVar" in ast.unparse(stmt.annotation):
                continue
            fields[stmt.target.id] = (stmt.target.id, stmt.annotation, stmt.value, f"{path}:{stmt.lineno}")
    return list(fields.values())


def meta_value(node):
    """An argparse_meta value: a literal, or a type name (int/float/str) kept as its name."""
    v = const(node)
    if v is not None or (isinstance(node, ast.Constant) and node.value is None):
        return v
    return {"__name__": type_name(node) or ast.unparse(node)}


def factory_flags(index, cls_name, exclude):
    out = []
    for name, annotation, value, origin in dataclass_fields(index, cls_name):
        if name in exclude:
            continue
        default, meta = None, None
        if isinstance(value, ast.Call) and type_name(value.func) == "field":
            kw = {k.arg: k.value for k in value.keywords}
            if "init" in kw and const(kw["init"]) is False:
                continue
            if "default" in kw:
                default = const(kw["default"])
            if "metadata" in kw and isinstance(kw["metadata"], ast.Dict):
                for k, v in zip(kw["metadata"].keys, kw["metadata"].values):
                    if const(k) == "argparse_meta" and isinstance(v, ast.Dict):
                        meta = {const(mk): meta_value(mv) for mk, mv in zip(v.keys, v.values)}
        elif value is not None:
            default = const(value)
        t, choices, nargs = infer_type(annotation, index)
        names = ["--" + name.replace("_", "-")]
        action = "store"
        if t == "bool":
            action = "store_true" if default is False else "store_false"
            t = None
            if action == "store_false":
                names = ["--no-" + name.replace("_", "-"), "--disable-" + name.replace("_", "-")]
        if meta:
            names = meta.get("arg_names", names)
            if "type" in meta:
                mt = meta["type"]
                t = mt["__name__"] if isinstance(mt, dict) else mt
            action = meta.get("action", action)
            if action in ("store_true", "store_false", "store_const", "count"):
                t = None
            if "choices" in meta:
                choices = meta["choices"] if isinstance(meta["choices"], list) else None
            nargs = meta.get("nargs", nargs)
        for n in names:
            out.append((n, {"action": action, "type": t, "choices": choices, "nargs": nargs, "origin": origin}))
    return out


def call_flags(call, path):
    names = [const(a) for a in call.args]
    names = [n for n in names if isinstance(n, str) and n.startswith("-")]
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    action = const(kw["action"]) if "action" in kw else "store"
    t = None
    if "type" in kw:
        t = type_name(kw["type"]) or "unknown"
        if t not in ("int", "float", "str"):
            t = "unknown"
    elif action == "store":
        t = "str"  # argparse's default: the value is kept as a string
    choices = None
    if "choices" in kw:
        c = const(kw["choices"])
        choices = list(c) if isinstance(c, (list, tuple)) else None
    nargs = const(kw["nargs"]) if "nargs" in kw else None
    return [(n, {"action": action, "type": t, "choices": choices, "nargs": nargs,
                 "origin": f"{path}:{call.lineno}"}) for n in names]


def main():
    root = sys.argv[1]
    index = Index(root)
    flags = {}
    for rel in ARG_FILES:
        path = os.path.join(root, rel)
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
        # exclude=[...] is often a local list (exclude = [...]; Factory(C, exclude=exclude)):
        # resolve names from literal list assignments in the same function.
        scopes = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
        local_lists = {}
        for fn in scopes:
            for n in ast.walk(fn):
                if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                    v = const(n.value)
                    if isinstance(v, list):
                        for call in ast.walk(fn):
                            local_lists[(id(call), n.targets[0].id)] = v
        def resolve(node, call):
            if isinstance(node, ast.Name):
                return local_lists.get((id(call), node.id), [])
            return const(node) or []
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            found = []
            if isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
                found = call_flags(node, rel)
            elif type_name(node.func) == "ArgumentGroupFactory" and node.args:
                cls = type_name(node.args[0])
                exclude = []
                for k in node.keywords:
                    if k.arg == "exclude":
                        exclude = resolve(k.value, node)
                if len(node.args) > 1:
                    exclude = resolve(node.args[1], node)
                if cls and cls != "src_cfg_class":
                    found = factory_flags(index, cls, set(exclude))
            for name, definition in found:
                flags.setdefault(name, definition)
    json.dump(flags, sys.stdout, indent=1, sort_keys=True, default=str)
    print()


if __name__ == "__main__":
    main()
