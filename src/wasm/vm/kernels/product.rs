//! Computing a checked [`Product`] on the guest's memory, in tiles of the result: the caller's
//! `stop` is asked before each tile, so a product of any size ends within one tile's time of
//! its deadline, and tiles run in parallel on the kernel pool.

use rayon::prelude::*;

use super::multiply::Gemm;
use super::shapes::{Base, Cover, Matrix, Op, Outcome, Part, Product, Tile};
use super::table::Elem;

/// Multiply-adds in one tile: a few milliseconds on one core, so a deadline is kept to about
/// that, yet enough for the kernels to run at full speed.
pub const TILE_WORK: u64 = 1 << 26;
/// The depth one pass over a tile takes at most; deeper products pass again, adding.
const DEPTH: u64 = 1 << 15;

/// The tiles of an `m x n` result for a product of depth `k`, each about [`TILE_WORK`].
pub fn tiles(m: u64, n: u64, k: u64) -> Vec<Tile> {
    let cells = (TILE_WORK / k.clamp(1, DEPTH)).max(64 * 64);
    let (rows, cols) = if m * n <= cells {
        (m, n)
    } else if m <= cells / 64 {
        (m, (cells / m).max(1))
    } else {
        (cells / 64, 64.min(n))
    };
    let mut out = Vec::new();
    for j in (0..n).step_by(cols.max(1) as usize) {
        for i in (0..m).step_by(rows.max(1) as usize) {
            out.push(Tile {
                i,
                j,
                rows: rows.min(m - i),
                cols: cols.min(n - j),
            });
        }
    }
    out
}

/// Columns of a triangle's tiles (syrk, syr2k): the squares on its diagonal are computed whole
/// and half thrown away, so they are kept narrow; what lies beside them goes straight into the
/// result.
const TRIANGLE_BLOCK: u64 = 64;

/// The tiles of `p`'s result: for a triangle, per block of columns, the square on the diagonal
/// and the rectangle of rows the triangle holds whole (cut as [`tiles`] cuts).
pub fn plan(p: &Product) -> Vec<Tile> {
    if p.part == Part::All {
        return tiles(p.m, p.n, p.k);
    }
    let mut out = Vec::new();
    for j in (0..p.n).step_by(TRIANGLE_BLOCK as usize) {
        let cols = TRIANGLE_BLOCK.min(p.n - j);
        let square = cols.min(p.m.saturating_sub(j));
        if square > 0 {
            out.push(Tile {
                i: j,
                j,
                rows: square,
                cols,
            });
        }
        let whole = match p.part {
            Part::Lower => (j + cols).min(p.m)..p.m,
            _ => 0..j.min(p.m),
        };
        for t in tiles(whole.end - whole.start, cols, p.k) {
            out.push(Tile {
                i: whole.start + t.i,
                j: j + t.j,
                ..t
            });
        }
    }
    out
}

/// Computes `p` on the memory at `base`, tile by tile, in parallel on the current rayon pool.
///
/// # Safety
/// `p` was checked (by [`super::args::read`] or [`super::args::read_syr2k`]) against the memory at `base`, which stays mapped
/// and untouched by anything else until this returns.
pub unsafe fn compute(p: &Product, base: Base, stop: &(dyn Fn() -> bool + Sync)) -> Outcome {
    let tiles = plan(p);
    let run = |t: &Tile| -> Result<(), ()> {
        if stop() {
            return Err(());
        }
        // SAFETY: as the caller promises; each tile writes only its own cells.
        match p.part.covers(t) {
            Cover::Nothing => {}
            Cover::Whole => unsafe { whole(p, base, t) },
            Cover::Partly => unsafe { partly(p, base, t) },
        }
        Ok(())
    };
    // One tile runs here: a small product may run on any thread, never reaching for a pool.
    let ran = match tiles.as_slice() {
        [one] => run(one),
        many => many.par_iter().try_for_each(run),
    };
    match ran {
        Ok(()) => Outcome::Done,
        Err(()) => Outcome::Stopped,
    }
}

