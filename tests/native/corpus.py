# Integer-heavy analysis code, run in a sandbox and in native CPython (tests/native/venv) by
# tests/it/native_answers.rs, which compares what each case gives: values and dtypes. Each case
# is a name and a snippet whose last line is an expression; the snippets run in one namespace
# with numpy, pandas, scipy and scikit-learn imported, in order. Run as a script it prints one
# JSON object: {"versions": {...}, "answers": {name: description}}; with a path argument it
# writes that to the path instead.
import json
import sys

import numpy as np
import pandas as pd

CASES = []


def case(name, code):
    CASES.append((name, code))


# Creation
case("array of ints", "np.array([1, 2, 3])")
case("array dtype", "np.array([1, 2, 3]).dtype")
case("dtype of int", "np.dtype(int)")
case("dtype of 'int'", "np.dtype('int')")
case("dtype of 'int_'", "np.dtype('int_')")
case("dtype of 'uint'", "np.dtype('uint')")
case("np.int_ is int64", "np.dtype(np.int_)")
case("np.uint is uint64", "np.dtype(np.uint)")
case("np.int_ scalar", "np.int_(7)")
case("arange", "np.arange(5)")
case("arange dtype", "np.arange(5).dtype")
case("arange start stop step", "np.arange(3, 40, 7)")
case("arange negative step", "np.arange(10, 0, -3)")
case("arange big", "np.arange(2**40, 2**40 + 3)")
case("zeros int", "np.zeros(4, dtype=int)")
case("ones int", "np.ones((2, 3), int)")
case("empty_like int", "np.zeros_like(np.arange(6)).dtype")
case("full with int", "np.full(4, 7)")
case("full_like", "np.full_like(np.arange(3), 9)")
case("array from range", "np.array(range(10))")
case("asarray of list", "np.asarray([[1, 2], [3, 4]])")
case("fromiter int", "np.fromiter(range(5), dtype=int)")
case("fromiter int64", "np.fromiter((i * i for i in range(6)), dtype=np.int64)")
case("linspace int", "np.linspace(0, 100, 5, dtype=int)")
case("identity int", "np.identity(3, dtype=int)")
case("eye int", "np.eye(3, k=1, dtype=int)")
case("tri int", "np.tri(3, dtype=int)")
case("indices", "np.indices((2, 3))")
case("mgrid", "np.mgrid[0:3, 0:2]")
case("ogrid", "np.ogrid[0:4][0]")
case("meshgrid", "np.meshgrid(np.arange(3), np.arange(2))[0]")
case("diag", "np.diag([1, 2, 3])")
case("array of big int", "np.array([2**40, 1])")
case("array of uint64 range", "np.array([2**63, 1])")
case("array of bools plus int", "np.array([True, False, True]) + 1")
case("astype int", "np.array([1.7, -2.5, 3.2]).astype(int)")
case("astype 'int'", "np.array([1.7, 2.2]).astype('int')")
case("astype int from str", "np.array(['1', '22', '333']).astype(int)")
case("int of bools", "np.array([True, False]).astype(int)")
case("iinfo int", "np.iinfo(int).max")
case("iinfo int_", "np.iinfo(np.int_).bits")
case("tolist types", "[type(x).__name__ for x in np.arange(3).tolist()]")
case("item", "np.arange(5)[3].item()")
case("scalar of python int", "np.asarray(5).dtype")
case("array of python ints, nested", "np.array([[1, 2, 3], [4, 5, 6]]).dtype")
case("repeat", "np.repeat([1, 2], 3)")
case("tile", "np.tile(np.arange(3), 2)")
case("concatenate", "np.concatenate([np.arange(3), [10, 11]])")
case("stack", "np.stack([np.arange(3), np.arange(3, 6)])")
case("where python ints", "np.where(np.arange(6) > 2, 1, 0)")
case("select", "np.select([np.arange(5) < 2, np.arange(5) > 3], [10, 20], default=0)")
case("piecewise", "np.piecewise(np.arange(5), [np.arange(5) < 2], [1, 2])")
case("choose", "np.choose([0, 1, 0], [[1, 2, 3], [10, 20, 30]])")
case("clip", "np.clip(np.arange(10), 2, 7)")
case("copysign int", "np.abs(np.array([-3, 4, -5]))")

