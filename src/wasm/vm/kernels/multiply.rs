//! One call into `matrixmultiply` for the four element types, so the kernels name a product
//! once whatever its type: `c := alpha * a * b + beta * c` on raw pointers and element strides.

use matrixmultiply::CGemmOption;

/// An element type `matrixmultiply` multiplies, and its scalars from `[re, im]`.
pub trait Scalar: Copy {
    fn from_pair(x: [f64; 2]) -> Self;

    /// # Safety
    /// As [`Gemm::run`].
    unsafe fn gemm(g: &Gemm, alpha: Self, beta: Self);
}

/// A product's sizes, and its operands as byte pointers with element strides (row, column).
#[derive(Clone, Copy)]
pub struct Gemm {
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub a: (*const u8, isize, isize),
    pub b: (*const u8, isize, isize),
    pub c: (*mut u8, isize, isize),
}

impl Gemm {
    /// # Safety
    /// Every element the sizes and strides reach lies in memory holding `T`s, and `c` overlaps
    /// neither operand.
    pub unsafe fn run<T: Scalar>(&self, alpha: [f64; 2], beta: [f64; 2]) {
        // SAFETY: as the caller promises.
        unsafe { T::gemm(self, T::from_pair(alpha), T::from_pair(beta)) }
    }
}

const PLAIN: CGemmOption = CGemmOption::Standard;

impl Scalar for f64 {
    fn from_pair(x: [f64; 2]) -> Self {
        x[0]
    }
    unsafe fn gemm(g: &Gemm, alpha: Self, beta: Self) {
        let (a, b, c) = (g.a, g.b, g.c);
        // SAFETY: as `Gemm::run`'s caller promises.
        unsafe {
            matrixmultiply::dgemm(
                g.m,
                g.k,
                g.n,
                alpha,
                a.0.cast(),
                a.1,
                a.2,
                b.0.cast(),
                b.1,
                b.2,
                beta,
                c.0.cast(),
                c.1,
                c.2,
            )
        }
    }
}

impl Scalar for f32 {
    fn from_pair(x: [f64; 2]) -> Self {
        x[0] as f32
    }
    unsafe fn gemm(g: &Gemm, alpha: Self, beta: Self) {
        let (a, b, c) = (g.a, g.b, g.c);
        // SAFETY: as `Gemm::run`'s caller promises.
        unsafe {
            matrixmultiply::sgemm(
                g.m,
                g.k,
                g.n,
                alpha,
                a.0.cast(),
                a.1,
                a.2,
                b.0.cast(),
                b.1,
                b.2,
                beta,
                c.0.cast(),
                c.1,
                c.2,
            )
        }
    }
}

impl Scalar for [f64; 2] {
    fn from_pair(x: [f64; 2]) -> Self {
        x
    }
    unsafe fn gemm(g: &Gemm, alpha: Self, beta: Self) {
        let (a, b, c) = (g.a, g.b, g.c);
        // SAFETY: as `Gemm::run`'s caller promises.
        unsafe {
            matrixmultiply::zgemm(
                PLAIN,
                PLAIN,
                g.m,
                g.k,
                g.n,
                alpha,
                a.0.cast(),
                a.1,
                a.2,
                b.0.cast(),
                b.1,
                b.2,
                beta,
                c.0.cast(),
                c.1,
                c.2,
            )
        }
    }
}

impl Scalar for [f32; 2] {
    fn from_pair(x: [f64; 2]) -> Self {
        [x[0] as f32, x[1] as f32]
    }
    unsafe fn gemm(g: &Gemm, alpha: Self, beta: Self) {
        let (a, b, c) = (g.a, g.b, g.c);
        // SAFETY: as `Gemm::run`'s caller promises.
        unsafe {
            matrixmultiply::cgemm(
                PLAIN,
                PLAIN,
                g.m,
                g.k,
                g.n,
                alpha,
                a.0.cast(),
                a.1,
                a.2,
                b.0.cast(),
                b.1,
                b.2,
                beta,
                c.0.cast(),
                c.1,
                c.2,
            )
        }
    }
}
