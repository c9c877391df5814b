# Linear algebra run in a sandbox (with host kernels on and off) and in native CPython
# (tests/native/venv) by tests/it/host_kernels.rs, which compares each case's numbers within a
# tolerance for its precision. Shapes cover empty, one, odd, tall and wide; every transpose;
# strided and Fortran-ordered operands; alpha and beta including 0 (with NaN in the result's
# old values); NaN and Inf in the operands; an output that is an operand; then numpy.linalg,
# scipy.linalg and scikit-learn. Run as a script it prints one JSON object:
# {"answers": {name: {"precision": "f64" | "f32", "shape": [...], "values": [...]}}}.
import json

import numpy as np
import scipy.linalg as sl
from scipy.linalg import blas

CASES = []


def case(name, precision="f64"):
    def add(f):
        CASES.append((name, precision, f))
        return f

    return add


def rng(seed):
    return np.random.default_rng(seed)


def mat(seed, shape, dtype=np.float64):
    r = rng(seed)
    if np.dtype(dtype).kind == "c":
        return (r.standard_normal(shape) + 1j * r.standard_normal(shape)).astype(dtype)
    return r.standard_normal(shape).astype(dtype)


SHAPES = [(0, 5, 3), (1, 1, 1), (7, 13, 5), (33, 65, 31), (200, 300, 150), (1000, 20, 30), (20, 1000, 20), (129, 257, 67)]

for i, (m, k, n) in enumerate(SHAPES):
    for dtype, precision in [(np.float64, "f64"), (np.float32, "f32"), (np.complex128, "f64"), (np.complex64, "f32")]:
        tag = f"{np.dtype(dtype).name} {m}x{k}x{n}"
        case(f"matmul {tag}", precision)(lambda m=m, k=k, n=n, d=dtype, i=i: mat(i, (m, k), d) @ mat(i + 50, (k, n), d))
        case(f"a.T @ b {tag}", precision)(lambda m=m, k=k, n=n, d=dtype, i=i: mat(i, (k, m), d).T @ mat(i + 50, (k, n), d))
        case(f"a @ b.T {tag}", precision)(lambda m=m, k=k, n=n, d=dtype, i=i: mat(i, (m, k), d) @ mat(i + 50, (n, k), d).T)
        case(f"a.T @ b.T {tag}", precision)(lambda m=m, k=k, n=n, d=dtype, i=i: mat(i, (k, m), d).T @ mat(i + 50, (n, k), d).T)
    case(f"fortran-ordered {m}x{k}x{n}")(lambda m=m, k=k, n=n, i=i: np.asfortranarray(mat(i, (m, k))) @ np.asfortranarray(mat(i + 9, (k, n))))
    case(f"strided {m}x{k}x{n}")(lambda m=m, k=k, n=n, i=i: mat(i, (2 * m, 3 * k))[::2, ::3] @ mat(i + 9, (3 * k, n))[::3])
    case(f"x.T @ x {m}x{k}")(lambda m=m, k=k, i=i: (lambda x: x.T @ x)(mat(i, (m, k))))
    case(f"x @ x.T {m}x{k}", "f32")(lambda m=m, k=k, i=i: (lambda x: x @ x.T)(mat(i, (m, k), np.float32)))


@case("np.dot vector and matrix")
def _():
    return np.dot(mat(1, (300,)), mat(2, (300, 200)))


@case("dgemm alpha 0 beta 0 over NaN")
def _():
    return blas.dgemm(0.0, mat(3, (64, 64)), mat(4, (64, 64)), beta=0.0, c=np.full((64, 64), np.nan))


@case("dgemm alpha 2.5 beta 0 over NaN")
def _():
    return blas.dgemm(2.5, mat(3, (90, 70)), mat(4, (70, 80)), beta=0.0, c=np.full((90, 80), np.nan, order="F"))


@case("dgemm alpha -1 beta 0.5 transposed")
def _():
    c = np.asfortranarray(mat(5, (70, 90)))
    return blas.dgemm(-1.0, mat(3, (60, 70)), mat(4, (90, 60)), beta=0.5, c=c, trans_a=1, trans_b=1)


@case("sgemm alpha 3 beta 1", "f32")
def _():
    c = np.asfortranarray(mat(5, (50, 60), np.float32))
    return blas.sgemm(3.0, mat(3, (50, 40), np.float32), mat(4, (40, 60), np.float32), beta=1.0, c=c)


@case("zgemm alpha complex beta complex")
def _():
    c = np.asfortranarray(mat(5, (40, 45), np.complex128))
    return blas.zgemm(1 - 2j, mat(3, (40, 50), np.complex128), mat(4, (50, 45), np.complex128), beta=0.5j, c=c)


@case("zgemm conjugate-transposed")
def _():
    return blas.zgemm(1.0, mat(3, (50, 40), np.complex128), mat(4, (50, 45), np.complex128), trans_a=2)


