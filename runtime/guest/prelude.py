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

    # Figures are captured after each call, so `plt.show()` is how a user says "show this",
    # not a request for a window: matplotlib's warning that the Agg canvas cannot open one
    # would print on every plot.
    import warnings

    warnings.filterwarnings("ignore", message=r"FigureCanvas\w* is non-interactive", category=UserWarning)

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
        try:
            table = keep_table(value)
            if table is not None:
                send("table", data=table)
        except BaseException:
            pass

    def shared_folder_hint(value):
        # The user's folders under /mnt are read-only preopens: say what that means and what
        # to do instead, where the bare errno would only say "not permitted" (69 is EROFS).
        try:
            name = getattr(value, "filename", None)
            refused = isinstance(value, PermissionError) or getattr(value, "errno", None) == 69
            if not (refused and isinstance(name, str) and name.startswith("/mnt/")):
                return ""
            folder = "/".join(name.split("/")[:3])
            return (
                f"\n{folder} is the user's folder, shared read-only: nothing in it can be created,"
                " changed or deleted, and links leading out of it are not followed. Write results"
                " under /home/user; the save_file tool, where offered, copies one to the user's"
                " folders.\n"
            )
        except BaseException:
            return ""

    def excepthook(exc_type, value, tb):
        import traceback

        text = "".join(traceback.format_exception(exc_type, value, tb))
        hint = shared_folder_hint(value)
        text += hint
        sys.stderr.write(text)
        try:
            message = str(value) + hint
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


    # Tables: a DataFrame, Series or 2-D array shown as a call's value is kept under a handle,
    # so a view can page and sort it (`read_table`) without the model seeing every row. A value
    # bound to a name in __main__ is read through that name, and its handle expires when the
    # name is rebound; others are kept until newer ones push them out. All of it lives in the
    # sandbox's own memory.
    tables = {}
    table_seq = [0]
    max_tables = 16
    first_rows = 100

    def frame_of(value):
        pd = sys.modules.get("pandas")
        np = sys.modules.get("numpy")
        if pd is not None and isinstance(value, pd.DataFrame):
            return value
        if pd is not None and isinstance(value, pd.Series):
            return value.to_frame(name=value.name if value.name is not None else "value")
        if np is not None and isinstance(value, np.ndarray) and value.ndim == 2:
            import pandas

            return pandas.DataFrame(value)
        return None

    def cell(v):
        # A JSON value a view shows as text: numbers stay numbers, the rest is text.
        import math

        if v is None:
            return None
        if isinstance(v, bool):
            return v
        try:
            import numbers

            if isinstance(v, numbers.Integral):
                v = int(v)
                return v if -(2**53) < v < 2**53 else str(v)
            if isinstance(v, numbers.Real):
                v = float(v)
                return v if math.isfinite(v) else (None if math.isnan(v) else str(v))
        except BaseException:
            pass
        pd = sys.modules.get("pandas")
        try:
            if pd is not None and pd.isna(v) is True:
                return None
        except BaseException:
            pass
        try:
            text = v.isoformat() if hasattr(v, "isoformat") else str(v)
        except BaseException:
            text = "<unprintable>"
        return text if len(text) <= 1000 else text[:1000] + "..."

    def label(c):
        if isinstance(c, tuple):
            return " / ".join(str(x) for x in c)
        return str(c)

    def shaped(frame):
        # Columns as shown: the index first when it says something (not 0, 1, 2, ...).
        pd = sys.modules.get("pandas")
        index = frame.index
        plain_index = isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1
        columns = [label(c) for c in frame.columns]
        dtypes = [str(t) for t in frame.dtypes]
        if not plain_index:
            names = [n for n in index.names if n is not None]
            columns.insert(0, " / ".join(str(n) for n in names) if names else "")
            dtypes.insert(0, str(index.dtype))
        return columns, dtypes, plain_index

    def rows_of(frame, positions, plain_index):
        part = frame.iloc[positions]
        out = []
        for key, row in zip(part.index, part.itertuples(index=False, name=None)):
            values = [cell(v) for v in row]
            if not plain_index:
                values.insert(0, cell(label(key) if isinstance(key, tuple) else key))
            out.append(values)
        return out

    # A page is sent whole or not at all: the first columns and rows that fit in one message
    # (a view needs no more, and the host cuts it to the result's budget anyway).
    max_columns = 200
    max_message = 256 << 10

    def message(handle, frame, positions, offset):
        import json

        left_out = max(0, frame.shape[1] - max_columns)
        if left_out:
            frame = frame.iloc[:, :max_columns]
        columns, dtypes, plain_index = shaped(frame)
        rows = rows_of(frame, positions, plain_index)
        while True:
            text = json.dumps(
                {
                    "columns": columns,
                    "dtypes": dtypes,
                    "rows": rows,
                    "total_rows": int(len(frame)),
                    "offset": int(offset),
                    "handle": handle,
                    "columns_left_out": left_out,
                },
                allow_nan=False,
            )
            if len(text) <= max_message or len(columns) <= 1:
                return text
            if len(rows) > 1:
                rows = rows[: len(rows) // 2]
            else:
                keep = len(columns) // 2
                left_out += len(columns) - keep
                columns, dtypes = columns[:keep], dtypes[:keep]
                rows = [r[:keep] for r in rows]

    def keep_table(value):
        # Only pandas' and numpy's own types can be tables: anything else costs one lookup.
        if type(value).__module__.split(".")[0] not in ("pandas", "numpy"):
            return None
        frame = frame_of(value)
        if frame is None:
            return None
        main = sys.modules["__main__"].__dict__
        name = next((k for k, v in main.items() if v is value and not k.startswith("_")), None)
        table_seq[0] += 1
        handle = f"t{table_seq[0]}"
        tables[handle] = {"name": name, "value": value, "frame": frame, "order": None}
        while len(tables) > max_tables:
            del tables[next(iter(tables))]
        for rows in (first_rows, 20):
            text = message(handle, frame, slice(0, rows), 0)
            if len(text) <= 1_000_000:
                return text
        del tables[handle]
        return None

    def read_table(handle, offset, limit, sort_by, descending):
        entry = tables.get(handle)
        if entry is None:
            raise LookupError(f"no table {handle} in this sandbox: it was pushed out by newer ones or the sandbox restarted fresh; run the code that shows it again")
        name = entry["name"]
        if name is not None and sys.modules["__main__"].__dict__.get(name) is not entry["value"]:
            del tables[handle]
            raise LookupError(f"table {handle} showed {name}, which has been assigned a new value since; run the code that shows it again")
        frame = entry["frame"]
        total = len(frame)
        offset = max(0, min(int(offset), total))
        limit = max(0, min(int(limit), 500))
        if sort_by is None:
            return message(handle, frame, slice(offset, offset + limit), offset)
        import numpy as np

        columns, _, plain_index = shaped(frame)
        if sort_by not in columns:
            raise KeyError(f"no column {sort_by!r} in table {handle}; its columns are {columns[:20]}")
        at = columns.index(sort_by)
        key = (sort_by, bool(descending))
        series = frame.index.to_series() if (not plain_index and at == 0) else frame.iloc[:, at - (0 if plain_index else 1)]
        order = entry["order"]
        if (order is None or order[0] != key) and offset + limit <= partial_limit:
            picked = first_of_order(series, offset + limit, descending)
            if picked is not None:
                return message(handle, frame, picked[offset:], offset)
        if order is None or order[0] != key:
            try:
                ranked = series.reset_index(drop=True).sort_values(ascending=not descending, kind="stable", na_position="last")
            except TypeError:
                ranked = series.astype(str).reset_index(drop=True).sort_values(ascending=not descending, kind="stable")
            order = (key, np.asarray(ranked.index))
            entry["order"] = order
        return message(handle, frame, order[1][offset : offset + limit], offset)

    partial_limit = 50_000

    def first_of_order(series, k, descending):
        # The first k positions of a stable sort (missing values last) without sorting the
        # whole column: a selection in linear time, then a sort of what it kept. Numbers only;
        # None means the column needs the full sort.
        import numpy as np

        kind = series.dtype.kind
        if kind not in "biuf" or len(series) <= k:
            return None
        values = series.to_numpy(dtype="float64", na_value=np.nan)
        if descending:
            values = -values
        n = len(values)
        nan = np.isnan(values)
        present = n - int(nan.sum())
        if k >= present:
            return None
        bound = np.partition(values, k - 1)[k - 1]
        # Everything before the bound, and every tie at it (so ties keep their order).
        chosen = np.flatnonzero((values < bound) | (values == bound))
        ranked = chosen[np.lexsort((chosen, values[chosen]))]
        return ranked[:k]

    def table_page(handle, offset, limit, sort_by=None, descending=False):
        send("table", data=read_table(handle, offset, limit, sort_by, descending))

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
    # read_table: one page of a kept table, sent as a table message.
    builtins.__code_sandbox_table__ = table_page


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