# Arithmetic
case("square overflows int32, not int64", "np.arange(100000, 100003) ** 2")
case("multiply", "np.arange(50000, 50003) * 50000")
case("add python int", "np.arange(3) + 2**35")
case("floor divide", "np.arange(-5, 5) // 3")
case("modulo", "np.arange(-5, 5) % 3")
case("power python ints", "np.power(np.arange(1, 6), 12)")
case("left shift", "np.left_shift(np.arange(1, 4), 40)")
case("bitwise and", "np.arange(16) & 5")
case("negative of python int", "np.negative(5)")
case("abs of python int", "np.abs(-7)")
case("square of python int", "np.square(3)")
case("add two python ints", "np.add(2**31 - 1, 1)")
case("multiply python ints", "np.multiply(100000, 100000)")
case("int8 plus python int", "np.arange(3, dtype=np.int8) + 1")
case("int32 plus int64", "(np.arange(3, dtype=np.int32) + np.arange(3)).dtype")
case("uint8 wraps as natively", "np.array([250], dtype=np.uint8) + np.uint8(10)")
case("int divide true", "np.arange(1, 5) / 2")
case("gcd", "np.gcd(np.arange(12, 60, 12), 18)")
case("lcm", "np.lcm(np.arange(1, 6), 4)")
case("outer", "np.outer(np.arange(1, 4), np.arange(100000, 100003))")
case("dot ints", "np.dot(np.arange(1000), np.arange(1000))")
case("matmul ints", "np.arange(6).reshape(2, 3) @ np.arange(6).reshape(3, 2)")
case("vdot ints", "np.vdot(np.arange(70000), np.arange(70000))")
case("inner", "np.inner(np.arange(5), np.arange(5))")
case("cross", "np.cross([1, 2, 3], [4, 5, 6])")
case("round int", "np.round(np.arange(1234, 1237), -1)")
case("sign", "np.sign(np.arange(-2, 3))")
case("maximum", "np.maximum(np.arange(5), 2)")
case("heaviside ints", "np.heaviside(np.arange(-2, 3), 1)")
case("factorial by prod", "np.prod(np.arange(1, 21))")
case("2 ** 40 in numpy", "np.int_(2) ** 40")
case("comparison sum", "(np.arange(100) > 50).sum()")

# Reductions
case("sum of arange 3e6", "np.arange(3_000_000).sum()")
case("sum method dtype", "np.arange(10).sum().dtype")
case("np.sum of arange", "np.sum(np.arange(3_000_000))")
case("sum int16", "(np.ones(100000, dtype=np.int16) * 30000).sum()")
case("sum int8", "np.full(1000, 100, dtype=np.int8).sum()")
case("sum uint8", "np.full(1000, 200, dtype=np.uint8).sum()")
case("sum uint8 dtype", "np.full(3, 200, dtype=np.uint8).sum().dtype")
case("sum int32", "np.full(100000, 2**30, dtype=np.int32).sum()")
case("sum uint32", "np.full(10, 2**31, dtype=np.uint32).sum()")
case("sum bools", "np.ones(10, dtype=bool).sum()")
case("sum bools dtype", "np.ones(10, dtype=bool).sum().dtype")
case("sum axis", "np.arange(12).reshape(3, 4).sum(axis=0)")
case("sum axis 1 int16", "np.full((2, 40000), 1000, dtype=np.int16).sum(axis=1)")
case("sum keepdims", "np.arange(6).reshape(2, 3).sum(axis=1, keepdims=True)")
case("sum with dtype int32 wraps as natively", "np.arange(3_000_000).sum(dtype=np.int32)")
case("sum where", "np.arange(10).sum(where=np.arange(10) % 2 == 0)")
case("sum initial", "np.arange(5).sum(initial=2**40)")
case("prod", "np.arange(1, 16).prod()")
case("prod int16", "np.full(4, 300, dtype=np.int16).prod()")
case("prod bools", "np.ones(4, dtype=bool).prod()")
case("prod uint16", "np.full(3, 60000, dtype=np.uint16).prod()")
case("add.reduce int8", "np.add.reduce(np.full(300, 100, dtype=np.int8))")
case("multiply.reduce int32", "np.multiply.reduce(np.full(3, 2**20, dtype=np.int32))")
case("max", "np.arange(10).max()")
case("min int16", "np.arange(10, dtype=np.int16).min()")
case("ptp", "np.ptp(np.array([5, 1, 9]))")
case("mean int", "np.arange(3_000_000).mean()")
case("mean int16", "np.full(100000, 30000, dtype=np.int16).mean()")
case("average weights", "np.average(np.arange(4), weights=[1, 2, 3, 4])")
case("var", "np.arange(10).var()")
case("std", "np.arange(10).std()")
case("median", "np.median(np.arange(11))")
case("percentile", "np.percentile(np.arange(101), [25, 50, 75])")
case("quantile", "np.quantile(np.arange(10), 0.5)")
case("all", "np.all(np.arange(1, 5))")
case("any", "np.any(np.zeros(3, int))")
case("nansum of ints", "np.nansum(np.arange(3_000_000))")
case("nanprod", "np.nanprod(np.arange(1, 21))")
case("trace", "np.trace(np.arange(9).reshape(3, 3))")
case("trace big", "np.trace(np.full((3, 3), 2**31 - 1, dtype=np.int32))")
case("count_nonzero", "np.count_nonzero(np.arange(10) % 3)")
case("count_nonzero axis", "np.count_nonzero(np.arange(12).reshape(3, 4) % 3, axis=0)")
case("einsum sum", "np.einsum('i->', np.arange(1000))")
case("einsum matmul", "np.einsum('ij,jk->ik', np.arange(4).reshape(2, 2), np.arange(4).reshape(2, 2))")
case("sum of list", "np.sum([1, 2, 3])")
case("sum of python list big", "np.sum([2**31 - 1, 1])")
case("mean of list", "np.mean([1, 2, 3, 4])")
case("max of list", "np.max([3, 9, 2])")
case("sum over bool mask", "np.sum(np.arange(100) % 7 == 0)")