@case("dsyrk upper and lower, beta over NaN")
def _():
    a = mat(6, (80, 120))
    upper = blas.dsyrk(1.5, a, beta=0.0, c=np.full((80, 80), np.nan, order="F"))
    lower = blas.dsyrk(1.5, a, beta=2.0, c=np.asfortranarray(mat(7, (80, 80))), lower=1)
    return np.concatenate([np.triu(upper).ravel(), np.tril(lower).ravel()])


@case("dsyrk transposed")
def _():
    return np.triu(blas.dsyrk(1.0, mat(6, (300, 70)), trans=1))


@case("NaN and Inf in the operands")
def _():
    a, b = mat(8, (64, 64)), mat(9, (64, 64))
    a[3, 5], a[10, 10], b[7, 2] = np.nan, np.inf, -np.inf
    return a @ b


@case("the output is an operand")
def _():
    a = mat(10, (100, 100))
    b = mat(11, (100, 100))
    np.matmul(a, b, out=a)
    return a


@case("in-place a @= a")
def _():
    a = mat(12, (70, 70))
    a @= a
    return a


@case("np.sort float64 with NaN, -0.0 and Inf")
def _():
    x = mat(40, (50_000,))
    x[::97], x[5::101], x[7::103], x[9::107] = np.nan, -0.0, np.inf, 0.0
    return np.sort(x)


@case("np.sort float32, int64 and int32, and along an axis", "f32")
def _():
    r = rng(41)
    floats = np.sort(r.standard_normal(30_000).astype(np.float32))
    ints = np.sort(r.integers(-(2**40), 2**40, 30_000)).astype(np.float64) / 2**40
    small = np.sort(r.integers(-1000, 1000, 30_000, dtype=np.int32)).astype(np.float64)
    rows = np.sort(r.standard_normal((20, 8_000)), axis=1)
    return np.concatenate([floats, ints, small, rows.ravel()])


def spd(seed, n):
    x = mat(seed, (n, n))
    return x @ x.T + n * np.eye(n)


@case("np.linalg.solve")
def _():
    return np.linalg.solve(mat(13, (300, 300)), mat(14, (300, 4)))


@case("np.linalg.inv")
def _():
    return np.linalg.inv(mat(15, (250, 250)))


@case("np.linalg.eigh eigenvalues and reconstruction")
def _():
    a = spd(16, 200)
    w, v = np.linalg.eigh(a)
    return np.concatenate([w, [np.abs(v @ np.diag(w) @ v.T - a).max()]])


@case("np.linalg.eigh from the upper triangle")
def _():
    a = spd(31, 180)
    w, v = np.linalg.eigh(np.triu(a) + np.tril(np.full_like(a, np.nan), -1), UPLO="U")
    return np.concatenate([w, [np.abs(v @ np.diag(w) @ v.T - a).max()]])


@case("np.linalg.eigvalsh, float32", "f32")
def _():
    return np.linalg.eigvalsh(spd(32, 150).astype(np.float32)) / 150


for lower in (1, 0):
    for name, dtype, precision in [("dsymv", np.float64, "f64"), ("ssymv", np.float32, "f32")]:

        @case(f"scipy.linalg.blas.{name}, {'lower' if lower else 'upper'}, strided, NaN in the other triangle", precision)
        def _(lower=lower, name=name, dtype=dtype):
            n = 150
            a = mat(33, (n, n), dtype)
            a[np.triu_indices(n, 1) if lower else np.tril_indices(n, -1)] = np.nan
            x = mat(34, (2 * n,), dtype)
            y = mat(35, (3 * n,), dtype)
            f = getattr(blas, name)
            return f(1.5, a, x, beta=0.5, y=y, incx=2, incy=3, lower=lower)


for lower in (1, 0):
    for name, dtype, precision in [("dsyr2", np.float64, "f64"), ("ssyr2", np.float32, "f32")]:

        @case(f"scipy.linalg.blas.{name}, {'lower' if lower else 'upper'}, strided", precision)
        def _(lower=lower, name=name, dtype=dtype):
            n = 120
            a = np.asfortranarray(mat(41, (n, n), dtype))
            f = getattr(blas, name)
            out = f(-0.5, mat(42, (2 * n,), dtype), mat(43, (3 * n,), dtype), incx=2, incy=3, a=a, lower=lower)
            return out[np.tril_indices(n) if lower else np.triu_indices(n)]


@case("np.linalg.eigvalsh, 300x300 (the unblocked reduction)")
def _():
    return np.linalg.eigvalsh(spd(44, 300)) / 300


