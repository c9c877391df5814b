"""The user's other MCP servers, callable from code (code mode).

    import mcp_tools
    mcp_tools.servers()                      # {server: [tool names]}
    help(mcp_tools.memory.read_graph)        # what a tool does and takes
    graph = mcp_tools.memory.read_graph()    # call it
    mcp_tools.call("memory", "read_graph")   # the same, for any server or tool name

A call returns the tool's structured content when it has some, else its text parsed as JSON
when it is JSON, else the text; images and other content come back as a list of dicts.
A tool's error raises mcp_tools.ToolError, a tool the user did not allow PermissionError,
a server that is down ConnectionError, a call past the time limit TimeoutError.
Every call counts in this execute_code call's time limit and call budget.
"""

import json as _json
import keyword as _keyword

import _host

__all__ = ["servers", "call", "ToolError", "ResultTooLarge", "CallLimitReached", "UnknownTool"]


class ToolError(Exception):
    """The tool ran and answered with an error; the message is the tool's own."""


class ResultTooLarge(ToolError):
    """Arguments or a result past the size code mode carries (10 MB)."""


class CallLimitReached(RuntimeError):
    """This execute_code call made as many tool calls as it may (CODE_SANDBOX_MCP_CALLS)."""


class UnknownTool(LookupError):
    """No such server or tool among those this sandbox may use."""


_ERRORS = {
    "tool_error": ToolError,
    "denied": PermissionError,
    "down": ConnectionError,
    "timeout": TimeoutError,
    "too_large": ResultTooLarge,
    "budget_exceeded": CallLimitReached,
    "unknown_tool": UnknownTool,
    "invalid_arguments": TypeError,
    "cancelled": ConnectionAbortedError,
    "protocol": RuntimeError,
}


def _ask(frame):
    try:
        body = _json.dumps(frame, ensure_ascii=False, allow_nan=False).encode()
    except (TypeError, ValueError) as exc:
        raise TypeError(f"the arguments cannot be sent as JSON: {exc}") from None
    try:
        reply = _host.call(body)
    except ConnectionRefusedError:
        raise ConnectionError(
            "no MCP servers are available to this call's code (the user configures them with CODE_SANDBOX_MCP_SERVERS)"
        ) from None
    answer = _json.loads(reply)
    if answer.get("ok"):
        return answer
    error = answer.get("error") or {}
    raise _ERRORS.get(error.get("kind"), RuntimeError)(error.get("message", "the host refused the call"))


def _identifier(name):
    out = "".join(c if (c.isascii() and (c.isalnum() or c == "_")) else "_" for c in name) or "_"
    if out[0].isdigit():
        out = "_" + out
    if _keyword.iskeyword(out):
        out += "_"
    return out


# The listing and the objects built from it, kept while the host's version of its servers
# stays the same: a tool call then costs one round trip, not a listing too.
_cache = {"version": None, "servers": {}, "objects": {}}


def _listing():
    version = _ask({"mcp": 1, "op": "version"})["version"]
    servers = _cache["servers"]
    # A server that was down or starting is asked again (it may be ready now).
    if version != _cache["version"] or any(s.get("state") != "ready" for s in servers.values()):
        _forget()
        _cache["servers"] = servers = _ask({"mcp": 1, "op": "list"})["servers"]
        _cache["version"] = version
    return servers


def _forget():
    for name in _cache["objects"]:
        globals().pop(_identifier(name), None)
    _cache["objects"] = {}


def _standing(spec):
    if spec.get("state") == "ready":
        return [t["name"] for t in spec.get("tools", [])]
    if spec.get("state") == "starting":
        return "starting"
    return f"failed: {spec.get('error') or 'it did not start'}"


def servers():
    """{server: [tool names]} for every server this sandbox's code may use; a server not ready
    yet shows "starting", one that could not start "failed: <why>"."""
    return {name: _standing(s) for name, s in _listing().items()}


def _value(result):
    if result.get("isError"):
        texts = [c.get("text", "") for c in result.get("content", []) if c.get("type") == "text"]
        raise ToolError("\n".join(texts) or "the tool reported an error without a message")
    if result.get("structuredContent") is not None:
        return result["structuredContent"]
    content = result.get("content") or []
    if content and all(c.get("type") == "text" for c in content):
        values = []
        for c in content:
            text = c.get("text", "")
            try:
                values.append(_json.loads(text))
            except ValueError:
                values.append(text)
        return values[0] if len(values) == 1 else values
    return content or None


