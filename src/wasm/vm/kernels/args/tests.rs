use wasmtime::Val;

use super::*;
use crate::wasm::vm::kernels::table::BOUND;

fn entry(name: &str) -> Entry {
    *BOUND.iter().find(|e| e.name == name).expect("a bound entry")
}

/// `cblas_dgemm` arguments: column-major unless `row`, plain operands.
fn cblas(row: bool, m: i32, n: i32, k: i32, a: i32, b: i32, c: i32) -> Vec<Val> {
    let order = if row { 101 } else { 102 };
    vec![
        Val::I32(order),
        Val::I32(111),
        Val::I32(112),
        Val::I32(m),
        Val::I32(n),
        Val::I32(k),
        Val::F64(2.0f64.to_bits()),
        Val::I32(a),
        Val::I32(m.max(1)),
        Val::I32(b),
        Val::I32(n.max(1)),
        Val::F64(0.0f64.to_bits()),
        Val::I32(c),
        Val::I32(m.max(1)),
    ]
}

#[test]
fn a_product_inside_memory_is_taken_with_its_shapes() {
    let memory = vec![0u8; 3 << 20];
    let p = read(
        &entry("cblas_dgemm"),
        &cblas(false, 64, 64, 64, 0, 1 << 20, 2 << 20),
        &memory,
    )
    .expect("taken");
    assert_eq!(
        (p.m, p.n, p.k, p.op_a, p.op_b),
        (64, 64, 64, Op::Plain, Op::Transposed)
    );
    assert_eq!(
        p.b,
        Matrix {
            at: 1 << 20,
            ld: 64,
            rows: 64,
            cols: 64
        },
        "b is used transposed: stored n x k"
    );
    assert_eq!(p.alpha, [2.0, 0.0]);
}

#[test]
fn row_major_swaps_the_operands() {
    let memory = vec![0u8; 3 << 20];
    let mut params = cblas(true, 40, 70, 50, 0, 1 << 20, 2 << 20);
    // Row-major: each row of A (40 x 50) holds k; B, used transposed, is stored 70 x 50; C 40 x 70.
    params[8] = Val::I32(50);
    params[10] = Val::I32(50);
    params[13] = Val::I32(70);
    let p = read(&entry("cblas_dgemm"), &params, &memory).expect("taken");
    assert_eq!((p.m, p.n), (70, 40));
    assert_eq!((p.a.at, p.op_a), (1 << 20, Op::Transposed));
    assert_eq!((p.b.at, p.op_b), (0, Op::Plain));
}

#[test]
fn what_the_host_cannot_take_whole_stays_in_the_guest() {
    let memory = vec![0u8; 3 << 20];
    let e = entry("cblas_dgemm");
    let outside = cblas(false, 64, 64, 64, 0, 1 << 20, (3 << 20) - 100);
    assert_eq!(read(&e, &outside, &memory), Err(Decline::Outside));
    let near_end = cblas(false, 64, 64, 64, 0, 1 << 20, -8);
    assert_eq!(
        read(&e, &near_end, &memory),
        Err(Decline::Outside),
        "a pointer near 4 GiB does not wrap"
    );
    assert_eq!(
        read(&e, &cblas(false, 4, 4, 4, 0, 1024, 2048), &memory),
        Err(Decline::Small)
    );
    let overlap = cblas(false, 64, 64, 64, 0, 1 << 20, 8 * 64);
    assert_eq!(read(&e, &overlap, &memory), Err(Decline::Overlap));
    assert_eq!(
        read(&e, &cblas(false, 64, 64, 64, 4, 1 << 20, 2 << 20), &memory),
        Err(Decline::Misaligned)
    );
    let mut negative = cblas(false, 64, 64, 64, 0, 1 << 20, 2 << 20);
    negative[3] = Val::I32(-1);
    assert_eq!(read(&e, &negative, &memory), Err(Decline::Invalid));
    let mut short_ld = cblas(false, 64, 64, 64, 0, 1 << 20, 2 << 20);
    short_ld[13] = Val::I32(63);
    assert_eq!(
        read(&e, &short_ld, &memory),
        Err(Decline::Invalid),
        "ldc below m is BLAS's error to report"
    );
    let mut zero_alpha = cblas(false, 64, 64, 64, 0, 1 << 20, 2 << 20);
    zero_alpha[6] = Val::F64(0.0f64.to_bits());
    assert_eq!(read(&e, &zero_alpha, &memory), Err(Decline::ScaleOnly));
    assert_eq!(
        read(&e, &cblas(false, 64, 64, 64, 0, 1 << 20, 2 << 20)[..5], &memory),
        Err(Decline::Invalid)
    );
}