# Cumulative operations
case("cumsum", "np.arange(5).cumsum()")
case("cumsum big", "np.arange(100000).cumsum()[-1]")
case("cumsum int16", "np.full(5, 30000, dtype=np.int16).cumsum()")
case("cumsum bools", "np.cumsum(np.array([True, True, False, True]))")
case("cumsum uint8", "np.cumsum(np.full(4, 200, dtype=np.uint8))")
case("cumprod", "np.cumprod(np.arange(1, 21))")
case("cumprod int32", "np.cumprod(np.full(4, 2**16, dtype=np.int32))")
case("cumsum axis", "np.cumsum(np.arange(6).reshape(2, 3), axis=1)")
case("add.accumulate int8", "np.add.accumulate(np.full(4, 100, dtype=np.int8))")
case("diff", "np.diff(np.array([1, 4, 9, 16]))")
case("diff n=2", "np.diff(np.arange(10) ** 2, n=2)")
case("ediff1d", "np.ediff1d(np.array([1, 2, 4, 7]))")
case("gradient ints", "np.gradient(np.array([1, 4, 9, 16]))")
case("convolve", "np.convolve([1, 2, 3], [0, 1, 1])")
case("correlate", "np.correlate([1, 2, 3], [0, 1])")
case("cumulative_sum", "np.cumulative_sum(np.arange(5))")

# Indexing and sorting
case("fancy index", "np.arange(10)[[1, 5, 7]]")
case("boolean index", "np.arange(10)[np.arange(10) % 2 == 0]")
case("take", "np.take(np.arange(100, 110), [0, 3])")
case("put", "(lambda a: (np.put(a, [0, 2], [-1, -2]), a)[1])(np.arange(5))")
case("sort ints", "np.sort(np.array([3, 1, 2]))")
case("sort descending", "np.sort(np.array([3, 1, 2]))[::-1]")
case("argsort values", "np.argsort(np.array([3, 1, 2])).tolist()")
case("argmax value", "int(np.argmax(np.array([3, 9, 2])))")
case("nonzero values", "[x.tolist() for x in np.nonzero(np.array([0, 3, 0, 4]))]")
case("searchsorted value", "np.searchsorted(np.arange(0, 100, 10), [15, 55]).tolist()")
case("digitize values", "np.digitize([1, 15, 55], [0, 10, 20]).tolist()")
case("unique", "np.unique(np.array([3, 1, 3, 2, 1]))")
case("unique counts", "np.unique(np.array([3, 1, 3, 2, 1]), return_counts=True)[1]")
case("unique counts positional", "np.unique(np.array([3, 3, 1]), False, False, True)[1]")
case("unique_counts", "np.unique_counts(np.array([5, 5, 6]))")
case("unique_values", "np.unique_values(np.array([5, 5, 6]))")
case("bincount", "np.bincount(np.array([0, 1, 1, 3]))")
case("bincount minlength", "np.bincount(np.array([2, 2]), minlength=5)")
case("bincount weights", "np.bincount(np.array([0, 1, 1]), weights=[0.5, 1.0, 2.0])")
case("histogram counts", "np.histogram(np.arange(100), bins=4)[0]")
case("histogram edges", "np.histogram(np.arange(100), bins=4)[1]")
case("histogram density", "np.histogram(np.arange(10), bins=2, density=True)[0]")
case("histogram2d counts", "np.histogram2d(np.arange(10), np.arange(10), bins=2)[0]")
case("histogramdd counts", "np.histogramdd(np.arange(12).reshape(6, 2), bins=2)[0]")
case("histogram weights int", "np.histogram([1, 2, 3], bins=2, weights=np.array([1, 2, 3]))[0]")
case("in1d isin", "np.isin(np.arange(6), [1, 4])")
case("intersect1d", "np.intersect1d(np.arange(10), np.arange(5, 15))")
case("union1d", "np.union1d([1, 5], [2, 5])")
case("setdiff1d", "np.setdiff1d(np.arange(6), [1, 2])")
case("lexsort values", "np.lexsort(([1, 1, 0], [3, 2, 1])).tolist()")
case("partition", "np.partition(np.array([9, 1, 8, 2, 7]), 2)[2]")
case("flip", "np.flip(np.arange(4))")
case("roll", "np.roll(np.arange(5), 2)")
case("reshape -1", "np.arange(12).reshape(-1, 4).shape")
case("transpose", "np.arange(6).reshape(2, 3).T")
case("ravel_multi_index", "np.ravel_multi_index(([1, 2], [0, 1]), (3, 4)).tolist()")
case("unravel_index", "[x.tolist() for x in np.unravel_index([5, 7], (3, 4))]")
case("triu", "np.triu(np.arange(9).reshape(3, 3))")
case("pad", "np.pad(np.arange(3), 2)")
case("insert", "np.insert(np.arange(4), 1, 99)")
case("delete", "np.delete(np.arange(5), [0, 2])")
case("append", "np.append(np.arange(3), 7)")
case("array_split", "[a.tolist() for a in np.array_split(np.arange(7), 3)]")
case("shape values", "np.zeros((3, 4)).shape")
case("size", "np.zeros((3, 4)).size")
case("len", "len(np.arange(7))")

