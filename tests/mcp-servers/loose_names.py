"""A stdio MCP server that looks tool names up loosely, as many real servers do: case-folded,
with whitespace and format characters stripped. Each call it runs is appended to the file named
by its first argument, so a test can tell whether a denied tool ever ran.

Plain JSON-RPC over stdio with the standard library only: it answers initialize, tools/list and
tools/call, and ignores notifications.
"""

import json
import sys
import unicodedata

LOG = sys.argv[1]
TOOLS = ["delete_all", "admin_reset", "read_notes"]


def loose(name):
    return "".join(c for c in name if not c.isspace() and unicodedata.category(c) != "Cf").casefold()


def answer(request):
    method = request.get("method")
    if method == "initialize":
        return {
            "protocolVersion": request["params"].get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "loose-names", "version": "1"},
        }
    if method == "tools/list":
        return {
            "tools": [
                {"name": n, "description": f"The {n} tool.", "inputSchema": {"type": "object", "properties": {}}}
                for n in TOOLS
            ]
        }
    if method == "tools/call":
        asked = request["params"]["name"]
        found = next((n for n in TOOLS if n == loose(asked)), None)
        if found is None:
            return {"content": [{"type": "text", "text": f"no tool {asked!r}"}], "isError": True}
        with open(LOG, "a") as f:
            f.write(f"{found}\t{asked!r}\n")
        return {"content": [{"type": "text", "text": json.dumps({"ran": found})}]}
    if method == "ping":
        return {}
    return None


for line in sys.stdin:
    try:
        request = json.loads(line)
    except ValueError:
        continue
    if "id" not in request:
        continue
    result = answer(request)
    if result is None:
        reply = {"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": "method not found"}}
    else:
        reply = {"jsonrpc": "2.0", "id": request["id"], "result": result}
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
