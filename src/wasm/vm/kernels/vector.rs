//! OpenBLAS's level-2 kernels, each on a column-major matrix `a` (`lda`) and strided vectors:
//! `?gemv_n` (`y += alpha * a * x`), `?gemv_t` (`y += alpha * a' * x`) and `?ger_k` (`a += alpha *
//! x * y'`), each `(m, n, _, alpha, ...)`; `?symv_L`/`?symv_U` (`y += alpha * a * x` for a
//! symmetric `a` of which one triangle is stored), `(m, offset, alpha, a, lda, x, incx, y, incy,
//! buffer)`; and `?syr2_L`/`?syr2_U` (`a += alpha * x * y' + alpha * y * x'` on one triangle),
//! `(m, alpha, x, incx, y, incy, a, lda, buffer)`. Every `gemv_`/`ger_`/`symv_`/`syr2_` call and
//! LAPACK's unblocked panels (QR's Householder steps, LU's columns, the tridiagonal and
//! bidiagonal reductions of `eigh`, `eigvalsh` and `svd`) end here. `symv` is bound whole:
//! OpenBLAS's own splits it into gemv calls on 16-column strips, most of them too small for the
//! trip to the host. They are bound by memory, not arithmetic: the host gains by reading it in
//! wide native loads.

use wasmtime::Val;

use super::args;
use super::shapes::{Base, Decline, Matrix, extent};
use super::table::{Elem, Level2};

/// A strided vector in guest memory: `len` elements `inc` apart from byte address `at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Strided {
    pub at: u64,
    pub len: u64,
    pub inc: u64,
}

impl Strided {
    fn end(&self, elem: Elem) -> u64 {
        if self.len == 0 {
            self.at
        } else {
            extent(self.at, self.len - 1, self.inc, 1, elem.size())
        }
    }
}

/// A checked level-2 call.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Vector {
    pub kind: Level2,
    pub elem: Elem,
    pub alpha: f64,
    pub a: Matrix,
    /// gemv and symv: x is read, y written; ger and syr2: both read, a written.
    pub x: Strided,
    pub y: Strided,
}

impl Vector {
    pub fn work(&self) -> u64 {
        self.a.rows.saturating_mul(self.a.cols)
    }
}

fn int(v: &Val) -> Result<i32, Decline> {
    v.i32().ok_or(Decline::Invalid)
}

fn size(v: &Val) -> Result<u64, Decline> {
    int(v).and_then(|x| u64::try_from(x).map_err(|_| Decline::Invalid))
}

fn at(v: &Val) -> Result<u64, Decline> {
    int(v).map(|x| u64::from(x as u32))
}

/// A stride; negative ones stay in the guest (the kernels take them, the host does not).
fn inc(v: &Val) -> Result<u64, Decline> {
    size(v).and_then(|i| if i == 0 { Err(Decline::Invalid) } else { Ok(i) })
}

pub fn read(kind: Level2, elem: Elem, p: &[Val], memory: &[u8]) -> Result<Vector, Decline> {
    let call = match kind {
        Level2::SymvL | Level2::SymvU => symv_call(kind, elem, p, memory)?,
        Level2::Syr2L | Level2::Syr2U => syr2_call(kind, elem, p, memory)?,
        Level2::GemvN | Level2::GemvT | Level2::Ger => gemv_or_ger(kind, elem, p, memory)?,
    };
    check(&call, memory.len() as u64)?;
    Ok(call)
}

/// `?symv_L`/`?symv_U(m, offset, alpha, a, lda, x, incx, y, incy, buffer)`. BLAS's interface
/// passes `offset == m` (the whole matrix); a part of it (OpenBLAS's threaded driver) stays in
/// the guest.
fn symv_call(kind: Level2, elem: Elem, p: &[Val], memory: &[u8]) -> Result<Vector, Decline> {
    let [m, offset, alpha, a, lda, x, incx, y, incy, _] = p else {
        return Err(Decline::Invalid);
    };
    if size(offset)? != size(m)? {
        return Err(Decline::Invalid);
    }
    square(kind, elem, memory, [m, alpha, a, lda, x, incx, y, incy])
}

/// `?syr2_L`/`?syr2_U(m, alpha, x, incx, y, incy, a, lda, buffer)`: LAPACK's unblocked
/// tridiagonal reduction (`eigvalsh`, and the last columns of `eigh`) spends half its time here.
fn syr2_call(kind: Level2, elem: Elem, p: &[Val], memory: &[u8]) -> Result<Vector, Decline> {
    let [m, alpha, x, incx, y, incy, a, lda, _] = p else {
        return Err(Decline::Invalid);
    };
    square(kind, elem, memory, [m, alpha, a, lda, x, incx, y, incy])
}