# Random numbers (seeded: the same generators natively and here)
case("RandomState randint", "np.random.RandomState(0).randint(0, 10, 5)")
case("RandomState randint dtype", "np.random.RandomState(0).randint(0, 10, 5).dtype")
case("RandomState randint big", "np.random.RandomState(1).randint(0, 2**40, 3)")
case("global seed randint", "np.random.seed(3); np.random.randint(0, 100, 4)")
case("RandomState choice", "np.random.RandomState(2).choice(10, 4)")
case("RandomState permutation", "np.random.RandomState(4).permutation(6)")
case("RandomState binomial", "np.random.RandomState(5).binomial(10, 0.5, 5)")
case("RandomState poisson", "np.random.RandomState(6).poisson(3.0, 5)")
case("RandomState random_integers-like", "np.random.RandomState(7).randint(1, 7, size=(2, 3))")
case("RandomState shuffle", "(lambda a: (np.random.RandomState(8).shuffle(a), a)[1])(np.arange(6))")
case("Generator integers", "np.random.default_rng(0).integers(0, 10, 5)")
case("Generator integers dtype", "np.random.default_rng(0).integers(0, 10, 5).dtype")
case("Generator choice", "np.random.default_rng(1).choice(10, 3, replace=False)")
case("Generator permutation", "np.random.default_rng(2).permutation(5)")
case("Generator binomial", "np.random.default_rng(3).binomial(20, 0.3, 4)")
case("Generator poisson", "np.random.default_rng(4).poisson(2.0, 4)")
case("Generator multinomial", "np.random.default_rng(5).multinomial(20, [0.2, 0.3, 0.5])")
case("Generator normal rounded", "np.round(np.random.default_rng(6).normal(size=3), 6)")
case("Generator uniform sum", "round(float(np.random.default_rng(7).random(1000).sum()), 6)")

# Structured arrays and records
case("structured int field", "np.array([(1, 2.0), (3, 4.0)], dtype=[('a', int), ('b', float)])['a']")
case("structured dtype", "np.dtype([('a', int), ('b', 'i4')])")
case("structured sum", "np.array([(1, 2), (3, 4)], dtype=[('x', int), ('y', int)])['x'].sum()")
case("recarray", "np.rec.fromarrays([np.arange(3), np.arange(3) * 2], names='a,b').b")
case("structured from list", "np.array([(1,), (2,)], dtype=[('n', 'int64')])['n'].dtype")

