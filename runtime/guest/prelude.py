# Runs once in each new interpreter, as its first turn, before any user code.
# It leaves no names behind in __main__: the user's namespace starts empty.
# Results travel to the host through the `_host` door as small JSON messages, so the host
# never has to scrape them out of stdout.
def __code_sandbox_setup():
    import builtins
    import os
    import sys

    import _host

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

    def flush_figures():
        # Every figure left open is sent as a PNG and closed, so the next call starts clean.
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        import base64
        import io

        for num in plt.get_fignums():
            fig = plt.figure(num)
            buf = io.BytesIO()
            try:
                fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
            except Exception as exc:
                sys.stderr.write(f"[figure {num} could not be rendered: {exc}]\n")
                continue
            data = buf.getvalue()
            if len(data) > image_limit:
                send("dropped", reason=f"figure {num} is {len(data)} bytes as PNG, over the {image_limit} byte limit")
                continue
            send("image", mime="image/png", data=base64.b64encode(data).decode("ascii"))
        plt.close("all")

    image_limit = 8 * 1024 * 1024
    sys.displayhook = displayhook
    sys.excepthook = excepthook
    # Called by the host after each call; kept out of the user's namespace.
    builtins.__code_sandbox_after__ = flush_figures


__code_sandbox_setup()
del __code_sandbox_setup
