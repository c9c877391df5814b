//! What the kernels work on, as every part of them names it: a checked product, its matrices
//! and tiles, the guest memory's base, how a computation ended, and why a call stays in the
//! guest. Types only, so the readers (`args`, `packed`, `vector`, `sort`) and the computing
//! parts depend on this and not on each other.

use super::table::Elem;

/// Why a call stays in the guest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decline {
    /// Arguments BLAS itself rejects: the guest's kernel says what is wrong.
    Invalid,
    /// Too little work to be worth the trip.
    Small,
    /// `alpha` is zero or `k` is: only scaling, which the guest does as BLAS does.
    ScaleOnly,
    /// A conjugated operand: the host's complex kernels do not conjugate.
    Conjugated,
    /// A matrix reaches past the guest's memory.
    Outside,
    /// An element not aligned to its type.
    Misaligned,
    /// The result overlaps an operand: left to the guest, whatever it makes of that.
    Overlap,
}

/// Whether an operand is used as it is stored or transposed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Plain,
    Transposed,
}

/// A column-major matrix in guest memory: `rows` x `cols`, column `j` starting `ld` elements
/// after column `j - 1`, at byte address `at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Matrix {
    pub at: u64,
    pub ld: u64,
    pub rows: u64,
    pub cols: u64,
}

impl Matrix {
    /// The bytes it spans, `at..end`. Saturating: sizes and leading dimensions up to 2^31 can
    /// make the product pass 2^64, which must read as "past the memory", never wrap to a small
    /// end that passes the check.
    pub fn end(&self, elem: Elem) -> u64 {
        if self.rows == 0 || self.cols == 0 {
            return self.at;
        }
        extent(self.at, self.cols - 1, self.ld, self.rows, elem.size())
    }
}

/// `at + (count * step + last) * size`, saturating (see [`Matrix::end`]).
pub fn extent(at: u64, count: u64, step: u64, last: u64, size: u64) -> u64 {
    at.saturating_add(
        count
            .saturating_mul(step)
            .saturating_add(last)
            .saturating_mul(size),
    )
}

impl Matrix {
    /// Whether its bytes overlap `other`'s.
    pub fn overlaps(&self, other: &Matrix, elem: Elem) -> bool {
        self.at < other.end(elem) && other.at < self.end(elem)
    }
}

/// Which cells of the result are the product's: all (gemm), or one triangle (syrk, whose
/// other triangle BLAS leaves untouched).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    All,
    /// Row <= column.
    Upper,
    /// Row >= column.
    Lower,
}

/// How much of a tile a [`Part`] takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cover {
    Nothing,
    Whole,
    Partly,
}

impl Part {
    pub fn holds(self, row: u64, col: u64) -> bool {
        match self {
            Part::All => true,
            Part::Upper => row <= col,
            Part::Lower => row >= col,
        }
    }

    pub fn covers(self, t: &Tile) -> Cover {
        if self == Part::All {
            return Cover::Whole;
        }
        let (last_row, last_col) = (t.i + t.rows - 1, t.j + t.cols - 1);
        // A triangle holds a rectangle's two far corners both (all of it), neither (none of
        // it), or one (part of it).
        match [self.holds(t.i, last_col), self.holds(last_row, t.j)] {
            [true, true] => Cover::Whole,
            [false, false] => Cover::Nothing,
            _ => Cover::Partly,
        }
    }
}

/// `c := alpha * op_a(a) * op_b(b) + beta * c` on `part` of `c`, column-major, checked against
/// memory. A scalar holds `[re, im]` (`im` is 0 for real types).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Product {
    pub elem: Elem,
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub op_a: Op,
    pub op_b: Op,
    pub alpha: [f64; 2],
    pub beta: [f64; 2],
    pub a: Matrix,
    pub b: Matrix,
    pub c: Matrix,
    pub part: Part,
}

impl Product {
    /// Multiply-adds: what fuel and the block plan count.
    pub fn work(&self) -> u64 {
        self.m.saturating_mul(self.n).saturating_mul(self.k)
    }
}

/// How a product's computation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Done,
    /// `stop` said so before a tile: the result holds a part of the product.
    Stopped,
}

/// One tile of the result: rows `i..i + rows`, columns `j..j + cols`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tile {
    pub i: u64,
    pub j: u64,
    pub rows: u64,
    pub cols: u64,
}

/// The guest memory's base address, shared with the pool's threads.
#[derive(Clone, Copy)]
pub struct Base(pub *mut u8);
// SAFETY: the pointer is only used by `compute`, whose caller guarantees nothing else touches
// the memory meanwhile; the tiles it writes are disjoint.
unsafe impl Send for Base {}
unsafe impl Sync for Base {}
