# Runs once in each new interpreter, as its first turn, before any user code.
# It leaves no names behind in __main__: the user's namespace starts empty.
# Results travel to the host through the `_host` door as small JSON messages, so the host
# never has to scrape them out of stdout.
def __code_sandbox_setup():
    import builtins
    import os
    import sys

    import _host
    from time import monotonic

    # The C encoder, not the json package: importing json from the zip costs ~10 ms per sandbox.
    from _json import encode_basestring_ascii as quote

    os.chdir("/home/user")
    repr_limit = 100_000

    def send(kind, **fields):
        # Every field is a string, so a JSON object is a join of quoted pairs.
        fields["kind"] = kind
        try:
            body = "{" + ",".join(quote(k) + ":" + quote(v) for k, v in fields.items()) + "}"
            _host.call(body.encode("ascii"))
        except Exception:
            pass

    def displayhook(value):
        if value is None:
            return
        builtins._ = None
        try:
            text = repr(value)
        except BaseException as exc:
            text = f"<repr failed: {type(exc).__name__}: {exc}>"
        if len(text) > repr_limit:
            half = repr_limit // 2
            text = f"{text[:half]}\n[... {len(text) - repr_limit} characters omitted ...]\n{text[-half:]}"
        send("result", repr=text)
        builtins._ = value

    def excepthook(exc_type, value, tb):
        import traceback

        text = "".join(traceback.format_exception(exc_type, value, tb))
        sys.stderr.write(text)
        try:
            message = str(value)
        except BaseException:
            message = "<unprintable>"
        send("error", name=exc_type.__name__, value=message[:10_000], traceback=text[-50_000:])

    def flush_figures(seconds=None):
        # Every figure left open is sent as a PNG and closed, so the next call starts clean.
        # Drawing stops when the call's time is up (the host stops the interpreter a little
        # later, which would lose its state), and nothing here may raise: a failure while
        # drawing must never replace the code's own result or error.
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        try:
            import base64
            import io

            deadline = None if seconds is None else monotonic() + seconds
            nums = list(plt.get_fignums())
            for i, num in enumerate(nums):
                if deadline is not None and monotonic() >= deadline:
                    send("dropped", reason=f"{len(nums) - i} figure(s) were not drawn because the call's time limit was reached; draw fewer or simpler figures, or pass a larger timeout_seconds")
                    break
                fig = plt.figure(num)
                buf = io.BytesIO()
                try:
                    # Huge canvases are drawn at a lower resolution: the host scales every
                    # figure to at most 1568 px anyway.
                    w, h = fig.get_size_inches()
                    dpi = min(100.0, max_side / max(w, h, 0.01))
                    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
                except Exception as exc:
                    send("dropped", reason=f"figure {num} could not be drawn: {type(exc).__name__}: {exc}")
                    continue
                data = buf.getvalue()
                if len(data) > image_limit:
                    send("dropped", reason=f"figure {num} is {len(data)} bytes as PNG, over the {image_limit} byte limit")
                    continue
                send("image", mime="image/png", data=base64.b64encode(data).decode("ascii"))
        except BaseException as exc:
            send("dropped", reason=f"figures could not be collected: {type(exc).__name__}: {exc}")
        finally:
            try:
                plt.close("all")
            except BaseException:
                pass

    max_side = 3136
    real_import = builtins.__import__

    def health():
        # What the host relies on between calls. Code may replace a hook with one of its own;
        # only hooks that can no longer work are reported, and the host then resets.
        problems = []
        try:
            for name in ("displayhook", "excepthook"):
                if not callable(getattr(sys, name, None)):
                    problems.append(f"sys.{name} is not callable")
            modules = sys.modules
            if modules.get("__main__") is None or modules.get("sys") is not sys or modules.get("builtins") is not builtins:
                problems.append("sys.modules lost __main__, sys or builtins")
            if builtins.__import__ is not real_import:
                try:
                    builtins.__import__("sys")
                except BaseException:
                    problems.append("builtins.__import__ does not work")
            for name in ("stdout", "stderr"):
                stream = getattr(sys, name, None)
                if stream is None or getattr(stream, "closed", True):
                    problems.append(f"sys.{name} is missing or closed")
        except BaseException as exc:
            problems.append(f"the check failed: {type(exc).__name__}")
        send("health", problems="; ".join(problems))

    def after_call(seconds=None):
        flush_figures(seconds)
        health()

    def release_files():
        # matplotlib keeps the font files it has drawn with open, in a cache. A saved state
        # cannot carry open files, so the host calls this before saving one: the fonts open
        # again on the next draw.
        font_manager = sys.modules.get("matplotlib.font_manager")
        cached = getattr(font_manager, "_get_font", None)
        try:
            cached.cache_clear()
        except BaseException:
            pass
        import gc

        gc.collect()

    class McpToolsLoader:
        # `import mcp_tools` (code mode): the module's source comes from the host, which
        # offers it only to a call whose code may use the user's other MCP servers.
        @staticmethod
        def find_spec(name, path=None, target=None):
            if name != "mcp_tools":
                return None
            from importlib.machinery import ModuleSpec

            return ModuleSpec(name, McpToolsLoader, origin="mcp-code-sandbox")

        @staticmethod
        def create_module(spec):
            return None

        @staticmethod
        def exec_module(module):
            try:
                source = _host.call(b'{"mcp":1,"op":"source"}').decode()
            except ConnectionRefusedError:
                raise ImportError(
                    "mcp_tools is not available here: no MCP servers are configured for this "
                    "sandbox's code (the user lists them in the file CODE_SANDBOX_MCP_SERVERS "
                    "names; in remote mode a token also needs mcp=NAME,... in the tokens file)",
                    name="mcp_tools",
                ) from None
            import linecache

            linecache.cache["<mcp_tools>"] = (len(source), None, source.splitlines(True), "<mcp_tools>")
            exec(compile(source, "<mcp_tools>", "exec"), module.__dict__)

    sys.meta_path.insert(0, McpToolsLoader)

    image_limit = 8 * 1024 * 1024
    sys.displayhook = displayhook
    sys.excepthook = excepthook
    # Called by the host after each call; kept out of the user's namespace.
    builtins.__code_sandbox_after__ = after_call
    builtins.__code_sandbox_release__ = release_files


__code_sandbox_setup()
del __code_sandbox_setup


def __code_sandbox_rebirth():
    # An interpreter started from a warm image shares the warm-up's generator states; each
    # sandbox reseeds every generator seeded then, from its own entropy.
    import builtins
    import sys

    def rebirth():
        import random

        random.seed()
        np = sys.modules.get("numpy")
        if np is not None:
            np.random.seed()
        tempfile = sys.modules.get("tempfile")
        if tempfile is not None:
            tempfile._name_sequence = None

    builtins.__code_sandbox_rebirth__ = rebirth


__code_sandbox_rebirth()
del __code_sandbox_rebirth