/// A call on an `m x m` matrix with two vectors of `m` (symv, syr2), from `[m, alpha, a, lda,
/// x, incx, y, incy]`.
fn square(kind: Level2, elem: Elem, memory: &[u8], p: [&Val; 8]) -> Result<Vector, Decline> {
    let [m, alpha, a, lda, x, incx, y, incy] = p;
    let (m, lda) = (size(m)?, size(lda)?);
    if lda < m.max(1) {
        return Err(Decline::Invalid);
    }
    let vector = |at: u64, inc: u64| Strided { at, len: m, inc };
    Ok(Vector {
        kind,
        elem,
        alpha: args::scalar(elem, alpha, memory)?[0],
        a: Matrix {
            at: self::at(a)?,
            ld: lda,
            rows: m,
            cols: m,
        },
        x: vector(self::at(x)?, self::inc(incx)?),
        y: vector(self::at(y)?, self::inc(incy)?),
    })
}

fn gemv_or_ger(kind: Level2, elem: Elem, p: &[Val], memory: &[u8]) -> Result<Vector, Decline> {
    let [m, n, _, alpha, p4, p5, p6, p7, p8, p9, _] = p else {
        return Err(Decline::Invalid);
    };
    // Only real kernels are bound: their alpha is passed by value.
    let alpha = args::scalar(elem, alpha, memory)?[0];
    let (m, n) = (size(m)?, size(n)?);
    let (a, lda, first, second) = match kind {
        // gemv: a, lda, x, incx, y, incy
        Level2::GemvN | Level2::GemvT => (at(p4)?, size(p5)?, (at(p6)?, inc(p7)?), (at(p8)?, inc(p9)?)),
        // ger: x, incx, y, incy, a, lda
        Level2::Ger => (at(p8)?, size(p9)?, (at(p4)?, inc(p5)?), (at(p6)?, inc(p7)?)),
        Level2::SymvL | Level2::SymvU | Level2::Syr2L | Level2::Syr2U => return Err(Decline::Invalid),
    };
    if lda < m.max(1) {
        return Err(Decline::Invalid);
    }
    let (x_len, y_len) = match kind {
        Level2::GemvN => (n, m),
        _ => (m, n),
    };
    Ok(Vector {
        kind,
        elem,
        alpha,
        a: Matrix {
            at: a,
            ld: lda,
            rows: m,
            cols: n,
        },
        x: Strided {
            at: first.0,
            len: x_len,
            inc: first.1,
        },
        y: Strided {
            at: second.0,
            len: y_len,
            inc: second.1,
        },
    })
}

fn check(call: &Vector, memory: u64) -> Result<(), Decline> {
    let e = call.elem;
    let spans = [
        (call.a.at, call.a.end(e)),
        (call.x.at, call.x.end(e)),
        (call.y.at, call.y.end(e)),
    ];
    for (at, end) in spans {
        if end > memory {
            return Err(Decline::Outside);
        }
        if at % e.align() != 0 {
            return Err(Decline::Misaligned);
        }
    }
    // What is written must overlap nothing read.
    let written = match call.kind {
        Level2::Ger | Level2::Syr2L | Level2::Syr2U => 0,
        Level2::GemvN | Level2::GemvT | Level2::SymvL | Level2::SymvU => 2,
    };
    let (w_at, w_end) = spans[written];
    let overlap = spans
        .iter()
        .enumerate()
        .any(|(i, &(at, end))| i != written && at < w_end && w_at < end);
    if overlap { Err(Decline::Overlap) } else { Ok(()) }
}

/// Computes `call` on the memory at `base`.
///
/// # Safety
/// `call` was checked by [`read`] against the memory at `base`, which stays mapped and
/// untouched by anything else until this returns.
pub unsafe fn compute(call: &Vector, base: Base) {
    // SAFETY: as the caller promises.
    unsafe {
        match call.elem {
            Elem::F64 => run::<f64>(call, base, call.alpha),
            Elem::F32 => run::<f32>(call, base, call.alpha as f32),
            // Only the real kernels are bound (see `table::BOUND`).
            Elem::C32 | Elem::C64 => {}
        }
    }
}

trait Num:
    Copy + Default + std::ops::Add<Output = Self> + std::ops::Mul<Output = Self> + std::ops::AddAssign
{
}
impl Num for f64 {}
impl Num for f32 {}

