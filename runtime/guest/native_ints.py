

# numpy's default integer is 64-bit in the user's code, as on 64-bit Linux, macOS and Windows;
# a library's own code keeps the 32-bit default it was built and tested for on wasm32 (see
# src/wasm/vm/code_patch/native_ints.rs, which rewrites numpy's compiled choices the same
# way). "The user's code" is __main__ (each call's code and the functions it defines) and the
# user's own modules (files outside /usr/local/, where the runtime's and the installed
# packages are), looked for past numpy's own Python code, which only passes a request on;
# this module's functions count as numpy's. Here, as each module is imported, the choices
# made in Python: np.int_
# and np.uint, the dtype names "int", "int_" and "uint", the counts bincount, histogram,
# unique and count_nonzero give, RandomState's integers (C long, 32-bit here), and pandas'
# `int` dtype (runtime/guest/after_import.py runs each change as its module is imported).
def __code_sandbox_native_ints():
    import sys

    main = sys.modules["__main__"].__dict__

    def user():
        # Whether the code asking (past numpy's) is the user's.
        frame = sys._getframe(1)
        while frame is not None:
            space = frame.f_globals
            if space is main:
                return True
            name = space.get("__name__")
            if not (isinstance(name, str) and (name == "numpy" or name.startswith("numpy."))):
                file = space.get("__file__")
                return isinstance(file, str) and file.startswith("/") and not file.startswith("/usr/local/")
            frame = frame.f_back
        return False

    def patch_numpy(np):
        import functools

        i64, u64 = np.int64, np.uint64
        aliases = sys.modules.get("numpy._core._type_aliases")
        if aliases is not None:
            # The dict numpy's C code looks dtype names up in (np.dtype("int")).
            aliases.sctypeDict.update({"int_": i64, "int": i64, "uint": u64})
        by_caller = {"int_": (i64, np.intp), "uint": (u64, np.uintp)}
        fallback = np.__dict__.get("__getattr__")

        def __getattr__(name):
            if name in by_caller:
                wide, narrow = by_caller[name]
                return wide if user() else narrow
            if fallback is None:
                raise AttributeError(f"module 'numpy' has no attribute {name!r}")
            return fallback(name)

        for name in by_caller:
            np.__dict__.pop(name, None)
        np.__getattr__ = __getattr__

        def wide(x):
            # Counts numpy makes intp: as int64, the width they have natively.
            if getattr(x, "dtype", None) == np.intp and np.dtype(np.intp).itemsize < 8:
                return x.astype(i64)
            return x

        def wrap(space, name, fix):
            original = getattr(space, name, None)
            if original is None:
                return

            @functools.wraps(original)
            def wrapper(*args, **kwargs):
                result = original(*args, **kwargs)
                return fix(result, args, kwargs) if user() else result

            setattr(space, name, wrapper)

        def counts_last(result, counted):
            if not counted:
                return result
            if isinstance(result, tuple):
                return result[:-1] + (wide(result[-1]),)
            return wide(result)

        def unweighted(args, kwargs, at):
            # Weighted histograms count in the weights' type, as natively.
            return kwargs.get("weights") is None and len(args) <= at

        wrap(np, "bincount", lambda r, a, k: wide(r))
        wrap(np, "count_nonzero", lambda r, a, k: wide(r))
        for name, at in (("histogram", 4), ("histogram2d", 5), ("histogramdd", 4)):
            wrap(np, name, lambda r, a, k, at=at: ((wide(r[0]) if unweighted(a, k, at) else r[0]),) + tuple(r[1:]))
        wrap(np, "unique", lambda r, a, k: counts_last(r, k.get("return_counts", False) or len(a) > 3 and a[3]))
        wrap(np, "unique_counts", lambda r, a, k: r._replace(counts=wide(r.counts)))
        wrap(np, "unique_all", lambda r, a, k: r._replace(counts=wide(r.counts)))

    def patch_random(random):
        # RandomState's integers are C long (32-bit here, as on Windows): int64 for the user.
        import numpy as np

        base = random.RandomState
        long_ = np.dtype("long")

        def wide(x):
            return x.astype(np.int64) if getattr(x, "dtype", None) == long_ else x

        def widened(name):
            def method(self, *args, **kwargs):
                result = getattr(base, name)(self, *args, **kwargs)
                return wide(result) if user() else result

            method.__name__ = name
            method.__doc__ = getattr(base, name).__doc__
            return method

        def randint(self, low, high=None, size=None, dtype=int):
            if dtype is int and user():
                dtype = np.int64
            return base.randint(self, low, high, size, dtype)

        # Made in the compiled module's own code: C long, or intp (an index, int64 natively).
        names = (
            "binomial", "negative_binomial", "poisson", "zipf", "geometric", "hypergeometric", "logseries",
            "permutation", "choice",
        )
        space = {name: widened(name) for name in names}
        space.update(randint=randint, __doc__=base.__doc__, __module__=base.__module__)
        state = type("RandomState", (base,), space)
        state.__qualname__ = base.__qualname__
        random.RandomState = state
        mtrand = sys.modules.get("numpy.random.mtrand")
        default = getattr(mtrand, "_rand", None)
        for name in ("randint",) + names:
            method = getattr(random, name, None)
            if default is not None and method is not None:
                setattr(random, name, getattr(state, name).__get__(default))

    def patch_pandas(pd):
        # astype(int), dtype=int: pandas asks numpy from its own code; the user meant int64.
        common = sys.modules.get("pandas.core.dtypes.common")
        original = getattr(common, "pandas_dtype", None)
        if original is None:
            return
        import types

        import numpy as np

        keep = types.FunctionType(original.__code__, original.__globals__, original.__name__, original.__defaults__, original.__closure__)
        keep.__kwdefaults__ = original.__kwdefaults__

        def pandas_dtype(dtype):
            if dtype is int or (isinstance(dtype, str) and dtype in ("int", "int_")):
                return np.dtype(np.int64)
            return keep(dtype)

        # In place, so every module that imported the name gets it.
        original.__code__ = (lambda dtype: __code_sandbox_pandas_dtype(dtype)).__code__
        original.__globals__["__code_sandbox_pandas_dtype"] = pandas_dtype

    after_import = __code_sandbox_after_import__
    after_import("numpy", patch_numpy)
    after_import("numpy.random", patch_random)
    after_import("pandas", patch_pandas)


# Run with globals of its own, named as numpy's, so its functions pass requests on as numpy's do.
type(__code_sandbox_native_ints)(
    __code_sandbox_native_ints.__code__, {"__builtins__": __builtins__, "__name__": "numpy.code_sandbox"}
)()
del __code_sandbox_native_ints
