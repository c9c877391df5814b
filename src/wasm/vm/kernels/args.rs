//! A bound call's arguments, read and checked: what the product is, and where its three
//! matrices lie in guest memory. Every number comes from the guest, so nothing here is trusted:
//! a call this cannot take whole is declined, and the guest's own kernel runs it (and reports
//! its errors exactly as before).

use wasmtime::Val;

use super::shapes::{Decline, Matrix, Op, Part, Product};
use super::table::{Elem, Entry, Form, SMALLEST};

/// The call's product, or why the guest keeps it. `memory` is the guest's whole memory.
pub fn read(entry: &Entry, params: &[Val], memory: &[u8]) -> Result<Product, Decline> {
    let raw = match entry.form {
        Form::Cblas => cblas(entry.elem, params, memory)?,
        Form::Fortran => fortran(entry.elem, params, memory)?,
        Form::CblasSyrk => cblas_syrk(entry.elem, params, memory)?,
        Form::FortranSyrk => fortran_syrk(entry.elem, params, memory)?,
        Form::FortranSyr2k | Form::Packed | Form::Level2(_) | Form::Sort(_) => return Err(Decline::Invalid),
    };
    check(entry.elem, raw, memory.len() as u64)
}

/// `?syr2k_(&uplo, &trans, &n, &k, &alpha, a, &lda, b, &ldb, &beta, c, &ldc)`, `c := alpha *
/// a * b' + alpha * b * a' + beta * c` on one triangle (trans 'N'; 'T' transposes both
/// products), as the two products it is: the second adds to what the first wrote. LAPACK's
/// tridiagonal reduction (`eigh`) spends half its time here.
pub fn read_syr2k(elem: Elem, p: &[Val], memory: &[u8]) -> Result<[Product; 2], Decline> {
    let ptr = Pointers { p, memory };
    let first = fortran_triangle(elem, p, memory, 9)?;
    let first = Raw {
        b: ptr.at(7)?,
        ldb: ptr.num(8)?,
        ..first
    };
    let second = Raw {
        a: first.b,
        lda: first.ldb,
        b: first.a,
        ldb: first.lda,
        beta: [1.0, 0.0],
        ..first
    };
    let memory = memory.len() as u64;
    Ok([check(elem, first, memory)?, check(elem, second, memory)?])
}

/// The arguments as BLAS's column-major interface names them, before any check.
struct Raw {
    ta: u8,
    tb: u8,
    m: i32,
    n: i32,
    k: i32,
    alpha: [f64; 2],
    a: u32,
    lda: i32,
    b: u32,
    ldb: i32,
    beta: [f64; 2],
    c: u32,
    ldc: i32,
    part: Part,
}

fn int(v: &Val) -> Result<i32, Decline> {
    v.i32().ok_or(Decline::Invalid)
}

fn cblas(elem: Elem, p: &[Val], memory: &[u8]) -> Result<Raw, Decline> {
    if p.len() != 14 {
        return Err(Decline::Invalid);
    }
    let scalar = |v: &Val| scalar(elem, v, memory);
    // CBLAS's enums: order 101 row-major, 102 column-major; 111 plain, 112 transposed,
    // 113 conjugate-transposed, 114 conjugated (OpenBLAS's own).
    let op = |v: &Val| -> Result<u8, Decline> {
        match int(v)? {
            111 => Ok(b'N'),
            112 => Ok(b'T'),
            113 => Ok(b'C'),
            114 => Ok(b'R'),
            _ => Err(Decline::Invalid),
        }
    };
    let raw = Raw {
        ta: op(&p[1])?,
        tb: op(&p[2])?,
        m: int(&p[3])?,
        n: int(&p[4])?,
        k: int(&p[5])?,
        alpha: scalar(&p[6])?,
        a: int(&p[7])? as u32,
        lda: int(&p[8])?,
        b: int(&p[9])? as u32,
        ldb: int(&p[10])?,
        beta: scalar(&p[11])?,
        c: int(&p[12])? as u32,
        ldc: int(&p[13])?,
        part: Part::All,
    };
    match int(&p[0])? {
        102 => Ok(raw),
        // Row-major C = A B is column-major C' = B' A': the operands and sizes swap.
        101 => Ok(Raw {
            ta: raw.tb,
            tb: raw.ta,
            m: raw.n,
            n: raw.m,
            a: raw.b,
            lda: raw.ldb,
            b: raw.a,
            ldb: raw.lda,
            ..raw
        }),
        _ => Err(Decline::Invalid),
    }
}