# pandas: construction
case("Series of ints", "pd.Series([1, 2, 3])")
case("Series of arange", "pd.Series(np.arange(10)).dtype")
case("Series of range", "pd.Series(range(5)).dtype")
case("DataFrame of dict", "pd.DataFrame({'a': [1, 2], 'b': [3, 4]}).dtypes")
case("DataFrame of arange", "pd.DataFrame(np.arange(6).reshape(3, 2)).dtypes")
case("DataFrame from records", "pd.DataFrame.from_records([(1, 'x'), (2, 'y')], columns=['n', 's']).dtypes")
case("Index of ints", "pd.Index([1, 2, 3])")
case("RangeIndex values", "pd.RangeIndex(5).values")
case("read_csv ints", "import io; pd.read_csv(io.StringIO('a,b\\n1,2\\n3,4')).dtypes")
case("read_csv sum", "import io; pd.read_csv(io.StringIO('a\\n2000000000\\n2000000000'))['a'].sum()")
case("to_numeric", "pd.to_numeric(pd.Series(['1', '2', '3']))")
case("astype int", "pd.Series([1.5, 2.5]).astype(int)")
case("astype 'int64'", "pd.Series(['7', '8']).astype('int64')")
case("nullable Int64", "pd.array([1, None, 3], dtype='Int64')")
case("Series from numpy int16", "pd.Series(np.arange(3, dtype=np.int16)).dtype")
case("date_range len", "len(pd.date_range('2024-01-01', periods=10))")
case("to_datetime ints", "pd.to_datetime([0, 86400], unit='s')")
case("categorical codes", "pd.Categorical(['a', 'b', 'a']).codes")

# pandas: arithmetic and reductions
case("Series sum", "pd.Series(np.arange(3_000_000)).sum()")
case("Series sum dtype", "type(pd.Series([1, 2]).sum()).__name__")
case("Series prod", "pd.Series(np.arange(1, 21)).prod()")
case("Series cumsum", "pd.Series(np.full(4, 2**30)).cumsum()")
case("Series mean", "pd.Series(np.arange(10)).mean()")
case("Series add", "pd.Series([1, 2]) + pd.Series([3, 4])")
case("Series mul big", "pd.Series([100000, 200000]) * 100000")
case("Series floordiv", "pd.Series([7, 8, 9]) // 2")
case("Series pow", "pd.Series([10, 20]) ** 9")
case("DataFrame sum", "pd.DataFrame({'a': np.arange(5), 'b': np.arange(5) * 2}).sum()")
case("DataFrame sum axis 1", "pd.DataFrame({'a': [1, 2], 'b': [3, 4]}).sum(axis=1)")
case("DataFrame describe count", "pd.DataFrame({'a': np.arange(10)}).describe().loc['count']")
case("DataFrame max", "pd.DataFrame({'a': [3, 9], 'b': [2, 8]}).max()")
case("DataFrame nunique", "pd.DataFrame({'a': [1, 1, 2], 'b': [3, 4, 5]}).nunique()")
case("Series nunique", "pd.Series([1, 1, 2]).nunique()")
case("Series count", "pd.Series([1, None, 3]).count()")
case("Series rank", "pd.Series([30, 10, 20]).rank()")
case("Series diff", "pd.Series([1, 4, 9]).diff()")
case("Series shift", "pd.Series([1, 2, 3]).shift(1)")
case("Series clip", "pd.Series(np.arange(5)).clip(1, 3)")
case("Series abs", "pd.Series([-1, 2, -3]).abs()")
case("Series idxmax", "pd.Series([1, 9, 3]).idxmax()")
case("Series argmax", "int(pd.Series([1, 9, 3]).argmax())")
case("eval", "pd.DataFrame({'a': [1, 2], 'b': [3, 4]}).eval('a * b')")
case("query", "pd.DataFrame({'a': np.arange(5)}).query('a > 2')['a']")
case("rolling sum", "pd.Series(np.arange(6)).rolling(3).sum()")
case("expanding max", "pd.Series([1, 3, 2]).expanding().max()")
case("pct_change", "pd.Series([1, 2, 4]).pct_change()")