def call(server, tool, /, **arguments):
    """Calls `tool` of `server` with `arguments` and returns its value (see the module's help)."""
    answer = _ask({"mcp": 1, "op": "call", "server": server, "tool": tool, "args": arguments})
    if answer.get("version") != _cache["version"]:
        # The servers changed since the listing: the next lookup lists them again.
        _forget()
        _cache["version"] = None
    return _value(answer["result"])


_TYPES = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "array": "list", "object": "dict", "null": "None"}


def _type_name(schema):
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(_TYPES.get(k, str(k)) for k in kind)
    if kind is None and "enum" in schema:
        return " | ".join(repr(v) for v in schema["enum"])
    return _TYPES.get(kind, "any")


def _tool_function(server, spec):
    import inspect

    schema = spec.get("inputSchema") or {}
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    params, lines = [], []
    for pname, pschema in properties.items():
        if not isinstance(pschema, dict):
            pschema = {}
        default = pschema.get("default", None if pname not in required else inspect.Parameter.empty)
        if pname.isidentifier() and not _keyword.iskeyword(pname):
            params.append(inspect.Parameter(pname, inspect.Parameter.KEYWORD_ONLY, default=default))
        line = f"    {pname} ({_type_name(pschema)}"
        line += ", required)" if pname in required else (f", default {pschema['default']!r})" if "default" in pschema else ", optional)")
        if pschema.get("description"):
            line += f": {pschema['description']}"
        lines.append(line)
    name = spec["name"]

    def tool(**arguments):
        return call(server, name, **arguments)

    tool.__name__ = tool.__qualname__ = _identifier(name)
    tool.__module__ = f"mcp_tools.{_identifier(server)}"
    try:
        tool.__signature__ = inspect.Signature(sorted(params, key=lambda p: p.default is not inspect.Parameter.empty))
    except ValueError:
        pass
    doc = [spec.get("description") or f"The {name} tool of the {server} MCP server.", ""]
    doc.append(f"Server {server!r}, tool {name!r}. Arguments:" if lines else f"Server {server!r}, tool {name!r}. No arguments.")
    doc.extend(lines)
    tool.__doc__ = "\n".join(doc)
    return tool


class _Server:
    """One MCP server's tools, as attributes."""

    def __init__(self, name, spec):
        self._name = name
        self._tools = {}
        for t in spec.get("tools", []):
            self._tools.setdefault(_identifier(t["name"]), t)
        # Tools the user denied: hidden from the listing, but reaching one says why it fails.
        self._denied = {_identifier(n).casefold() for n in spec.get("denied", [])}
        self.__doc__ = f"The tools of the {name!r} MCP server: {', '.join(self._tools) or 'none'}."

    def __getattr__(self, attr):
        spec = self.__dict__.get("_tools", {}).get(attr)
        if spec is None and attr.casefold() in self.__dict__.get("_denied", ()):
            raise PermissionError(
                f"the user does not allow code to call {self._name}.{attr}: the \"allow\"/\"deny\" lists of {self._name!r} in the CODE_SANDBOX_MCP_SERVERS file leave it out"
            )
        if spec is None:
            raise AttributeError(f"the {self._name!r} server has no tool {attr!r} this sandbox may use; it has: {', '.join(self._tools) or 'none'}")
        function = _tool_function(self._name, spec)
        # Built once: later lookups find it as an attribute and skip this.
        setattr(self, attr, function)
        return function

    def __dir__(self):
        return sorted(self._tools)

    def __repr__(self):
        return f"<MCP server {self._name!r}: {len(self._tools)} tools>"


def __getattr__(attr):
    if attr.startswith("__"):
        raise AttributeError(attr)
    listing = _listing()
    for name, spec in listing.items():
        if _identifier(name) == attr:
            if spec.get("state") == "starting":
                # Wait (bounded) for this one server only.
                spec = _ask({"mcp": 1, "op": "list", "server": name})["servers"].get(name, spec)
                if spec.get("state") == "starting":
                    raise ConnectionError(f"the {name!r} MCP server is still starting; try again shortly")
            if spec.get("state") == "down":
                raise ConnectionError(f"the {name!r} MCP server is down: {spec.get('error') or 'it did not start'}")
            objects = _cache["objects"]
            if name not in objects:
                objects[name] = _Server(name, spec)
                # Found as a plain attribute from now on, until the host's version changes.
                globals()[attr] = objects[name]
            return objects[name]
    raise AttributeError(f"no MCP server {attr!r} for this sandbox's code; there are: {', '.join(map(_identifier, listing)) or 'none'}")


def __dir__():
    try:
        return sorted(__all__ + [_identifier(n) for n in _listing()])
    except (ConnectionError, OSError):
        return sorted(__all__)