fn fortran(elem: Elem, p: &[Val], memory: &[u8]) -> Result<Raw, Decline> {
    if p.len() != 13 {
        return Err(Decline::Invalid);
    }
    let ptr = Pointers { p, memory };
    let (at, byte, num) = (|i| ptr.at(i), |i| ptr.byte(i), |i| ptr.num(i));
    Ok(Raw {
        ta: byte(0)?.to_ascii_uppercase(),
        tb: byte(1)?.to_ascii_uppercase(),
        m: num(2)?,
        n: num(3)?,
        k: num(4)?,
        alpha: load_scalar(elem, memory, at(5)?)?,
        a: at(6)?,
        lda: num(7)?,
        b: at(8)?,
        ldb: num(9)?,
        beta: load_scalar(elem, memory, at(10)?)?,
        c: at(11)?,
        ldc: num(12)?,
        part: Part::All,
    })
}

/// A syrk as the product it is: `c := alpha * a * a' + beta * c` (trans 'N', a is n x k) or
/// `alpha * a' * a` ('T', a is k x n), on the `uplo` triangle of c.
#[allow(clippy::too_many_arguments)]
fn syrk(
    uplo: u8,
    trans: u8,
    n: i32,
    k: i32,
    alpha: [f64; 2],
    a: u32,
    lda: i32,
    beta: [f64; 2],
    c: u32,
    ldc: i32,
) -> Result<Raw, Decline> {
    let part = match uplo {
        b'U' => Part::Upper,
        b'L' => Part::Lower,
        _ => return Err(Decline::Invalid),
    };
    let (ta, tb) = match trans {
        b'N' => (b'N', b'T'),
        b'T' | b'C' => (b'T', b'N'),
        _ => return Err(Decline::Invalid),
    };
    Ok(Raw {
        ta,
        tb,
        m: n,
        n,
        k,
        alpha,
        a,
        lda,
        b: a,
        ldb: lda,
        beta,
        c,
        ldc,
        part,
    })
}

fn cblas_syrk(elem: Elem, p: &[Val], memory: &[u8]) -> Result<Raw, Decline> {
    let [order, uplo, trans, n, k, alpha, a, lda, beta, c, ldc] = p else {
        return Err(Decline::Invalid);
    };
    let scalar = |v: &Val| scalar(elem, v, memory);
    // CBLAS: 121 upper, 122 lower; 111 plain, 112 and 113 transposed. Row-major is the
    // column-major syrk of the other triangle with the other transpose.
    let row = match int(order)? {
        101 => true,
        102 => false,
        _ => return Err(Decline::Invalid),
    };
    let uplo = match (int(uplo)?, row) {
        (121, false) | (122, true) => b'U',
        (122, false) | (121, true) => b'L',
        _ => return Err(Decline::Invalid),
    };
    let trans = match (int(trans)?, row) {
        (111, false) | (112 | 113, true) => b'N',
        (112 | 113, false) | (111, true) => b'T',
        _ => return Err(Decline::Invalid),
    };
    let at = |v: &Val| int(v).map(|x| x as u32);
    syrk(
        uplo,
        trans,
        int(n)?,
        int(k)?,
        scalar(alpha)?,
        at(a)?,
        int(lda)?,
        scalar(beta)?,
        at(c)?,
        int(ldc)?,
    )
}

fn fortran_syrk(elem: Elem, p: &[Val], memory: &[u8]) -> Result<Raw, Decline> {
    fortran_triangle(elem, p, memory, 7)
}

/// `(&uplo, &trans, &n, &k, &alpha, a, &lda, ..., &beta, c, &ldc)` with beta at `beta`, read
/// as the syrk it starts with (syr2k's `b` comes between `lda` and `beta`).
fn fortran_triangle(elem: Elem, p: &[Val], memory: &[u8], beta: usize) -> Result<Raw, Decline> {
    if p.len() != beta + 3 {
        return Err(Decline::Invalid);
    }
    let ptr = Pointers { p, memory };
    let (at, byte, num) = (|i| ptr.at(i), |i| ptr.byte(i), |i| ptr.num(i));
    let (uplo, trans) = (byte(0)?.to_ascii_uppercase(), byte(1)?.to_ascii_uppercase());
    let (alpha, beta_value) = (
        load_scalar(elem, memory, at(4)?)?,
        load_scalar(elem, memory, at(beta)?)?,
    );
    syrk(
        uplo,
        trans,
        num(2)?,
        num(3)?,
        alpha,
        at(5)?,
        num(6)?,
        beta_value,
        at(beta + 1)?,
        num(beta + 2)?,
    )
}

