# Timings of integer work for `cargo xtask bench --ints`, the same in a sandbox and in native
# CPython: medians in ms over RUNS runs of each case, as JSON on stdout. In a sandbox the cases
# run as the user's code (64-bit integers) and again as a library's (the 32-bit integers every
# sandbox had before): `run(namespace)` times them with that namespace's globals.
import json
import time

import numpy as np
import pandas as pd

RUNS = 15
SETUP = (
    "a = np.arange(1_000_000); xs = list(range(1_000_000)); "
    "df = pd.DataFrame({'k': np.arange(1_000_000) % 100, 'v': np.arange(1_000_000)})"
)
CASES = {
    "create": "np.arange(1_000_000)",
    "add": "a + a",
    "sum": "a.sum()",
    "from a list": "np.array(xs)",
    "groupby-sum": "df.groupby('k')['v'].sum()",
}
SOURCE = '''
def timed(runs, setup, cases):
    import time
    exec(setup, globals())
    out = {}
    for name, stmt in cases.items():
        code = compile(stmt, name, "eval")
        took = []
        for _ in range(runs):
            start = time.perf_counter()
            eval(code, globals())
            took.append(time.perf_counter() - start)
        took.sort()
        out[name] = took[len(took) // 2] * 1000
    out["dtype"] = str(eval("np.arange(3).dtype", globals()))
    return out
'''


def run(space):
    space.update(np=np, pd=pd)
    exec(SOURCE, space)
    return space["timed"](RUNS, SETUP, CASES)


def both():
    import sys

    user = run(sys.modules["__main__"].__dict__)
    library = run({"__name__": "bench_library", "__file__": "/usr/local/lib/bench_library.py"})
    return {"user": user, "library": library}


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["native"]:
        print(json.dumps({"user": run({"__name__": "__main__"})}))
