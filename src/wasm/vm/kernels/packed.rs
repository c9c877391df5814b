//! OpenBLAS's inner kernel, `?gemm_kernel(m, n, k, alpha, sa, sb, c, ldc)`: `c += alpha * a * b`
//! where `a` (m x k) and `b` (k x n) arrive packed by the level-3 routine that calls it. With
//! [`PANEL`] = 2, `a` is row pairs, each `k` interleaved pairs (`a[2r][p], a[2r+1][p]`), then
//! the odd last row alone; `b` likewise by column pairs. The host unpacks both into column-major
//! buffers of its own (work of m·k + k·n beside m·n·k) and multiplies into the guest's `c`.

use wasmtime::Val;

use super::args;
use super::multiply::{Gemm, Scalar};
use super::shapes::{Base, Decline, Matrix, extent};
use super::table::{Elem, PANEL, SMALLEST};

/// A checked inner-kernel call.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Packed {
    pub elem: Elem,
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub alpha: f64,
    /// Byte addresses of the packed operands (m·k and k·n elements, contiguous).
    pub sa: u64,
    pub sb: u64,
    pub c: Matrix,
}

impl Packed {
    pub fn work(&self) -> u64 {
        self.m.saturating_mul(self.n).saturating_mul(self.k)
    }
}

/// The call's arguments, or why the guest keeps it.
pub fn read(elem: Elem, p: &[Val], memory: &[u8]) -> Result<Packed, Decline> {
    let [m, n, k, alpha, sa, sb, c, ldc] = p else {
        return Err(Decline::Invalid);
    };
    let int = |v: &Val| v.i32().ok_or(Decline::Invalid);
    let size = |v: &Val| int(v).and_then(|x| u64::try_from(x).map_err(|_| Decline::Invalid));
    // Only real kernels are bound: their alpha is passed by value.
    let alpha = args::scalar(elem, alpha, memory)?[0];
    let (m, n, k) = (size(m)?, size(n)?, size(k)?);
    let ld = size(ldc)?;
    if ld < m.max(1) {
        return Err(Decline::Invalid);
    }
    let call = Packed {
        elem,
        m,
        n,
        k,
        alpha,
        sa: u64::from(int(sa)? as u32),
        sb: u64::from(int(sb)? as u32),
        c: Matrix {
            at: u64::from(int(c)? as u32),
            ld,
            rows: m,
            cols: n,
        },
    };
    if call.work() < SMALLEST {
        return Err(Decline::Small);
    }
    check(&call, memory.len() as u64)?;
    Ok(call)
}

fn check(call: &Packed, memory: u64) -> Result<(), Decline> {
    let size = call.elem.size();
    let c_end = call.c.end(call.elem);
    let spans = [
        (call.sa, extent(call.sa, call.m, call.k, 0, size)),
        (call.sb, extent(call.sb, call.k, call.n, 0, size)),
        (call.c.at, c_end),
    ];
    for (at, end) in spans {
        if end > memory {
            return Err(Decline::Outside);
        }
        if at % call.elem.align() != 0 {
            return Err(Decline::Misaligned);
        }
    }
    let (c_at, _) = spans[2];
    if spans[..2].iter().any(|&(at, end)| at < c_end && c_at < end) {
        return Err(Decline::Overlap);
    }
    Ok(())
}

/// Where element (i, p) of an operand packed in panels of [`PANEL`] along i (of `count`) lies,
/// in elements from its start, for depth `k`.
fn packed_at(i: u64, p: u64, count: u64, k: u64) -> u64 {
    let full = count - count % PANEL;
    if i < full {
        (i / PANEL) * PANEL * k + p * PANEL + i % PANEL
    } else {
        full * k + (i - full) * k + p
    }
}

/// A packed operand as a column-major `rows x k` (for a) or row-major `count x k` (for b,
/// which is the same as column-major k x count) buffer of the host's.
///
/// # Safety
/// `at..at + count * k` elements of `T` lie inside the memory at `base`.
unsafe fn unpack<T: Copy>(base: Base, at: u64, count: u64, k: u64, a_side: bool) -> Vec<T> {
    let src = unsafe { base.0.add(at as usize) } as *const T;
    let mut out = Vec::with_capacity((count * k) as usize);
    let spare = out.spare_capacity_mut();
    for i in 0..count {
        for p in 0..k {
            let to = if a_side { i + p * count } else { p + i * k };
            // SAFETY: packed_at < count * k, inside the span checked by `read`.
            spare[to as usize].write(unsafe { src.add(packed_at(i, p, count, k) as usize).read_unaligned() });
        }
    }
    // SAFETY: every one of the count * k elements was written above (the map is one-to-one).
    unsafe { out.set_len((count * k) as usize) };
    out
}