# pandas: groupby, merge, value_counts
case("groupby sum", "pd.DataFrame({'k': ['a', 'b', 'a'], 'v': [1, 2, 3]}).groupby('k')['v'].sum()")
case("groupby sum big", "pd.DataFrame({'k': [1, 1, 2], 'v': [2**31, 2**31, 5]}).groupby('k')['v'].sum()")
case("groupby size", "pd.DataFrame({'k': ['a', 'b', 'a']}).groupby('k').size()")
case("groupby count", "pd.DataFrame({'k': ['a', 'b', 'a'], 'v': [1, None, 3]}).groupby('k')['v'].count()")
case("groupby mean", "pd.DataFrame({'k': [1, 2, 1], 'v': [1, 2, 4]}).groupby('k')['v'].mean()")
case("groupby agg", "pd.DataFrame({'k': [1, 2, 1], 'v': [1, 2, 4]}).groupby('k')['v'].agg(['min', 'max', 'sum'])")
case("groupby cumcount", "pd.DataFrame({'k': ['a', 'b', 'a']}).groupby('k').cumcount()")
case("groupby ngroup", "pd.DataFrame({'k': ['b', 'a', 'b']}).groupby('k').ngroup()")
case("groupby nunique", "pd.DataFrame({'k': [1, 1, 2], 'v': [3, 3, 4]}).groupby('k')['v'].nunique()")
case("groupby transform", "pd.DataFrame({'k': [1, 1, 2], 'v': [3, 4, 5]}).groupby('k')['v'].transform('sum')")
case("groupby first", "pd.DataFrame({'k': [1, 1, 2], 'v': [3, 4, 5]}).groupby('k')['v'].first()")
case("groupby cumsum", "pd.DataFrame({'k': [1, 1, 2], 'v': [3, 4, 5]}).groupby('k')['v'].cumsum()")
case("groupby value_counts", "pd.DataFrame({'k': [1, 1, 2], 'v': [3, 3, 4]}).groupby('k')['v'].value_counts()")
case("pivot_table sum", "pd.pivot_table(pd.DataFrame({'r': [1, 1, 2], 'c': ['x', 'y', 'x'], 'v': [1, 2, 3]}), index='r', columns='c', values='v', aggfunc='sum')")
case("crosstab", "pd.crosstab(pd.Series([1, 1, 2]), pd.Series(['x', 'y', 'x']))")
case("value_counts", "pd.Series(['a', 'b', 'a']).value_counts()")
case("value_counts ints", "pd.Series([3, 1, 3, 3]).value_counts()")
case("value_counts normalize", "pd.Series([1, 1, 2, 2]).value_counts(normalize=True)")
case("merge inner", "pd.merge(pd.DataFrame({'k': [1, 2], 'a': [10, 20]}), pd.DataFrame({'k': [2, 3], 'b': [5, 6]}), on='k')")
case("merge left dtypes", "pd.merge(pd.DataFrame({'k': [1, 2]}), pd.DataFrame({'k': [2], 'b': [5]}), on='k', how='left').dtypes")
case("merge outer", "pd.merge(pd.DataFrame({'k': [1, 2], 'a': [1, 2]}), pd.DataFrame({'k': [2, 3], 'b': [3, 4]}), on='k', how='outer')")
case("concat", "pd.concat([pd.Series([1, 2]), pd.Series([3])], ignore_index=True)")
case("join", "pd.DataFrame({'a': [1, 2]}).join(pd.DataFrame({'b': [3, 4]}))")
case("factorize codes", "pd.factorize(pd.Series(['b', 'a', 'b']))[0].tolist()")
case("cut labels", "pd.cut(pd.Series([1, 5, 9]), bins=3, labels=False).tolist()")
case("qcut labels", "pd.qcut(pd.Series(np.arange(8)), 4, labels=False).tolist()")
case("get_dummies", "pd.get_dummies(pd.Series(['a', 'b']), dtype=int)")
case("duplicated sum", "pd.Series([1, 1, 2]).duplicated().sum()")
case("isna sum", "pd.Series([1, None, None]).isna().sum()")
case("sort_values", "pd.Series([3, 1, 2]).sort_values()")
case("nlargest", "pd.Series([3, 10, 2, 8]).nlargest(2)")
case("melt", "pd.DataFrame({'id': [1], 'a': [2], 'b': [3]}).melt(id_vars='id')")
case("stack", "pd.DataFrame({'a': [1], 'b': [2]}).stack()")
case("resample sum", "pd.Series(np.arange(6), index=pd.date_range('2024-01-01', periods=6, freq='D')).resample('2D').sum()")

