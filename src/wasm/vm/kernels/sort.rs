//! numpy's quicksort (`np.sort`'s default kind) for float64, float32, int64 and int32:
//! `quicksort_<T>(start, num)`, which every quicksort of numpy's ends in, sorts `num` keys at
//! `start` in place. The host sorts them
//! with Rust's unstable sort in numpy's order: NaNs last, `-0.0` and `0.0` equal (numpy's own
//! SIMD sorts may order those two differently from its scalar one, as the host may).

use std::cmp::Ordering;

use wasmtime::Val;

use super::shapes::{Base, Decline, Outcome};
use super::table::Keys;

impl Keys {
    fn size(self) -> u64 {
        match self {
            Keys::F64 | Keys::I64 => 8,
            Keys::F32 | Keys::I32 => 4,
        }
    }
}

/// A checked sort: `len` keys at byte address `at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sort {
    pub keys: Keys,
    pub at: u64,
    pub len: u64,
}

impl Sort {
    /// About the comparisons it makes: what fuel counts.
    pub fn work(&self) -> u64 {
        self.len.saturating_mul(u64::from(64 - self.len.leading_zeros()))
    }
}

pub fn read(keys: Keys, p: &[Val], memory: &[u8]) -> Result<Sort, Decline> {
    let [start, num] = p else {
        return Err(Decline::Invalid);
    };
    let at = u64::from(start.i32().ok_or(Decline::Invalid)? as u32);
    let len = u64::try_from(num.i32().ok_or(Decline::Invalid)?).map_err(|_| Decline::Invalid)?;
    if at.saturating_add(len.saturating_mul(keys.size())) > memory.len() as u64 {
        return Err(Decline::Outside);
    }
    if at % keys.size() != 0 {
        return Err(Decline::Misaligned);
    }
    Ok(Sort { keys, at, len })
}

/// Asked of `stop` once in this many comparisons.
const CHECK_EVERY: u32 = 1 << 16;

/// What unwinds out of a comparison when `stop` says so (no panic message: it is not a bug).
struct Stopped;

/// Sorts `call`'s keys in place, unless `stop` says so first (the keys are then some order of
/// themselves: Rust's sort keeps every key through an unwind).
///
/// # Safety
/// `call` was checked by [`read`] against the memory at `base`, which stays mapped and
/// untouched by anything else until this returns.
pub unsafe fn compute(call: &Sort, base: Base, stop: &(dyn Fn() -> bool + Sync)) -> Outcome {
    let at = unsafe { base.0.add(call.at as usize) };
    let len = call.len as usize;
    // SAFETY: inside memory and aligned (checked); nothing else refers to it meanwhile.
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe {
        match call.keys {
            Keys::F64 => sort(std::slice::from_raw_parts_mut(at.cast::<f64>(), len), stop, float),
            Keys::F32 => sort(std::slice::from_raw_parts_mut(at.cast::<f32>(), len), stop, float),
            Keys::I64 => sort(
                std::slice::from_raw_parts_mut(at.cast::<i64>(), len),
                stop,
                i64::cmp,
            ),
            Keys::I32 => sort(
                std::slice::from_raw_parts_mut(at.cast::<i32>(), len),
                stop,
                i32::cmp,
            ),
        }
    }));
    match ran {
        Ok(()) => Outcome::Done,
        Err(e) if e.is::<Stopped>() => Outcome::Stopped,
        Err(e) => std::panic::resume_unwind(e),
    }
}

fn sort<T>(keys: &mut [T], stop: &(dyn Fn() -> bool + Sync), order: impl Fn(&T, &T) -> Ordering) {
    let mut count = 0u32;
    keys.sort_unstable_by(|a, b| {
        count = count.wrapping_add(1);
        if count.is_multiple_of(CHECK_EVERY) && stop() {
            std::panic::resume_unwind(Box::new(Stopped));
        }
        order(a, b)
    });
}

/// numpy's order for floats: NaNs after everything, equal to each other.
fn float<T: PartialOrd>(a: &T, b: &T) -> Ordering {
    // Only NaN is unordered against itself.
    let is_nan = |x: &T| x.partial_cmp(x).is_none();
    match (is_nan(a), is_nan(b)) {
        (false, false) => a.partial_cmp(b).unwrap_or(Ordering::Equal),
        (false, true) => Ordering::Less,
        (true, false) => Ordering::Greater,
        (true, true) => Ordering::Equal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_sort_as_numpy_sorts_them_and_a_stop_leaves_every_key() {
        let mut keys = vec![
            3.0f64,
            f64::NAN,
            -1.0,
            f64::INFINITY,
            -0.0,
            f64::NEG_INFINITY,
            2.5,
        ];
        let call = Sort {
            keys: Keys::F64,
            at: 0,
            len: keys.len() as u64,
        };
        // SAFETY: the keys are the whole "memory".
        assert_eq!(
            unsafe { compute(&call, Base(keys.as_mut_ptr().cast()), &|| false) },
            Outcome::Done
        );
        assert_eq!(
            &keys[..6],
            &[f64::NEG_INFINITY, -1.0, -0.0, 2.5, 3.0, f64::INFINITY]
        );
        assert!(keys[6].is_nan());
        let mut many: Vec<i64> = (0..300_000).rev().collect();
        let call = Sort {
            keys: Keys::I64,
            at: 0,
            len: many.len() as u64,
        };
        // SAFETY: as above.
        let stopped = unsafe { compute(&call, Base(many.as_mut_ptr().cast()), &|| true) };
        assert_eq!(stopped, Outcome::Stopped);
        many.sort_unstable();
        assert_eq!(many, (0..300_000).collect::<Vec<_>>(), "every key is still there");
    }
}