/// Computes `call` on the memory at `base`.
///
/// # Safety
/// `call` was checked by [`read`] against the memory at `base`, which stays mapped and
/// untouched by anything else until this returns.
pub unsafe fn compute(call: &Packed, base: Base) {
    // SAFETY: as the caller promises.
    unsafe {
        match call.elem {
            Elem::F64 => multiply::<f64>(call, base),
            Elem::F32 => multiply::<f32>(call, base),
            // Only the real kernels are bound (see `table::BOUND`).
            Elem::C32 | Elem::C64 => {}
        }
    }
}

/// The operands unpacked into column-major buffers of the host's, multiplied into `c`.
unsafe fn multiply<T: Scalar>(call: &Packed, base: Base) {
    // SAFETY: spans checked by `read`; the result overlaps neither operand.
    unsafe {
        let a: Vec<T> = unpack(base, call.sa, call.m, call.k, true);
        let b: Vec<T> = unpack(base, call.sb, call.n, call.k, false);
        let (m, k) = (call.m as isize, call.k as isize);
        let g = Gemm {
            m: call.m as usize,
            k: call.k as usize,
            n: call.n as usize,
            a: (a.as_ptr().cast(), 1, m),
            b: (b.as_ptr().cast(), 1, k),
            c: (base.0.add(call.c.at as usize), 1, call.c.ld as isize),
        };
        g.run::<T>([call.alpha, 0.0], [1.0, 0.0]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packed_operand_maps_each_element_to_one_place() {
        for (count, k) in [(5, 3), (4, 7), (1, 4), (6, 1)] {
            let mut seen: Vec<u64> = (0..count)
                .flat_map(|i| (0..k).map(move |p| packed_at(i, p, count, k)))
                .collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..count * k).collect::<Vec<_>>(), "{count} x {k}");
        }
        // Rows 0 and 1 interleave; the odd last row follows whole.
        assert_eq!(
            [
                packed_at(0, 0, 3, 2),
                packed_at(1, 0, 3, 2),
                packed_at(0, 1, 3, 2)
            ],
            [0, 1, 2]
        );
        assert_eq!([packed_at(2, 0, 3, 2), packed_at(2, 1, 3, 2)], [4, 5]);
    }

    #[test]
    fn the_host_kernel_matches_the_product_of_the_unpacked_operands() {
        let (m, n, k) = (5u64, 3u64, 4u64);
        let a = |i: u64, p: u64| (i * 10 + p) as f64;
        let b = |p: u64, j: u64| (p as f64) - (j as f64) * 0.5;
        let mut memory = vec![0f64; 256];
        for i in 0..m {
            for p in 0..k {
                memory[packed_at(i, p, m, k) as usize] = a(i, p);
            }
        }
        for j in 0..n {
            for p in 0..k {
                memory[64 + packed_at(j, p, n, k) as usize] = b(p, j);
            }
        }
        let ld = 7;
        memory[128..128 + (ld * n) as usize].fill(1.0);
        let call = Packed {
            elem: Elem::F64,
            m,
            n,
            k,
            alpha: 2.0,
            sa: 0,
            sb: 64 * 8,
            c: Matrix {
                at: 128 * 8,
                ld,
                rows: m,
                cols: n,
            },
        };
        let base = Base(memory.as_mut_ptr().cast());
        // SAFETY: every span lies inside `memory`.
        unsafe { compute(&call, base) };
        for i in 0..m {
            for j in 0..n {
                let want = 1.0 + 2.0 * (0..k).map(|p| a(i, p) * b(p, j)).sum::<f64>();
                assert_eq!(memory[(128 + i + j * ld) as usize], want, "c[{i}][{j}]");
            }
        }
        assert_eq!(memory[(128 + m) as usize], 1.0, "rows past m are untouched");
    }
}
