

# Runs right after the prelude, in the same first turn.
def __code_sandbox_network():
    # The guest has no sockets and no ssl module: HTTP libraries send each request through the
    # host door instead, and the host makes it, to the hosts the user allows
    # (CODE_SANDBOX_ALLOW_HOSTS) and nowhere else, checking certificates itself. http.client
    # and urllib.request (and what builds on them: pandas), urllib3 (and requests), httpx and
    # asyncio's event loop are patched when first imported (or now, if they already are).
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
        err = cls(message)
        # Marked, so a library's wrapping of it can be taken off again (see `unwrap`).
        err.__code_sandbox__ = True
        return err

    def open_request(method, url, headers, body):
        # Sends one request; returns the host's answer: status, reason, headers and the id its
        # body is read by.
        import base64
        import json

        frame = {"net": 1, "op": "open", "method": method, "url": url, "headers": headers}
        frame["body"] = base64.b64encode(body or b"").decode()
        answer = json.loads(ask(frame))
        if not answer.get("ok"):
            raise failure(answer.get("error") or {})
        return answer

    def read_piece(rid):
        # The next piece of a response's body, as it arrives at the host; b"" at its end.
        piece = ask({"net": 1, "op": "read", "id": rid})
        if piece[:1] == b"E":
            import json

            raise failure(json.loads(piece[1:])["error"])
        return piece[1:]

    def close_response(rid):
        ask({"net": 1, "op": "close", "id": rid})

    # Headers that described the host's connection, not the response the guest reads.
    hop_by_hop = {"transfer-encoding", "connection", "keep-alive"}

    def ours(err):
        # The error this file raised, if a library wrapped it in its own (urllib3 and requests
        # turn every OSError into a connection error that hides the reason).
        stack, seen = [err], 0
        while stack and seen < 32:
            e = stack.pop()
            seen += 1
            if getattr(e, "__code_sandbox__", False):
                return e
            for inner in (e.__cause__, e.__context__, getattr(e, "reason", None), *getattr(e, "args", ())):
                if isinstance(inner, BaseException):
                    stack.append(inner)
        return None

    def unwrap(cls, name):
        # A refused host stays a PermissionError (and a deadline a TimeoutError) through `name`.
        inner = getattr(cls, name)

        def unwrapped(self, *args, **kwargs):
            try:
                return inner(self, *args, **kwargs)
            except Exception as err:
                mine = ours(err)
                if mine is None or mine is err or not isinstance(mine, (PermissionError, TimeoutError)):
                    raise
                raise mine from None

        setattr(cls, name, unwrapped)

    import io

    class Sock:
        # What http.client reads a response from: the host's pieces, as a buffered file.
        def __init__(self, raw):
            self.raw = raw

        def makefile(self, *args, **kwargs):
            return io.BufferedReader(self.raw, 1 << 16)

        def settimeout(self, seconds):
            pass

        def close(self):
            pass

    def patch_http_client(hc):
        if getattr(hc, "__code_sandbox_net__", False):
            return

        class Body(io.RawIOBase):
            # The response as http.client reads it from a socket: its head, then the body.
            def __init__(self, head, rid):
                self.pending, self.rid, self.eof = head, rid, False

            def readable(self):
                return True

            def readinto(self, b):
                while not self.pending and not self.eof:
                    try:
                        self.pending = read_piece(self.rid)
                    except BaseException:
                        self.eof = True
                        raise
                    self.eof = not self.pending
                n = min(len(b), len(self.pending))
                b[:n] = self.pending[:n]
                self.pending = self.pending[n:]
                return n

            def close(self):
                if not self.closed and not self.eof:
                    self.eof = True
                    close_response(self.rid)
                super().close()

        def connect(self):
            self.sock = Sock(None)

        def send(self, data):
            if self.sock is None:
                self.connect()
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
            https = getattr(self, "__code_sandbox_https__", False) or isinstance(self, hc.HTTPSConnection)
            if target.startswith(("http://", "https://")):
                url = target
            else:
                host = f"[{self.host}]" if ":" in self.host else self.host
                url = f"{'https' if https else 'http'}://{host}:{self.port}{target}"
            self._HTTPConnection__state = hc._CS_IDLE
            answer = open_request(method, url, headers, body)
            skip = hop_by_hop | ({"content-length"} if method == "HEAD" else set())
            kept = [(k, v) for k, v in answer["headers"] if k.lower() not in skip]
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
            default_port = hc.HTTPS_PORT
            __code_sandbox_https__ = True

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
        unwrap(ur.AbstractHTTPHandler, "do_open")

        def only_http(self, req):
            # ftp:// (asked for, or a redirect's target) would reach for sockets the guest lacks.
            raise failure(
                {
                    "kind": "denied",
                    "message": f"{req.type}:// URLs cannot be reached from the sandbox: only http:// and https:// requests go out, to the hosts CODE_SANDBOX_ALLOW_HOSTS allows",
                }
            )

        ur.FTPHandler.ftp_open = only_http
        if hasattr(ur, "CacheFTPHandler"):
            ur.CacheFTPHandler.ftp_open = only_http
        ur.__code_sandbox_net__ = True

    def patch_urllib3_connection(uc):
        # urllib3 builds on http.client's connection (patched above) but opens its own socket;
        # without ssl it has no HTTPS connection at all, so it gets one made by the host.
        base = uc.HTTPConnection

        def connect(self):
            self.sock = Sock(None)
            self._has_connected_to_proxy = False
            self.is_verified = getattr(self, "__code_sandbox_https__", False)

        base.connect = connect
        base.is_connected = property(lambda self: self.sock is not None)
        if uc.HTTPSConnection is getattr(uc, "DummyConnection", None):
            plain = {"timeout", "source_address", "blocksize", "socket_options", "proxy", "proxy_config"}

            class HTTPSConnection(base):
                default_port = 443
                __code_sandbox_https__ = True
                is_verified = True

                def __init__(self, host, port=None, **kwargs):
                    # Certificates are checked by the host, so urllib3's TLS options go unused.
                    super().__init__(host, port, **{k: v for k, v in kwargs.items() if k in plain})

            uc.HTTPSConnection = uc.VerifiedHTTPSConnection = HTTPSConnection

    def patch_httpx(default):
        # httpx's own transport opens sockets through httpcore, which needs ssl; this one sends
        # each request through the door, and streams the body as the host hands it over.
        def request_headers(request):
            return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw]

        def response(answer, stream):
            headers = [(k, v) for k, v in answer["headers"] if k.lower() not in hop_by_hop]
            extensions = {"http_version": b"HTTP/1.1", "reason_phrase": answer["reason"].encode("latin-1")}
            return default.Response(answer["status"], headers=headers, stream=stream, extensions=extensions)

        class Stream(default.SyncByteStream):
            def __init__(self, rid):
                self.rid, self.done = rid, False

            def __iter__(self):
                while not self.done:
                    piece = read_piece(self.rid)
                    if not piece:
                        self.done = True
                        return
                    yield piece

            def close(self):
                if not self.done:
                    self.done = True
                    close_response(self.rid)

        class AsyncStream(default.AsyncByteStream):
            def __init__(self, rid):
                self.inner = Stream(rid)

            async def __aiter__(self):
                for piece in self.inner:
                    yield piece

            async def aclose(self):
                self.inner.close()

        class HTTPTransport(default.BaseTransport):
            # Takes httpx's transport arguments; TLS settings are the host's (CODE_SANDBOX_CA_FILE).
            def __init__(self, *args, **kwargs):
                pass

            def handle_request(self, request):
                answer = open_request(request.method, str(request.url), request_headers(request), request.read())
                return response(answer, Stream(answer["id"]))

        class AsyncHTTPTransport(default.AsyncBaseTransport):
            def __init__(self, *args, **kwargs):
                pass

            async def handle_async_request(self, request):
                body = await request.aread()
                answer = open_request(request.method, str(request.url), request_headers(request), body)
                return response(answer, AsyncStream(answer["id"]))

        default.HTTPTransport = HTTPTransport
        default.AsyncHTTPTransport = AsyncHTTPTransport

    def patch_asyncio(se):
        # An event loop makes a socket pair to wake itself from other threads and signal
        # handlers; WASI has no socket pair. The guest has one thread and no signals, so a loop
        # without one loses nothing, and asyncio (httpx.AsyncClient among its users) works.
        loop = se.BaseSelectorEventLoop
        make, close = loop._make_self_pipe, loop._close_self_pipe

        def make_self_pipe(self):
            try:
                make(self)
            except OSError:
                self._ssock = self._csock = None

        def close_self_pipe(self):
            if getattr(self, "_ssock", None) is not None:
                close(self)

        loop._make_self_pipe = make_self_pipe
        loop._close_self_pipe = close_self_pipe

    patches = {
        "asyncio.selector_events": patch_asyncio,
        "http.client": patch_http_client,
        "urllib.request": patch_urllib_request,
        "urllib3.connection": patch_urllib3_connection,
        "urllib3.connectionpool": lambda cp: unwrap(cp.HTTPConnectionPool, "urlopen"),
        "requests.adapters": lambda ad: unwrap(ad.HTTPAdapter, "send"),
        "httpx._transports.default": patch_httpx,
    }

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
                    if "http.client" in sys.modules:
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
    for name, patch in patches.items():
        if name in sys.modules:
            patch(sys.modules[name])


__code_sandbox_network()
del __code_sandbox_network
