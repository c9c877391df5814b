"""The server through the official MCP Python SDK (pinned in requirements.txt beside this file,
the venv the code-mode tests already make): over stdio and streamable HTTP, on the 2025-11-25
handshake and the stateless 2026-07-28 wire. Run by tests/it/conformance.rs as
`python python_sdk_client.py BINARY URL`: it starts the binary over stdio itself, and reaches
the HTTP server the test started at URL. Exits non-zero, saying what failed, on any mismatch.
"""

import asyncio
import os
import sys
import warnings

import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPDeprecationWarning

# Logging is deprecated from 2026-07-28 on (SEP-2577); the 2025-11-25 checks use it on purpose.
warnings.filterwarnings("ignore", category=MCPDeprecationWarning)


async def check(server, mode: str, where: str, logs: bool) -> None:
    seen: list[str] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        seen.append(f"{params.level} {params.data}")

    async with Client(server, mode=mode, logging_callback=on_log) as client:
        tools = (await client.list_tools()).tools
        names = {t.name for t in tools}
        assert "execute_code" in names and "read_table" in names, f"{where}: tools {sorted(names)}"
        run = await client.call_tool("execute_code", {"code": "import os\nos.makedirs('data', exist_ok=True)\nopen('data/a.csv','w').write('x')\n1+1"})
        assert not run.is_error, f"{where}: {run}"
        result = run.structured_content
        assert result["result"] == "2", f"{where}: {result}"
        sandbox = result["sandbox_id"]
        template = types.ResourceTemplateReference(uri="sandbox://{sandbox_id}/{+path}")
        ids = (await client.complete(template, {"name": "sandbox_id", "value": sandbox[:6]})).completion.values
        assert sandbox in ids, f"{where}: completion of ids {ids}"
        paths = (await client.complete(template, {"name": "path", "value": "data/"}, {"sandbox_id": sandbox})).completion.values
        assert paths == ["data/a.csv"], f"{where}: completion of paths {paths}"
        if logs:
            await client.set_logging_level("warning")
            await client.call_tool("execute_code", {"sandbox_id": sandbox, "code": "import sys\nsys.modules.clear()"})
            for _ in range(50):
                if seen:
                    break
                await asyncio.sleep(0.1)
            assert any("interpreter was reset" in s for s in seen), f"{where}: log notifications {seen}"
        print(f"python SDK ok: {where}")


async def main() -> None:
    binary, url = sys.argv[1], sys.argv[2]
    env = {"CODE_SANDBOX_PERSIST": "false", "RUST_LOG": "warn", "CODE_SANDBOX_HOME": os.environ["CODE_SANDBOX_HOME"]}
    stdio = StdioServerParameters(command=binary, env=env)
    await check(stdio, "legacy", "stdio, 2025-11-25", logs=True)
    await check(url, "legacy", "HTTP, 2025-11-25", logs=True)
    await check(stdio, "2026-07-28", "stdio, 2026-07-28", logs=False)
    await check(url, "2026-07-28", "HTTP, 2026-07-28", logs=False)


asyncio.run(main())
