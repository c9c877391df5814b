//! Which of the runtime's functions are bound to host kernels, and how each takes its
//! arguments. The names are OpenBLAS's exported entry points, found in the module's name
//! section; numpy calls the CBLAS ones, LAPACK and scipy's wrappers the Fortran ones.

/// How a bound function takes its arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// `cblas_?gemm(order, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)`:
    /// numbers by value (complex scalars by pointer).
    Cblas,
    /// `?gemm_(&transa, &transb, &m, &n, &k, &alpha, a, &lda, b, &ldb, &beta, c, &ldc)`:
    /// everything by pointer.
    Fortran,
    /// `cblas_?syrk(order, uplo, trans, n, k, alpha, a, lda, beta, c, ldc)`: a product of a
    /// matrix with its own transpose, on one triangle of the result (numpy's `x.T @ x`).
    CblasSyrk,
    /// `?syrk_(&uplo, &trans, &n, &k, &alpha, a, &lda, &beta, c, &ldc)`.
    FortranSyrk,
    /// `?syr2k_(&uplo, &trans, &n, &k, &alpha, a, &lda, b, &ldb, &beta, c, &ldc)`: `alpha * a *
    /// b' + alpha * b * a'` on one triangle (LAPACK's tridiagonal reduction).
    FortranSyr2k,
    /// OpenBLAS's level-2 kernels `?gemv_n`, `?gemv_t`, `?ger_k`, `?symv_L`, `?symv_U`,
    /// `?syr2_L`, `?syr2_U` (see `vector`).
    Level2(Level2),
    /// numpy's `quicksort_<T>(start, num)` (see `sort`); the entry's `elem` is unused.
    Sort(Keys),
    /// OpenBLAS's inner kernel `?gemm_kernel(m, n, k, alpha, packed_a, packed_b, c, ldc)`,
    /// which every level-3 routine (gemm, trsm, trmm, syrk, symm, LU's updates) ends in:
    /// `c += alpha * a * b` on operands packed in panels of [`PANEL`] (see `packed`).
    Packed,
}

/// Rows (columns) of a packed panel of a (b): the runtime's OpenBLAS is built for the generic
/// target, whose kernels work on 2 x 2 blocks (its `?gemm_oncopy` packs both operands).
pub const PANEL: u64 = 2;

/// The element type of a product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    F32,
    F64,
    C32,
    C64,
}

impl Form {
    /// Which parameters hold the sizes by value, when they do, and the least product of them
    /// worth the trip: the bound function asks the host only past it, in WebAssembly, so the
    /// many small blocks of LAPACK's routines never pay for the trip.
    pub fn gate(self) -> Option<(&'static [u32], u64)> {
        match self {
            Form::Cblas => Some((&[3, 4, 5], SMALLEST)),
            Form::CblasSyrk => Some((&[3, 3, 4], SMALLEST)),
            Form::Packed => Some((&[0, 1, 2], SMALLEST)),
            // syr2's second parameter is alpha: its matrix is m x m.
            Form::Level2(Level2::Syr2L | Level2::Syr2U) => Some((&[0, 0], SMALLEST_LEVEL2)),
            Form::Level2(_) => Some((&[0, 1], SMALLEST_LEVEL2)),
            Form::Sort(_) => Some((&[1], SMALLEST_SORT)),
            Form::Fortran | Form::FortranSyrk | Form::FortranSyr2k => None,
        }
    }
}

/// Products smaller than this many multiply-adds stay in the guest: the trip to the host
/// costs more than it saves.
pub const SMALLEST: u64 = 32 * 32 * 32;
/// The same for a level-2 kernel's matrix, in elements.
pub const SMALLEST_LEVEL2: u64 = 64 * 64;
/// The same for a sort, in keys.
pub const SMALLEST_SORT: u64 = 4096;

impl Elem {
    /// Bytes of one element.
    pub fn size(self) -> u64 {
        match self {
            Elem::F32 => 4,
            Elem::F64 | Elem::C32 => 8,
            Elem::C64 => 16,
        }
    }

    /// Bytes of one real component: the alignment the host's kernels need.
    pub fn align(self) -> u64 {
        match self {
            Elem::F32 | Elem::C32 => 4,
            Elem::F64 | Elem::C64 => 8,
        }
    }