# scipy: counts, indices and integer results
case("scipy mode", "from scipy import stats; stats.mode(np.array([1, 2, 2, 3])).count")
case("scipy rankdata", "from scipy import stats; stats.rankdata([30, 10, 20])")
case("scipy rankdata ordinal", "from scipy import stats; stats.rankdata([30, 10, 30], method='ordinal')")
case("scipy binned_statistic count", "from scipy import stats; stats.binned_statistic(np.arange(10), np.arange(10), 'count', bins=2).statistic")
case("scipy binned_statistic binnumber", "from scipy import stats; stats.binned_statistic(np.arange(6), np.arange(6), 'sum', bins=2).binnumber.tolist()")
case("scipy label count", "from scipy import ndimage; ndimage.label(np.array([[1, 0, 1], [0, 0, 1]]))[1]")
case("scipy label array", "from scipy import ndimage; ndimage.label(np.array([[1, 0, 1], [0, 0, 1]]))[0].tolist()")
case("scipy ndimage sum_labels", "from scipy import ndimage; ndimage.sum_labels(np.arange(6), np.array([1, 1, 2, 2, 0, 0]), [1, 2])")
case("scipy comb exact", "from scipy.special import comb; comb(60, 30, exact=True)")
case("scipy perm exact", "from scipy.special import perm; perm(20, 10, exact=True)")
case("scipy factorial exact", "from scipy.special import factorial; factorial(25, exact=True)")
case("scipy connected_components", "from scipy.sparse.csgraph import connected_components; from scipy.sparse import csr_array; connected_components(csr_array(np.array([[0, 1, 0], [1, 0, 0], [0, 0, 0]])))[0]")
case("scipy connected_components labels", "from scipy.sparse.csgraph import connected_components; from scipy.sparse import csr_array; connected_components(csr_array(np.array([[0, 1, 0], [1, 0, 0], [0, 0, 0]])))[1].tolist()")
case("scipy sparse nnz", "from scipy.sparse import csr_array; csr_array(np.eye(5)).nnz")
case("scipy sparse sum ints", "from scipy.sparse import csr_array; csr_array(np.arange(12).reshape(3, 4)).sum()")
case("scipy sparse dot ints", "from scipy.sparse import csr_array; (csr_array(np.arange(6).reshape(2, 3)) @ np.arange(3))")
case("scipy fcluster", "from scipy.cluster.hierarchy import linkage, fcluster; fcluster(linkage(np.array([[0.0], [0.1], [5.0], [5.1]])), 2, 'maxclust').tolist()")
case("scipy find_peaks", "from scipy.signal import find_peaks; find_peaks(np.array([0, 2, 0, 3, 0]))[0].tolist()")
case("scipy chi2_contingency dof", "from scipy import stats; stats.chi2_contingency(np.array([[10, 20], [30, 40]])).dof")
case("scipy kruskal stat", "from scipy import stats; round(float(stats.kruskal([1, 2, 3], [4, 5, 6]).statistic), 9)")
case("scipy distance hamming", "from scipy.spatial.distance import hamming; hamming([1, 0, 1], [1, 1, 1])")
case("scipy cKDTree query index", "from scipy.spatial import cKDTree; cKDTree(np.array([[0, 0], [5, 5], [9, 9]])).query([4, 4])[1]")
case("scipy integrate ints", "from scipy import integrate; integrate.trapezoid(np.arange(5))")

# scikit-learn: labels and counts
case("sklearn KMeans labels", "from sklearn.cluster import KMeans; KMeans(2, n_init=3, random_state=0).fit(np.array([[0, 0], [0, 1], [10, 10], [10, 11]])).labels_")
case("sklearn KMeans predict", "from sklearn.cluster import KMeans; KMeans(2, n_init=3, random_state=0).fit(np.array([[0, 0], [10, 10]])).predict(np.array([[1, 1]]))")
case("sklearn DBSCAN labels", "from sklearn.cluster import DBSCAN; DBSCAN(eps=1.5, min_samples=1).fit_predict(np.array([[0, 0], [1, 0], [9, 9]]))")
case("sklearn LabelEncoder", "from sklearn.preprocessing import LabelEncoder; LabelEncoder().fit_transform(['b', 'a', 'b'])")
case("sklearn OrdinalEncoder", "from sklearn.preprocessing import OrdinalEncoder; OrdinalEncoder().fit_transform([['b'], ['a']])")
case("sklearn confusion_matrix", "from sklearn.metrics import confusion_matrix; confusion_matrix([0, 1, 1, 0], [0, 1, 0, 0])")
case("sklearn accuracy", "from sklearn.metrics import accuracy_score; accuracy_score([0, 1, 1], [0, 1, 0])")
case("sklearn train_test_split", "from sklearn.model_selection import train_test_split; train_test_split(np.arange(10), test_size=0.3, random_state=0)[1]")
case("sklearn KFold", "from sklearn.model_selection import KFold; [t.tolist() for _, t in KFold(3).split(np.arange(6))]")
case("sklearn StratifiedKFold", "from sklearn.model_selection import StratifiedKFold; [t.tolist() for _, t in StratifiedKFold(2).split(np.zeros(4), [0, 0, 1, 1])]")
case("sklearn DecisionTree predict", "from sklearn.tree import DecisionTreeClassifier; DecisionTreeClassifier(random_state=0).fit([[0], [1], [2], [3]], [0, 0, 1, 1]).predict([[0.5], [2.5]])")
case("sklearn tree node count", "from sklearn.tree import DecisionTreeClassifier; DecisionTreeClassifier(random_state=0).fit([[0], [1], [2], [3]], [0, 0, 1, 1]).tree_.node_count")
case("sklearn LogisticRegression predict", "from sklearn.linear_model import LogisticRegression; LogisticRegression().fit([[0], [1], [2], [3]], [0, 0, 1, 1]).predict([[0], [3]])")
case("sklearn KNN predict", "from sklearn.neighbors import KNeighborsClassifier; KNeighborsClassifier(1).fit([[0], [5]], [7, 9]).predict([[1], [4]])")
case("sklearn NearestNeighbors indices", "from sklearn.neighbors import NearestNeighbors; NearestNeighbors(n_neighbors=1).fit([[0], [5]]).kneighbors([[1]])[1].tolist()")
case("sklearn classes_", "from sklearn.tree import DecisionTreeClassifier; DecisionTreeClassifier().fit([[0], [1]], [3, 8]).classes_")
case("sklearn CountVectorizer", "from sklearn.feature_extraction.text import CountVectorizer; CountVectorizer().fit_transform(['aa bb bb', 'bb cc']).toarray()")
case("sklearn make_blobs labels", "from sklearn.datasets import make_blobs; make_blobs(6, random_state=0)[1]")
case("sklearn make_classification labels", "from sklearn.datasets import make_classification; make_classification(8, random_state=0)[1]")
case("sklearn iris target", "from sklearn.datasets import load_iris; np.bincount(load_iris().target)")
case("sklearn digits shape", "from sklearn.datasets import load_digits; load_digits().data.shape")
case("sklearn AgglomerativeClustering", "from sklearn.cluster import AgglomerativeClustering; AgglomerativeClustering(2).fit_predict(np.array([[0], [1], [10], [11]]))")
case("sklearn OneHotEncoder", "from sklearn.preprocessing import OneHotEncoder; OneHotEncoder().fit_transform([[1], [2], [1]]).toarray()")
case("sklearn KBinsDiscretizer", "from sklearn.preprocessing import KBinsDiscretizer; KBinsDiscretizer(2, encode='ordinal', quantile_method='averaged_inverted_cdf').fit_transform([[0], [1], [2], [3]])")
case("sklearn sample image", "from sklearn.datasets import load_sample_image; load_sample_image('china.jpg').shape")


