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


def __code_sandbox_network():
    # The guest has no sockets: http.client (and urllib, pandas and whatever builds on them)
    # sends each request through the host door instead, and the host makes it, to the hosts
    # the user allows (CODE_SANDBOX_ALLOW_HOSTS) and nowhere else. http.client and
    # urllib.request are patched when first imported (or now, if they already are).
    import sys

    import _host

    def ask(frame):
        import json

        try:
            return _host.call(json.dumps(frame).encode())
        except ConnectionRefusedError:
            return b'{"ok":false,"error":{"kind":"off","message":"network access is off: the user allows hosts with CODE_SANDBOX_ALLOW_HOSTS"}}'

    def failure(error):
        kind, message = error.get("kind"), error.get("message", "the request failed")
        cls = {"off": PermissionError, "denied": PermissionError, "timeout": TimeoutError}.get(kind, ConnectionError)
        return cls(message)

    def patch_http_client(hc):
        if getattr(hc, "__code_sandbox_net__", False):
            return
        import base64
        import io
        import json

        class Body(io.RawIOBase):
            # The response as http.client reads it from a socket: its head, then the body in
            # pieces the host hands over as they arrive.
            def __init__(self, head, rid):
                self.pending, self.rid, self.eof = head, rid, False

            def readable(self):
                return True

            def readinto(self, b):
                while not self.pending and not self.eof:
                    piece = ask({"net": 1, "op": "read", "id": self.rid})
                    if piece[:1] == b"E":
                        self.eof = True
                        raise failure(json.loads(piece[1:])["error"])
                    self.pending = piece[1:]
                    self.eof = not self.pending
                n = min(len(b), len(self.pending))
                b[:n] = self.pending[:n]
                self.pending = self.pending[n:]
                return n

            def close(self):
                if not self.closed and not self.eof:
                    self.eof = True
                    ask({"net": 1, "op": "close", "id": self.rid})
                super().close()

        class Sock:
            def __init__(self, raw):
                self.raw = raw

            def makefile(self, *args, **kwargs):
                return io.BufferedReader(self.raw, 1 << 16)

            def close(self):
                pass

        def connect(self):
            self.sock = Sock(None)

        def send(self, data):
            if hasattr(data, "read"):
                data = data.read()
            if isinstance(data, str):
                data = data.encode("iso-8859-1")
            self.__dict__.setdefault("_sandbox_out", bytearray()).extend(bytes(data))

        def getresponse(self):
            out = bytes(self.__dict__.pop("_sandbox_out", b""))
            head, _, body = out.partition(b"\r\n\r\n")
            lines = head.decode("iso-8859-1").split("\r\n")
            method, target = (lines[0].split(" ") + ["", ""])[:2]
            headers = [tuple(part.strip() for part in line.split(":", 1)) for line in lines[1:] if ":" in line]
            if any(k.lower() == "transfer-encoding" and "chunked" in v.lower() for k, v in headers):
                body = dechunk(body)
            scheme = "https" if isinstance(self, hc.HTTPSConnection) else "http"
            if target.startswith(("http://", "https://")):
                url = target
            else:
                host = f"[{self.host}]" if ":" in self.host else self.host
                url = f"{scheme}://{host}:{self.port}{target}"
            answer = json.loads(
                ask({"net": 1, "op": "open", "method": method, "url": url, "headers": headers, "body": base64.b64encode(body).decode()})
            )
            self._HTTPConnection__state = hc._CS_IDLE
            if not answer.get("ok"):
                raise failure(answer.get("error") or {})
            skip = {"transfer-encoding", "connection", "content-length"}
            kept = [(k, v) for k, v in answer["headers"] if k.lower() not in skip or (k.lower() == "content-length" and method != "HEAD")]
            raw_head = f"HTTP/1.1 {answer['status']} {answer['reason']}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in kept) + "Connection: close\r\n\r\n"
            response = self.response_class(Sock(Body(raw_head.encode("iso-8859-1"), answer["id"])), method=method)
            response.begin()
            self.sock = None
            return response

        def dechunk(data):
            out, rest = bytearray(), data
            while rest:
                size_line, _, rest = rest.partition(b"\r\n")
                size = int(size_line.split(b";")[0] or b"0", 16)
                if size == 0:
                    break
                out += rest[:size]
                rest = rest[size + 2 :]
            return bytes(out)

        hc.HTTPConnection.connect = connect
        hc.HTTPConnection.send = send
        hc.HTTPConnection.getresponse = getresponse

        class HTTPSConnection(hc.HTTPConnection):
            # HTTPS made by the host (the guest has no ssl module): certificates are checked there.
            default_port = hc.HTTPS_PORT

            def __init__(self, host, port=None, *, timeout=None, source_address=None, context=None, blocksize=8192, **kwargs):
                super().__init__(host, port, timeout=timeout, source_address=source_address, blocksize=blocksize)

        if not hasattr(hc, "HTTPSConnection"):
            hc.HTTPSConnection = HTTPSConnection
            hc._create_https_context = lambda *args, **kwargs: None
        hc.__code_sandbox_net__ = True

    def patch_urllib_request(ur):
        if getattr(ur, "__code_sandbox_net__", False):
            return
        import http.client

        if not hasattr(ur, "HTTPSHandler"):

            class HTTPSHandler(ur.AbstractHTTPHandler):
                def __init__(self, debuglevel=None, context=None, check_hostname=None):
                    super().__init__(debuglevel or 0)

                def https_open(self, req):
                    return self.do_open(http.client.HTTPSConnection, req)

                https_request = ur.AbstractHTTPHandler.do_request_

            ur.HTTPSHandler = HTTPSHandler
            ur._opener = None
        do_open = ur.AbstractHTTPHandler.do_open

        def unwrapped(self, http_class, req, **kwargs):
            # A refused host is a PermissionError that names the setting, not a URLError.
            try:
                return do_open(self, http_class, req, **kwargs)
            except ur.URLError as err:
                if isinstance(err.reason, (PermissionError, TimeoutError)):
                    raise err.reason from None
                raise

        ur.AbstractHTTPHandler.do_open = unwrapped
        ur.__code_sandbox_net__ = True

    patches = {"http.client": patch_http_client, "urllib.request": patch_urllib_request}

    class NetworkHook:
        @staticmethod
        def find_spec(name, path=None, target=None):
            patch = patches.get(name)
            if patch is None:
                return None
            for finder in sys.meta_path:
                if finder is NetworkHook or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    break
            else:
                return None
            inner = spec.loader

            class Loader:
                @staticmethod
                def create_module(spec):
                    return inner.create_module(spec)

                @staticmethod
                def exec_module(module):
                    inner.exec_module(module)
                    if name == "urllib.request":
                        patch_http_client(sys.modules["http.client"])
                    patch(module)

            spec.loader = Loader
            return spec

    sys.meta_path.insert(0, NetworkHook)

    import os

    class SecretEnviron(type(os.environ)):
        # os.environ, plus the user's secrets (CODE_SANDBOX_SECRETS) as placeholders the host
        # swaps for their values in requests to their own hosts only; asked of the host when a
        # name is not in the environment itself, so a call with no network sees none.
        def _secrets(self):
            import json

            try:
                answer = json.loads(_host.call(b'{"net":1,"op":"secrets"}'))
            except Exception:
                return {}
            return answer.get("secrets", {}) if answer.get("ok") else {}

        def __getitem__(self, key):
            try:
                return super().__getitem__(key)
            except KeyError:
                secrets = self._secrets()
                if key in secrets:
                    return secrets[key]
                raise

        def __contains__(self, key):
            return super().__contains__(key) or key in self._secrets()

        def __iter__(self):
            seen = set()
            for key in super().__iter__():
                seen.add(key)
                yield key
            yield from (k for k in self._secrets() if k not in seen)

        def __len__(self):
            return len(set(super().__iter__()) | set(self._secrets()))

    os.environ.__class__ = SecretEnviron
    if "http.client" in sys.modules:
        patch_http_client(sys.modules["http.client"])
    if "urllib.request" in sys.modules:
        patch_urllib_request(sys.modules["urllib.request"])


__code_sandbox_network()
del __code_sandbox_network
