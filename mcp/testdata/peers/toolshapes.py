"""Prints the shapes of a FastMCP server's tool list as Go table rows for
mcp/context_test.go: each tool's name, its description's length, and the
input schema FastMCP derives from the function's signature, with every
description in it replaced by its length ("~N~"). No prose is kept.

Usage: python3 toolshapes.py FILE.py {agentmail|beads} [MODELS.py]

It reads the file with ast (the server is not imported or run) and builds
each schema with pydantic's TypeAdapter over a stub with the same
signature, then prunes it as the FastMCP version the project pins does:
  agentmail (fastmcp 2.13.0.2): description = the decorator's, else
    inspect.getdoc of the function; titles and additionalProperties:false
    pruned; the Context parameter dropped.
  beads (fastmcp 3.3.1): description = the decorator's; titles pruned,
    additionalProperties:false kept; Google-style "Args:" lines of the
    docstring become the parameters' descriptions.
Tools registered only under `if settings.worktrees_enabled:` (off by
default) are left out.
"""
import ast
import inspect
import json
import sys
import typing
from typing import Any, Literal, Optional, Union

src = open(sys.argv[1]).read()
flavour = sys.argv[2]
tree = ast.parse(src)

ns: dict[str, Any] = {"Any": Any, "Optional": Optional, "Union": Union, "Literal": Literal,
                      "list": list, "dict": dict, "str": str, "int": int, "float": float, "bool": bool}
if len(sys.argv) > 3:  # type aliases (Literal enums) of a models module
    for node in ast.parse(open(sys.argv[3]).read()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                ns[node.targets[0].id] = eval(compile(ast.Expression(node.value), "m", "eval"), dict(ns))
            except Exception:
                pass


class Unknown:  # a type the stub can't see: any JSON value
    pass


def ann(node):
    if node is None:
        return Any
    text = ast.unparse(node)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value
    try:
        return eval(text, dict(ns))
    except Exception:
        return Any


def tool_decorator(fn):
    for d in fn.decorator_list:
        if isinstance(d, ast.Call) and ast.unparse(d.func) == "mcp.tool":
            return {k.arg: k.value for k in d.keywords}
    return None


def gated(path):
    return any(isinstance(p, ast.If) and "worktrees_enabled" in ast.unparse(p.test) for p in path)


def walk(node, path):
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            kw = tool_decorator(child)
            if kw is not None:
                yield child, kw, path
        yield from walk(child, path + [child])


def prune(s, in_props=False):
    if isinstance(s, dict):
        out = {}
        for k, v in s.items():
            if not in_props and k == "title" and isinstance(v, str):
                continue
            if flavour == "agentmail" and not in_props and k == "additionalProperties" and v is False:
                continue
            if not in_props and k == "description" and isinstance(v, str):
                out[k] = "~%d~" % (len(json.dumps(v, ensure_ascii=False)) - 2)
                continue
            out[k] = prune(v, in_props=(k == "properties" and not in_props))
        return out
    if isinstance(s, list):
        return [prune(x) for x in s]
    return s


def arg_docs(doc):
    out, on = {}, False
    for line in (doc or "").splitlines():
        st = line.strip()
        if st in ("Args:", "Arguments:", "Parameters:"):
            on = True
            continue
        if on:
            if not st or (not line.startswith(" ") and st.endswith(":")):
                on = False
                continue
            if ":" in st:
                name, text = st.split(":", 1)
                out[name.strip()] = text.strip()
    return out


def summary(doc):
    # fastmcp 3.x keeps the docstring's text before its sections
    lines = []
    for line in (doc or "").splitlines():
        if line.strip() in ("Args:", "Arguments:", "Returns:", "Raises:"):
            break
        lines.append(line)
    return "\n".join(lines).strip()


rows = []
for fn, kw, path in walk(tree, []):
    if gated(path):
        continue
    name = ast.literal_eval(kw["name"]) if "name" in kw else fn.name
    doc = ast.get_docstring(fn, clean=True)
    if "description" in kw:
        desc = ast.literal_eval(kw["description"])
    else:
        desc = doc if flavour == "agentmail" else summary(doc)
    params, annotations = [], {}
    a = fn.args
    defaults = [None] * (len(a.args) - len(a.defaults)) + list(a.defaults)
    for arg, default in zip(a.args, defaults):
        t = ann(arg.annotation)
        if ast.unparse(arg.annotation or ast.Constant("")) in ("Context", "'Context'"):
            continue
        d = inspect.Parameter.empty if default is None else eval(ast.unparse(default), {})
        params.append(inspect.Parameter(arg.arg, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=d, annotation=t))
    stub = lambda *args, **kwargs: None
    stub.__signature__ = inspect.Signature(params)
    stub.__annotations__ = {p.name: p.annotation for p in params}
    import pydantic
    schema = pydantic.TypeAdapter(stub).json_schema()
    if flavour == "beads":
        for p, text in arg_docs(doc).items():
            if p in schema.get("properties", {}):
                schema["properties"][p]["description"] = text
    schema = prune(schema)
    rows.append((name, len(json.dumps(desc, ensure_ascii=False)) - 2, json.dumps(schema, separators=(",", ":"))))

for name, n, schema in rows:
    print('\t{"%s", %d, `%s`},' % (name, n, schema))
print("// %d tools" % len(rows), file=sys.stderr)