def describe(value):
    """What is compared: the kind, dtype and values, with floats to 9 significant digits."""
    if isinstance(value, (pd.DataFrame, pd.Series, pd.Index)):
        return pandas_value(value)
    if isinstance(value, np.dtype):
        return {"dtype": str(value), "fields": None if value.names is None else [str(value[n]) for n in value.names]}
    if isinstance(value, np.ndarray):
        return {"ndarray": str(value.dtype), "shape": list(value.shape), "values": plain(value.tolist())}
    if isinstance(value, np.generic):
        return {"scalar": str(value.dtype), "value": plain(value.item())}
    if hasattr(value, "toarray"):
        return {"sparse": str(value.dtype), "values": plain(value.toarray().tolist())}
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return {name: describe(getattr(value, name)) for name in value._fields}
    if isinstance(value, (list, tuple)):
        return [describe(v) for v in value]
    if isinstance(value, pd.arrays.IntegerArray):
        return {"extension": str(value.dtype), "values": plain(value.tolist())}
    return {type(value).__name__: plain(value)}


def pandas_value(value):
    if isinstance(value, pd.DataFrame):
        return {
            "frame": {str(c): str(t) for c, t in value.dtypes.items()},
            "index": describe(value.index),
            "values": plain(value.to_numpy().tolist()),
        }
    if isinstance(value, pd.Series):
        return {"series": str(value.dtype), "index": describe(value.index), "values": plain(value.tolist())}
    return {"index": str(value.dtype), "values": plain(value.tolist())}


def plain(value):
    if isinstance(value, float):
        # NaN and the infinities as text: JSON has no numbers for them.
        return repr(value) if value != value or value in (float("inf"), float("-inf")) else float(f"{value:.9g}")
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (int, str, bool)) or value is None:
        return value
    if isinstance(value, np.generic):
        return plain(value.item())
    return repr(value)


def run():
    # The cases run as the user's own code does: in __main__.
    namespace = sys.modules["__main__"].__dict__
    namespace.update(np=np, pd=pd)
    answers = {}
    for name, code in CASES:
        *body, last = code.split("; ")
        try:
            for statement in body:
                exec(statement, namespace)
            answers[name] = describe(eval(last, namespace))
        except Exception as exc:  # noqa: BLE001 - an error is an answer too
            answers[name] = {"error": type(exc).__name__}
    import scipy
    import sklearn

    versions = {m.__name__: m.__version__ for m in (np, pd, scipy, sklearn)}
    return {"versions": versions, "answers": answers}


if __name__ == "__main__":
    result = json.dumps(run(), sort_keys=True)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as out:
            out.write(result)
    else:
        print(result)