    pub fn is_complex(self) -> bool {
        matches!(self, Elem::C32 | Elem::C64)
    }
}

/// One bound function.
#[derive(Clone, Copy, Debug)]
pub struct Entry {
    pub name: &'static str,
    pub form: Form,
    pub elem: Elem,
}

const fn entry(name: &'static str, form: Form, elem: Elem) -> Entry {
    Entry { name, form, elem }
}

/// Every function bound, in the order their imports are added.
pub const BOUND: &[Entry] = &[
    entry("cblas_dgemm", Form::Cblas, Elem::F64),
    entry("cblas_sgemm", Form::Cblas, Elem::F32),
    entry("cblas_zgemm", Form::Cblas, Elem::C64),
    entry("cblas_cgemm", Form::Cblas, Elem::C32),
    entry("dgemm_", Form::Fortran, Elem::F64),
    entry("sgemm_", Form::Fortran, Elem::F32),
    entry("zgemm_", Form::Fortran, Elem::C64),
    entry("cgemm_", Form::Fortran, Elem::C32),
    entry("cblas_dsyrk", Form::CblasSyrk, Elem::F64),
    entry("cblas_ssyrk", Form::CblasSyrk, Elem::F32),
    entry("dsyrk_", Form::FortranSyrk, Elem::F64),
    entry("ssyrk_", Form::FortranSyrk, Elem::F32),
    entry("dsyr2k_", Form::FortranSyr2k, Elem::F64),
    entry("ssyr2k_", Form::FortranSyr2k, Elem::F32),
    entry("dgemm_kernel", Form::Packed, Elem::F64),
    entry("sgemm_kernel", Form::Packed, Elem::F32),
    entry("dgemv_n", Form::Level2(Level2::GemvN), Elem::F64),
    entry("dgemv_t", Form::Level2(Level2::GemvT), Elem::F64),
    entry("sgemv_n", Form::Level2(Level2::GemvN), Elem::F32),
    entry("sgemv_t", Form::Level2(Level2::GemvT), Elem::F32),
    entry("dger_k", Form::Level2(Level2::Ger), Elem::F64),
    entry("sger_k", Form::Level2(Level2::Ger), Elem::F32),
    entry("dsyr2_L", Form::Level2(Level2::Syr2L), Elem::F64),
    entry("dsyr2_U", Form::Level2(Level2::Syr2U), Elem::F64),
    entry("ssyr2_L", Form::Level2(Level2::Syr2L), Elem::F32),
    entry("ssyr2_U", Form::Level2(Level2::Syr2U), Elem::F32),
    entry("dsymv_L", Form::Level2(Level2::SymvL), Elem::F64),
    entry("dsymv_U", Form::Level2(Level2::SymvU), Elem::F64),
    entry("ssymv_L", Form::Level2(Level2::SymvL), Elem::F32),
    entry("ssymv_U", Form::Level2(Level2::SymvU), Elem::F32),
    entry(
        "int quicksort_<npy::floating_point_type<double, (NPY_TYPES)12>, double, false>(double*, long)",
        Form::Sort(Keys::F64),
        Elem::F64,
    ),
    entry(
        "int quicksort_<npy::floating_point_type<float, (NPY_TYPES)11>, float, false>(float*, long)",
        Form::Sort(Keys::F32),
        Elem::F32,
    ),
    entry(
        "int quicksort_<npy::integral_type<long long, (NPY_TYPES)9>, long long, false>(long long*, long)",
        Form::Sort(Keys::I64),
        Elem::F64,
    ),
    entry(
        "int quicksort_<npy::integral_type<int, (NPY_TYPES)5>, int, false>(int*, long)",
        Form::Sort(Keys::I32),
        Elem::F32,
    ),
];

/// The import module the host kernels are linked under.
pub const MODULE: &str = "host_kernels";

/// Which level-2 kernel (see `vector`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level2 {
    GemvN,
    GemvT,
    Ger,
    /// A symmetric matrix by a vector, from its lower triangle.
    SymvL,
    /// The same from its upper triangle.
    SymvU,
    /// `a += alpha * x * y' + alpha * y * x'` on the lower triangle.
    Syr2L,
    /// The same on the upper triangle.
    Syr2U,
}

/// The key type of a bound sort (see `sort`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keys {
    F64,
    F32,
    I64,
    I32,
}
