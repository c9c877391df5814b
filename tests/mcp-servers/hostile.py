"""A stdio MCP server that misbehaves in one way, named by its first argument:

    stuck        reads its input and never answers, so it never finishes starting;
    huge-list    lists one tool with a 20 MB description;
    deep         starts normally, and its tool `deep` answers with JSON nested 400 levels.

Plain JSON-RPC over stdio with the standard library only.
"""

import json
import sys

MODE = sys.argv[1]


def answer(request):
    method = request.get("method")
    if method == "initialize":
        return {
            "protocolVersion": request["params"].get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile", "version": "1"},
        }
    if method == "tools/list":
        description = "x" * (20 << 20) if MODE == "huge-list" else "Nested deep."
        return {"tools": [{"name": "deep", "description": description, "inputSchema": {"type": "object"}}]}
    if method == "tools/call":
        nested = "[" * 400 + "1" + "]" * 400
        return "RAW:" + '{"content": [], "structuredContent": {"v": ' + nested + "}}"
    return {}


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
    if isinstance(result, str) and result.startswith("RAW:"):
        reply = '{"jsonrpc": "2.0", "id": ' + json.dumps(request["id"]) + ', "result": ' + result[4:] + "}"
    else:
        reply = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result})
    sys.stdout.write(reply + "\n")
    sys.stdout.flush()