unsafe fn run<T: Num>(call: &Vector, base: Base, alpha: T) {
    let ptr = |at: u64| unsafe { base.0.add(at as usize).cast::<T>() };
    let (m, n, lda) = (call.a.rows as usize, call.a.cols as usize, call.a.ld as usize);
    let a = ptr(call.a.at);
    let (x, y) = (ptr(call.x.at), ptr(call.y.at));
    let (incx, incy) = (call.x.inc as usize, call.y.inc as usize);
    // SAFETY (each access below): inside the spans `read` checked; the written span overlaps
    // no read one, so the slices made here alias nothing.
    unsafe {
        let column = |j: usize| std::slice::from_raw_parts(a.add(j * lda), m);
        match call.kind {
            Level2::GemvN => {
                let xs: Vec<T> = (0..n).map(|j| alpha * x.add(j * incx).read()).collect();
                if incy == 1 {
                    let y = std::slice::from_raw_parts_mut(y, m);
                    for (j, &t) in xs.iter().enumerate() {
                        for (yi, &ai) in y.iter_mut().zip(column(j)) {
                            *yi += t * ai;
                        }
                    }
                } else {
                    for (j, &t) in xs.iter().enumerate() {
                        for (i, &ai) in column(j).iter().enumerate() {
                            *y.add(i * incy) += t * ai;
                        }
                    }
                }
            }
            Level2::GemvT => {
                let xs: Vec<T> = (0..m).map(|i| x.add(i * incx).read()).collect();
                for j in 0..n {
                    *y.add(j * incy) += alpha * dot(column(j), &xs);
                }
            }
            Level2::SymvL | Level2::SymvU => {
                let xs: Vec<T> = (0..m).map(|i| x.add(i * incx).read()).collect();
                let mut ys: Vec<T> = (0..m).map(|i| y.add(i * incy).read()).collect();
                symv(call.kind == Level2::SymvL, alpha, column, &xs, &mut ys);
                for (i, &v) in ys.iter().enumerate() {
                    y.add(i * incy).write(v);
                }
            }
            Level2::Syr2L | Level2::Syr2U => {
                let xs: Vec<T> = (0..m).map(|i| x.add(i * incx).read()).collect();
                let ys: Vec<T> = (0..m).map(|i| y.add(i * incy).read()).collect();
                let column = |rows: std::ops::Range<usize>, j: usize| {
                    std::slice::from_raw_parts_mut(a.add(j * lda + rows.start), rows.len())
                };
                syr2(call.kind == Level2::Syr2L, alpha, column, &xs, &ys);
            }
            Level2::Ger => {
                let xs: Vec<T> = (0..m).map(|i| alpha * x.add(i * incx).read()).collect();
                for j in 0..n {
                    let t = y.add(j * incy).read();
                    let col = std::slice::from_raw_parts_mut(a.add(j * lda), m);
                    for (aij, &xi) in col.iter_mut().zip(&xs) {
                        *aij += xi * t;
                    }
                }
            }
        }
    }
}

/// `y += alpha * a * x` for the symmetric `a` whose lower (else upper) triangle `column(j)`
/// holds: each stored column is read once, both as a column and as a row.
fn symv<'a, T: Num + 'a>(lower: bool, alpha: T, column: impl Fn(usize) -> &'a [T], x: &[T], y: &mut [T]) {
    for j in 0..x.len() {
        let col = column(j);
        let rows = if lower { j + 1..x.len() } else { 0..j };
        let t = alpha * x[j];
        for (yi, &ai) in y[rows.clone()].iter_mut().zip(&col[rows.clone()]) {
            *yi += t * ai;
        }
        let below = dot(&col[rows.clone()], &x[rows]);
        y[j] += t * col[j] + alpha * below;
    }
}

/// `a += alpha * x * y' + alpha * y * x'` on the lower (else upper) triangle; `column(rows, j)`
/// is those rows of column j.
fn syr2<'a, T: Num + 'a>(
    lower: bool,
    alpha: T,
    column: impl Fn(std::ops::Range<usize>, usize) -> &'a mut [T],
    x: &[T],
    y: &[T],
) {
    for j in 0..x.len() {
        let rows = if lower { j..x.len() } else { 0..j + 1 };
        let (tx, ty) = (alpha * x[j], alpha * y[j]);
        let col = column(rows.clone(), j);
        for ((aij, &xi), &yi) in col.iter_mut().zip(&x[rows.clone()]).zip(&y[rows]) {
            *aij += xi * ty + yi * tx;
        }
    }
}

/// A dot product in four independent sums, which the compiler turns into vector code.
fn dot<T: Num>(a: &[T], b: &[T]) -> T {
    let mut sums = [T::default(); 4];
    let (a4, b4) = (a.chunks_exact(4), b.chunks_exact(4));
    let (ra, rb) = (a4.remainder(), b4.remainder());
    for (ca, cb) in a4.zip(b4) {
        for k in 0..4 {
            sums[k] += ca[k] * cb[k];
        }
    }
    let mut total = (sums[0] + sums[1]) + (sums[2] + sums[3]);
    for (&p, &q) in ra.iter().zip(rb) {
        total += p * q;
    }
    total
}

#[cfg(test)]
mod tests;
