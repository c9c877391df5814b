# Timings of linear algebra and sorting for `cargo xtask bench --linalg`, the same in a sandbox
# and in native CPython: medians in ms over each case's runs, as JSON on stdout (`measure()`).
# The operands are made once per case, outside the timing, but for the sort, whose row (as the
# issue measured it) includes generating the numbers.
import json
import time

import numpy as np


def cases():
    r = np.random.default_rng(0)
    a, b = r.random((512, 512)), r.random((512, 512))
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    s1000, v1000 = r.random((1000, 1000)), r.random(1000)
    s300 = r.random((300, 300))
    e500 = r.random((500, 500))
    e500 = e500 + e500.T
    tall = r.random((100_000, 50))
    pca_x = r.random((100_000, 50))
    km_x = r.random((100_000, 10))
    lr_x, lr_y = r.random((100_000, 100)), r.random(100_000)
    from sklearn.cluster import KMeans
    from sklearn.decomposition import PCA
    from sklearn.linear_model import LinearRegression

    return {
        "matmul f64": (9, lambda: a @ b),
        "matmul f32": (9, lambda: a32 @ b32),
        "solve": (5, lambda: np.linalg.solve(s1000, v1000)),
        "svd": (5, lambda: np.linalg.svd(s300)),
        "eigh": (5, lambda: np.linalg.eigh(e500)),
        "xtx": (5, lambda: tall.T @ tall),
        "sort": (5, lambda: np.sort(np.random.default_rng(1).random(2_000_000))),
        "pca": (3, lambda: PCA(n_components=10, random_state=0).fit(pca_x)),
        "kmeans": (3, lambda: KMeans(n_clusters=8, n_init=1, random_state=0).fit(km_x)),
        "linreg": (3, lambda: LinearRegression().fit(lr_x, lr_y)),
    }


def measure():
    out = {}
    for name, (runs, f) in cases().items():
        f()
        took = []
        for _ in range(runs):
            start = time.perf_counter()
            f()
            took.append(time.perf_counter() - start)
        took.sort()
        out[name] = took[len(took) // 2] * 1000
    return out


if __name__ == "__main__":
    print(json.dumps(measure()))