/// Where a pass writes: an element's byte address is `at + (row * rs + col * cs) * size`.
#[derive(Clone, Copy)]
struct Dest {
    at: *mut u8,
    rs: isize,
    cs: isize,
}

/// Tile `t` computed into the guest's result, pass by pass (the first scales by beta).
unsafe fn whole(p: &Product, base: Base, t: &Tile) {
    let size = p.elem.size() as isize;
    let offset = (t.i as isize + t.j as isize * p.c.ld as isize) * size;
    // SAFETY: inside the checked extent of c.
    let dest = Dest {
        at: unsafe { base.0.add(p.c.at as usize).offset(offset) },
        rs: 1,
        cs: p.c.ld as isize,
    };
    passes(p, base, t, dest, p.alpha, p.beta);
}

/// Tile `t` of a result of which only a triangle is the product's (syrk): computed whole into
/// a buffer of the host's, then only the triangle's cells merged into the guest's result.
unsafe fn partly(p: &Product, base: Base, t: &Tile) {
    let (rows, cols) = (t.rows as usize, t.cols as usize);
    // Complex-sized cells, so the buffer is aligned for every element type.
    let mut tile = vec![[0f64; 2]; rows * cols];
    let dest = Dest {
        at: tile.as_mut_ptr().cast(),
        rs: 1,
        cs: rows as isize,
    };
    passes(p, base, t, dest, p.alpha, [0.0, 0.0]);
    let from = tile.as_ptr();
    // SAFETY: the tile's cells are inside c's checked extent; the buffer holds rows x cols.
    unsafe {
        match p.elem {
            Elem::F64 => merge_triangle::<f64>(p, base, t, from.cast(), p.beta[0]),
            Elem::F32 => merge_triangle::<f32>(p, base, t, from.cast(), p.beta[0] as f32),
            // Only real triangles are bound (see `table::BOUND`).
            Elem::C32 | Elem::C64 => {}
        }
    }
}

/// The cells of tile `t` that `p`'s triangle holds, from `from` (the tile computed whole,
/// column-major) into the guest's result.
unsafe fn merge_triangle<T: Num>(p: &Product, base: Base, t: &Tile, from: *const T, beta: T) {
    let c = base.0.wrapping_add(p.c.at as usize).cast::<T>();
    let rows = t.rows as usize;
    for col in 0..t.cols as usize {
        let j = t.j + col as u64;
        // The tile's rows whose cell in column j the triangle holds.
        let held = match p.part {
            Part::Lower => (j.saturating_sub(t.i) as usize).min(rows)..rows,
            _ => 0..((j + 1).saturating_sub(t.i) as usize).min(rows),
        };
        for row in held {
            let i = t.i + row as u64;
            // SAFETY: as the caller promises.
            unsafe { merge(c.add((i + j * p.c.ld) as usize), from.add(row + col * rows), beta) };
        }
    }
}

/// What a merged element needs.
trait Num: Copy + PartialEq + Default + std::ops::Add<Output = Self> + std::ops::Mul<Output = Self> {}
impl Num for f64 {}
impl Num for f32 {}

/// `*c = product + beta * *c`; with beta 0 the old value is not read (BLAS: it may be NaN).
unsafe fn merge<T: Num>(c: *mut T, product: *const T, beta: T) {
    // SAFETY: as the caller promises.
    unsafe {
        let value = if beta == T::default() {
            *product
        } else {
            *product + beta * c.read_unaligned()
        };
        c.write_unaligned(value);
    }
}

/// All passes over `t`'s depth into `dest`: the first scales by `beta`, later ones add.
fn passes(p: &Product, base: Base, t: &Tile, dest: Dest, alpha: [f64; 2], beta: [f64; 2]) {
    let mut from = 0;
    while from < p.k {
        let depth = DEPTH.min(p.k - from);
        let beta = if from == 0 { beta } else { [1.0, 0.0] };
        // SAFETY: `compute`'s caller checked the operands; `dest` spans the tile.
        unsafe { pass(p, base, t, from, depth, dest, alpha, beta) };
        from += depth;
    }
}