#[test]
fn fortran_arguments_are_read_through_their_pointers_and_checked_too() {
    let mut memory = vec![0u8; 3 << 20];
    let put =
        |memory: &mut Vec<u8>, at: usize, bytes: &[u8]| memory[at..at + bytes.len()].copy_from_slice(bytes);
    put(&mut memory, 16, b"n");
    put(&mut memory, 17, b"C");
    for (i, v) in [64i32, 48, 80, 64, 48, 64].iter().enumerate() {
        put(&mut memory, 32 + 4 * i, &v.to_le_bytes());
    }
    put(&mut memory, 64, &1.5f32.to_le_bytes());
    put(&mut memory, 68, &0.0f32.to_le_bytes());
    put(&mut memory, 72, &1.0f32.to_le_bytes());
    put(&mut memory, 76, &0.0f32.to_le_bytes());
    let at = |v: i32| Val::I32(v);
    // m=64 n=48 k=80 lda=64 ldb=48 ldc=64; b is used conjugate-transposed.
    let params = [
        at(16),
        at(17),
        at(32),
        at(36),
        at(40),
        at(64),
        at(1024),
        at(44),
        at(1 << 20),
        at(48),
        at(72),
        at(2 << 20),
        at(52),
    ];
    let p = read(&entry("sgemm_"), &params, &memory).expect("a real 'C' is a transpose");
    assert_eq!((p.m, p.n, p.k, p.op_b), (64, 48, 80, Op::Transposed));
    assert_eq!(p.alpha, [1.5, 0.0]);
    assert_eq!(read(&entry("cgemm_"), &params, &memory), Err(Decline::Conjugated));
    let mut bad = params;
    bad[2] = at((3 << 20) - 2);
    assert_eq!(
        read(&entry("sgemm_"), &bad, &memory),
        Err(Decline::Outside),
        "m read past the end"
    );
}

#[test]
fn a_syr2k_is_two_products_the_second_adding_to_the_first() {
    let mut memory = vec![0u8; 4 << 20];
    let put =
        |memory: &mut Vec<u8>, at: usize, bytes: &[u8]| memory[at..at + bytes.len()].copy_from_slice(bytes);
    put(&mut memory, 16, b"L");
    put(&mut memory, 17, b"n");
    // n=100 k=40 lda=100 ldb=100 ldc=100
    for (i, v) in [100i32, 40, 100, 100, 100].iter().enumerate() {
        put(&mut memory, 32 + 4 * i, &v.to_le_bytes());
    }
    put(&mut memory, 64, &(-1.0f64).to_le_bytes());
    put(&mut memory, 72, &0.0f64.to_le_bytes());
    let at = |v: i32| Val::I32(v);
    let (a, b, c) = (1 << 20, 2 << 20, 3 << 20);
    let params = [
        at(16),
        at(17),
        at(32),
        at(36),
        at(64),
        at(a),
        at(40),
        at(b),
        at(44),
        at(72),
        at(c),
        at(48),
    ];
    let [p, q] = read_syr2k(Elem::F64, &params, &memory).expect("taken");
    assert_eq!((p.m, p.n, p.k, p.part), (100, 100, 40, Part::Lower));
    assert_eq!((p.op_a, p.op_b), (Op::Plain, Op::Transposed));
    assert_eq!(
        (p.a.at, p.b.at, q.a.at, q.b.at),
        (a as u64, b as u64, b as u64, a as u64)
    );
    assert_eq!((p.alpha, q.alpha), ([-1.0, 0.0], [-1.0, 0.0]));
    assert_eq!((p.beta, q.beta), ([0.0, 0.0], [1.0, 0.0]), "the second adds");
    let mut over = params;
    over[7] = at(c + 8);
    assert_eq!(
        read_syr2k(Elem::F64, &over, &memory),
        Err(Decline::Overlap),
        "b over the result stays in the guest"
    );
}

#[test]
fn extents_past_two_to_the_64_are_outside_not_wrapped() {
    let memory = vec![0u8; 1 << 20];
    let big = i32::MAX;
    assert_eq!(
        read(
            &entry("cblas_dgemm"),
            &cblas(false, big, big, big, 0, 0, 0),
            &memory
        ),
        Err(Decline::Outside)
    );
}