for lower in (1, 0):
    for trans in (0, 1):
        for name, dtype, precision in [("dsyr2k", np.float64, "f64"), ("ssyr2k", np.float32, "f32")]:

            @case(f"scipy.linalg.blas.{name}, {'lower' if lower else 'upper'}, trans {trans}, beta 0 over NaN", precision)
            def _(lower=lower, trans=trans, name=name, dtype=dtype):
                n, k = 90, 40
                shape = (k, n) if trans else (n, k)
                c = np.full((n, n), np.nan, dtype=dtype, order="F")
                f = getattr(blas, name)
                out = f(0.75, mat(36, shape, dtype), mat(37, shape, dtype), beta=0.0, c=c, trans=trans, lower=lower)
                return out[np.tril_indices(n) if lower else np.triu_indices(n)]

            @case(f"scipy.linalg.blas.{name}, {'lower' if lower else 'upper'}, trans {trans}, beta 0.5", precision)
            def _(lower=lower, trans=trans, name=name, dtype=dtype):
                n, k = 70, 33
                shape = (k, n) if trans else (n, k)
                c = np.asfortranarray(mat(38, (n, n), dtype))
                f = getattr(blas, name)
                out = f(-1.0, mat(39, shape, dtype), mat(40, shape, dtype), beta=0.5, c=c, trans=trans, lower=lower)
                return out[np.tril_indices(n) if lower else np.triu_indices(n)]


@case("np.linalg.svd singular values and reconstruction")
def _():
    a = mat(17, (220, 150))
    u, s, vt = np.linalg.svd(a, full_matrices=False)
    return np.concatenate([s, [np.abs(u * s @ vt - a).max()]])


@case("np.linalg.lstsq")
def _():
    return np.linalg.lstsq(mat(18, (400, 60)), mat(19, (400,)), rcond=None)[0]


@case("np.linalg.cholesky")
def _():
    return np.linalg.cholesky(spd(20, 260))


@case("np.linalg.qr: |R| and reconstruction")
def _():
    a = mat(21, (300, 120))
    q, r = np.linalg.qr(a)
    return np.concatenate([np.abs(r).ravel(), [np.abs(q @ r - a).max()]])


@case("np.linalg.det and slogdet")
def _():
    return np.array(np.linalg.slogdet(mat(22, (200, 200))))


@case("scipy.linalg.lu_factor and lu_solve")
def _():
    a = mat(23, (300, 300))
    return sl.lu_solve(sl.lu_factor(a), mat(24, (300,)))


@case("scipy.linalg.cho_solve")
def _():
    return sl.cho_solve(sl.cho_factor(spd(25, 200)), mat(26, (200,)))


@case("scipy.linalg.solve_triangular")
def _():
    return sl.solve_triangular(np.triu(mat(27, (300, 300))) + 30 * np.eye(300), mat(28, (300, 5)))


@case("scipy.linalg.expm")
def _():
    return sl.expm(mat(29, (60, 60)) / 10)


@case("scipy.linalg.eigvalsh")
def _():
    return sl.eigvalsh(spd(30, 150))


def data(seed, n, d):
    r = rng(seed)
    x = r.standard_normal((n, d))
    return x, x @ r.standard_normal(d) + 0.1 * r.standard_normal(n)


@case("sklearn LinearRegression")
def _():
    from sklearn.linear_model import LinearRegression

    x, y = data(31, 3000, 40)
    m = LinearRegression().fit(x, y)
    return np.concatenate([m.coef_, [m.intercept_]])


@case("sklearn Ridge")
def _():
    from sklearn.linear_model import Ridge

    x, y = data(32, 3000, 40)
    return Ridge(alpha=2.0).fit(x, y).coef_


@case("sklearn PCA")
def _():
    from sklearn.decomposition import PCA

    x, _ = data(33, 3000, 30)
    p = PCA(n_components=5).fit(x)
    return np.concatenate([p.explained_variance_, np.abs(p.components_).ravel()])


@case("sklearn KMeans")
def _():
    from sklearn.cluster import KMeans

    r = rng(34)
    centers = r.standard_normal((4, 8)) * 10
    x = np.concatenate([c + r.standard_normal((500, 8)) for c in centers])
    k = KMeans(n_clusters=4, n_init=3, random_state=0).fit(x)
    return np.concatenate([[k.inertia_], np.sort(k.cluster_centers_, axis=0).ravel()])


# Values kept of a large result: evenly spread cells, then its sum and the sum of magnitudes
# (a wrong block anywhere moves those).
KEPT = 1000


def encode(value):
    a = np.asarray(value)
    if a.dtype.kind == "c":
        a = np.stack([a.real, a.imag], axis=-1)
    flat = a.astype(np.float64).ravel()
    if flat.size > KEPT:
        finite = np.where(np.isfinite(flat), flat, 0.0)
        picked = flat[np.linspace(0, flat.size - 1, KEPT).astype(np.int64)]
        flat = np.concatenate([picked, [finite.sum(), np.abs(finite).sum()]])
    return {"shape": list(a.shape), "values": [float(v) if np.isfinite(v) else repr(float(v)) for v in flat]}


def run():
    answers = {}
    for name, precision, f in CASES:
        answers[name] = {"precision": precision, **encode(f())}
    return {"answers": answers}


if __name__ == "__main__":
    print(json.dumps(run()))
