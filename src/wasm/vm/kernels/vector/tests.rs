use super::*;

fn call(kind: Level2, m: u64, n: u64) -> Vector {
    let (x_len, y_len) = if kind == Level2::GemvN { (n, m) } else { (m, n) };
    Vector {
        kind,
        elem: Elem::F64,
        alpha: 2.0,
        a: Matrix {
            at: 0,
            ld: m + 1,
            rows: m,
            cols: n,
        },
        x: Strided {
            at: 8 * 200,
            len: x_len,
            inc: 2,
        },
        y: Strided {
            at: 8 * 300,
            len: y_len,
            inc: 1,
        },
    }
}

#[test]
fn each_kernel_computes_what_blas_says() {
    let (m, n) = (5usize, 3usize);
    let a = |i: usize, j: usize| (i * 7 + j) as f64 * 0.5;
    let x = |i: usize| i as f64 - 1.0;
    let y = |i: usize| 10.0 + i as f64;
    for kind in [Level2::GemvN, Level2::GemvT, Level2::Ger] {
        let c = call(kind, m as u64, n as u64);
        let mut memory = vec![0f64; 400];
        for j in 0..n {
            for i in 0..m {
                memory[i + j * (m + 1)] = a(i, j);
            }
        }
        for i in 0..c.x.len as usize {
            memory[200 + 2 * i] = x(i);
        }
        for i in 0..c.y.len as usize {
            memory[300 + i] = y(i);
        }
        // SAFETY: every span lies inside `memory`.
        unsafe { compute(&c, Base(memory.as_mut_ptr().cast())) };
        match kind {
            Level2::GemvN => {
                for i in 0..m {
                    assert_eq!(
                        memory[300 + i],
                        y(i) + 2.0 * (0..n).map(|j| a(i, j) * x(j)).sum::<f64>()
                    );
                }
            }
            Level2::GemvT => {
                for j in 0..n {
                    assert_eq!(
                        memory[300 + j],
                        y(j) + 2.0 * (0..m).map(|i| a(i, j) * x(i)).sum::<f64>()
                    );
                }
            }
            Level2::Ger => {
                for j in 0..n {
                    for i in 0..m {
                        assert_eq!(memory[i + j * (m + 1)], a(i, j) + 2.0 * x(i) * y(j));
                    }
                }
            }
            _ => unreachable!("not among the kinds above"),
        }
    }
}

#[test]
fn symv_uses_only_its_triangle_and_computes_the_whole_product() {
    let (m, lda) = (6usize, 7usize);
    let sym = |i: usize, j: usize| ((i.min(j) * 5 + i.max(j) * 3) % 11) as f64 - 4.5;
    let x = |i: usize| 0.25 * i as f64 - 0.5;
    for (kind, incy) in [(Level2::SymvL, 1usize), (Level2::SymvU, 3)] {
        let lower = kind == Level2::SymvL;
        // The other triangle holds NaN: read, it would show in every result.
        let mut memory = vec![f64::NAN; 400];
        for j in 0..m {
            for i in 0..m {
                if (lower && i >= j) || (!lower && i <= j) {
                    memory[i + j * lda] = sym(i, j);
                }
            }
        }
        for i in 0..m {
            memory[200 + 2 * i] = x(i);
            memory[300 + i * incy] = 1.0 + i as f64;
        }
        let vector = |at: u64, inc: u64| Strided {
            at,
            len: m as u64,
            inc,
        };
        let c = Vector {
            kind,
            elem: Elem::F64,
            alpha: -1.5,
            a: Matrix {
                at: 0,
                ld: lda as u64,
                rows: m as u64,
                cols: m as u64,
            },
            x: vector(8 * 200, 2),
            y: vector(8 * 300, incy as u64),
        };
        assert_eq!(check(&c, 8 * 400), Ok(()));
        // SAFETY: every span lies inside `memory`.
        unsafe { compute(&c, Base(memory.as_mut_ptr().cast())) };
        for i in 0..m {
            let want = 1.0 + i as f64 - 1.5 * (0..m).map(|j| sym(i, j) * x(j)).sum::<f64>();
            let got = memory[300 + i * incy];
            assert!((got - want).abs() < 1e-12, "{kind:?} y[{i}] = {got}, not {want}");
        }
    }
}

#[test]
fn syr2_updates_only_its_triangle() {
    let (m, lda) = (5usize, 6usize);
    let a0 = |i: usize, j: usize| (i * 3 + j * 7) as f64 * 0.25;
    let x = |i: usize| i as f64 - 2.0;
    let y = |i: usize| 0.5 * i as f64 + 1.0;
    for kind in [Level2::Syr2L, Level2::Syr2U] {
        let mut memory = vec![0f64; 400];
        for j in 0..m {
            for i in 0..m {
                memory[i + j * lda] = a0(i, j);
            }
        }
        for i in 0..m {
            memory[200 + 3 * i] = x(i);
            memory[300 + i] = y(i);
        }
        let vector = |at: u64, inc: u64| Strided {
            at,
            len: m as u64,
            inc,
        };
        let c = Vector {
            kind,
            elem: Elem::F64,
            alpha: 2.0,
            a: Matrix {
                at: 0,
                ld: lda as u64,
                rows: m as u64,
                cols: m as u64,
            },
            x: vector(8 * 200, 3),
            y: vector(8 * 300, 1),
        };
        assert_eq!(check(&c, 8 * 400), Ok(()));
        // SAFETY: every span lies inside `memory`.
        unsafe { compute(&c, Base(memory.as_mut_ptr().cast())) };
        for j in 0..m {
            for i in 0..m {
                let held = if kind == Level2::Syr2L { i >= j } else { i <= j };
                let want = a0(i, j)
                    + if held {
                        2.0 * (x(i) * y(j) + y(i) * x(j))
                    } else {
                        0.0
                    };
                assert_eq!(memory[i + j * lda], want, "{kind:?} ({i}, {j})");
            }
        }
    }
}

#[test]
fn extents_past_two_to_the_64_are_outside_not_wrapped() {
    // Each span computed in plain 64-bit arithmetic wraps to about half a megabyte.
    let (m, lda, inc) = ((1u64 << 30) + 23171, (1u64 << 31) - 46340, (1u64 << 31) - 46339);
    let vector = |at: u64| Strided { at, len: m, inc };
    let c = Vector {
        kind: Level2::Syr2L,
        elem: Elem::F64,
        alpha: 1.0,
        a: Matrix {
            at: 0,
            ld: lda,
            rows: m,
            cols: m,
        },
        x: vector(1 << 20),
        y: vector(2 << 20),
    };
    assert_eq!(check(&c, 1 << 32), Err(Decline::Outside));
}

#[test]
fn a_written_vector_over_the_matrix_is_left_to_the_guest() {
    let mut c = call(Level2::GemvN, 50, 50);
    (c.x.at, c.y.at) = (8 * 3000, 8 * 4000);
    assert_eq!(check(&c, 1 << 20), Ok(()));
    assert_eq!(check(&c, 8 * 4000), Err(Decline::Outside));
    c.y.at = 8 * 10;
    assert_eq!(check(&c, 1 << 20), Err(Decline::Overlap));
    (c.x.at, c.y.at) = (8 * 10, 8 * 4000);
    assert_eq!(
        check(&c, 1 << 20),
        Ok(()),
        "x is only read: it may overlap the matrix"
    );
    c.y.at = 8 * 20;
    assert_eq!(
        check(&c, 1 << 20),
        Err(Decline::Overlap),
        "y is written: it may not overlap x"
    );
}