/// Element strides (row, column) of an operand used through `op`.
fn strides(x: &Matrix, op: Op) -> (isize, isize) {
    match op {
        Op::Plain => (1, x.ld as isize),
        Op::Transposed => (x.ld as isize, 1),
    }
}

/// One pass of depth `depth` from `from` over tile `t` into `dest`.
#[allow(clippy::too_many_arguments)]
unsafe fn pass(
    p: &Product,
    base: Base,
    t: &Tile,
    from: u64,
    depth: u64,
    dest: Dest,
    alpha: [f64; 2],
    beta: [f64; 2],
) {
    let size = p.elem.size() as isize;
    let (rsa, csa) = strides(&p.a, p.op_a);
    let (rsb, csb) = strides(&p.b, p.op_b);
    let at = |x: &Matrix, row: u64, rs: isize, col: u64, cs: isize| {
        let offset = (row as isize * rs + col as isize * cs) * size;
        // SAFETY: inside the checked extent of `x`.
        unsafe { base.0.add(x.at as usize).offset(offset) }
    };
    let a = at(&p.a, t.i, rsa, from, csa);
    let b = at(&p.b, from, rsb, t.j, csb);
    let g = Gemm {
        m: t.rows as usize,
        k: depth as usize,
        n: t.cols as usize,
        a: (a, rsa, csa),
        b: (b, rsb, csb),
        c: (dest.at, dest.rs, dest.cs),
    };
    // SAFETY: the pointers and strides stay inside the checked extents; the result overlaps
    // no operand (checked).
    unsafe {
        match p.elem {
            Elem::F64 => g.run::<f64>(alpha, beta),
            Elem::F32 => g.run::<f32>(alpha, beta),
            Elem::C64 => g.run::<[f64; 2]>(alpha, beta),
            Elem::C32 => g.run::<[f32; 2]>(alpha, beta),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_cover_the_result_once_and_stay_near_the_tile_work() {
        for (m, n, k) in [
            (512, 512, 512),
            (20000, 20000, 20000),
            (50, 50, 100_000),
            (1, 9000, 7),
            (3000, 5, 3000),
        ] {
            let tiles = tiles(m, n, k);
            let cells: u64 = tiles.iter().map(|t| t.rows * t.cols).sum();
            assert_eq!(cells, m * n, "{m}x{n}x{k}");
            for t in &tiles {
                assert!(t.i + t.rows <= m && t.j + t.cols <= n);
                assert!(
                    t.rows * t.cols * k.min(DEPTH) <= TILE_WORK.max(64 * 64 * k.min(DEPTH)),
                    "{t:?}"
                );
            }
        }
        assert_eq!(tiles(512, 512, 512).len(), 2);
    }

    #[test]
    fn a_triangles_tiles_cover_it_once_with_narrow_squares_on_its_diagonal() {
        let m = Matrix {
            at: 0,
            ld: 300,
            rows: 300,
            cols: 300,
        };
        for (part, n, k) in [
            (Part::Lower, 300, 40),
            (Part::Upper, 300, 40),
            (Part::Lower, 65, 3),
            (Part::Upper, 1, 1),
        ] {
            let p = Product {
                elem: Elem::F64,
                m: n,
                n,
                k,
                op_a: Op::Plain,
                op_b: Op::Transposed,
                alpha: [1.0, 0.0],
                beta: [0.0, 0.0],
                a: m,
                b: m,
                c: m,
                part,
            };
            let mut seen = vec![0u8; (n * n) as usize];
            for t in plan(&p) {
                assert!(
                    t.rows <= TRIANGLE_BLOCK || part.covers(&t) == Cover::Whole,
                    "{t:?}"
                );
                for j in t.j..t.j + t.cols {
                    for i in t.i..t.i + t.rows {
                        if part.holds(i, j) {
                            seen[(i + j * n) as usize] += 1;
                        }
                    }
                }
            }
            for j in 0..n {
                for i in 0..n {
                    let want = u8::from(part.holds(i, j));
                    assert_eq!(seen[(i + j * n) as usize], want, "{part:?} {n}: ({i}, {j})");
                }
            }
        }
    }
}