/// A scalar passed by value (real types) or by pointer (complex), as `[re, im]`.
pub fn scalar(elem: Elem, v: &Val, memory: &[u8]) -> Result<[f64; 2], Decline> {
    match (elem, v) {
        (Elem::F32, Val::F32(bits)) => Ok([f64::from(f32::from_bits(*bits)), 0.0]),
        (Elem::F64, Val::F64(bits)) => Ok([f64::from_bits(*bits), 0.0]),
        (Elem::C32 | Elem::C64, Val::I32(at)) => load_scalar(elem, memory, *at as u32),
        _ => Err(Decline::Invalid),
    }
}

/// A Fortran call's arguments, every one a pointer into guest memory.
struct Pointers<'a> {
    p: &'a [Val],
    memory: &'a [u8],
}

impl Pointers<'_> {
    fn at(&self, i: usize) -> Result<u32, Decline> {
        int(&self.p[i]).map(|v| v as u32)
    }

    fn byte(&self, i: usize) -> Result<u8, Decline> {
        self.memory
            .get(self.at(i)? as usize)
            .copied()
            .ok_or(Decline::Outside)
    }

    fn num(&self, i: usize) -> Result<i32, Decline> {
        load_i32(self.memory, self.at(i)?)
    }
}

/// The `i32` at `at`.
fn load_i32(memory: &[u8], at: u32) -> Result<i32, Decline> {
    let at = at as usize;
    let bytes = memory.get(at..at.saturating_add(4)).ok_or(Decline::Outside)?;
    Ok(i32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
}

/// A scalar of type `elem` at `at`, as `[re, im]`.
fn load_scalar(elem: Elem, memory: &[u8], at: u32) -> Result<[f64; 2], Decline> {
    let at = at as usize;
    let bytes = memory
        .get(at..at.saturating_add(elem.size() as usize))
        .ok_or(Decline::Outside)?;
    let f32_at = |i: usize| {
        f64::from(f32::from_le_bytes([
            bytes[i],
            bytes[i + 1],
            bytes[i + 2],
            bytes[i + 3],
        ]))
    };
    let f64_at = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&bytes[i..i + 8]);
        f64::from_le_bytes(b)
    };
    Ok(match elem {
        Elem::F32 => [f32_at(0), 0.0],
        Elem::F64 => [f64_at(0), 0.0],
        Elem::C32 => [f32_at(0), f32_at(4)],
        Elem::C64 => [f64_at(0), f64_at(8)],
    })
}

fn operation(t: u8, complex: bool) -> Result<Op, Decline> {
    match (t, complex) {
        (b'N', _) => Ok(Op::Plain),
        (b'T', _) | (b'C', false) => Ok(Op::Transposed),
        (b'R', false) => Ok(Op::Plain),
        (b'C' | b'R', true) => Err(Decline::Conjugated),
        _ => Err(Decline::Invalid),
    }
}

/// The stored shape of an operand used as `rows x cols` through `op`.
fn stored(op: Op, rows: u64, cols: u64) -> (u64, u64) {
    match op {
        Op::Plain => (rows, cols),
        Op::Transposed => (cols, rows),
    }
}

fn check(elem: Elem, r: Raw, memory: u64) -> Result<Product, Decline> {
    let (op_a, op_b) = (
        operation(r.ta, elem.is_complex())?,
        operation(r.tb, elem.is_complex())?,
    );
    let size = |v: i32| u64::try_from(v).map_err(|_| Decline::Invalid);
    let (m, n, k) = (size(r.m)?, size(r.n)?, size(r.k)?);
    let matrix = |at: u32, ld: i32, (rows, cols): (u64, u64)| -> Result<Matrix, Decline> {
        let ld = size(ld)?;
        if ld < rows.max(1) {
            return Err(Decline::Invalid);
        }
        Ok(Matrix {
            at: u64::from(at),
            ld,
            rows,
            cols,
        })
    };
    let a = matrix(r.a, r.lda, stored(op_a, m, k))?;
    let b = matrix(r.b, r.ldb, stored(op_b, k, n))?;
    let c = matrix(r.c, r.ldc, (m, n))?;
    let p = Product {
        elem,
        m,
        n,
        k,
        op_a,
        op_b,
        alpha: r.alpha,
        beta: r.beta,
        a,
        b,
        c,
        part: r.part,
    };
    if p.work() < SMALLEST {
        return Err(Decline::Small);
    }
    if r.alpha == [0.0, 0.0] {
        return Err(Decline::ScaleOnly);
    }
    for x in [&a, &b, &c] {
        if x.end(elem) > memory {
            return Err(Decline::Outside);
        }
        if x.at % elem.align() != 0 {
            return Err(Decline::Misaligned);
        }
    }
    if a.overlaps(&c, elem) || b.overlaps(&c, elem) {
        return Err(Decline::Overlap);
    }
    Ok(p)
}

#[cfg(test)]
mod tests;
