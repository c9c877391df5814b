"""A stdio MCP server of our own that behaves as a hostile or careless one would, in the way
its first argument names:

    loose LOG    looks tool names up loosely, as many real servers do (case-folded, with
                 whitespace and format characters stripped), and appends each call it runs to
                 the file LOG, so a test can tell whether a denied tool ever ran;
    stuck        reads its input and never answers, so it never finishes starting;
    huge-list    lists one tool with a 20 MB description;
    deep         its tool `deep` answers with JSON nested 400 levels;
    changing     its tool `learn` adds a tool `learned` and says its list changed; its tool
                 `crash` ends the process without answering, as a server that dies would.

Plain JSON-RPC over stdio with the standard library only: initialize, tools/list, tools/call.
"""

import json
import sys
import unicodedata

MODE = sys.argv[1]
TOOLS = {
    "loose": ["delete_all", "admin_reset", "read_notes"],
    "changing": ["learn", "crash"],
}.get(MODE, ["deep"])


def loose(name):
    return "".join(c for c in name if not c.isspace() and unicodedata.category(c) != "Cf").casefold()


def call(name):
    """The result of tools/call, as JSON text."""
    if MODE == "deep":
        return '{"content": [], "structuredContent": {"v": ' + "[" * 400 + "1" + "]" * 400 + "}}"
    if MODE == "changing":
        if name == "crash":
            sys.exit(3)
        if name == "learn" and "learned" not in TOOLS:
            TOOLS.append("learned")
            sys.stdout.write('{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}\n')
        return json.dumps({"content": [{"type": "text", "text": json.dumps({"tools": TOOLS})}]})
    found = next((n for n in TOOLS if n == loose(name)), None)
    if found is None:
        return json.dumps({"content": [{"type": "text", "text": f"no tool {name!r}"}], "isError": True})
    with open(sys.argv[2], "a") as f:
        f.write(f"{found}\t{name!r}\n")
    return json.dumps({"content": [{"type": "text", "text": json.dumps({"ran": found})}]})


def answer(request):
    """The result of a request, as JSON text; None for a method this server lacks."""
    method = request.get("method")
    if method == "initialize":
        return json.dumps(
            {
                "protocolVersion": request["params"].get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "misbehaving", "version": "1"},
            }
        )
    if method == "tools/list":
        described = lambda n: "x" * (20 << 20) if MODE == "huge-list" else f"The {n} tool."
        tools = [{"name": n, "description": described(n), "inputSchema": {"type": "object", "properties": {}}} for n in TOOLS]
        return json.dumps({"tools": tools})
    if method == "tools/call":
        return call(request["params"]["name"])
    if method == "ping":
        return "{}"
    return None


for line in sys.stdin:
    if MODE == "stuck":
        continue
    try:
        request = json.loads(line)
    except ValueError:
        continue
    if "id" not in request:
        continue
    result = answer(request)
    head = '{"jsonrpc": "2.0", "id": ' + json.dumps(request["id"])
    if result is None:
        reply = head + ', "error": {"code": -32601, "message": "method not found"}}'
    else:
        reply = head + ', "result": ' + result + "}"
    sys.stdout.write(reply + "\n")
    sys.stdout.flush()
