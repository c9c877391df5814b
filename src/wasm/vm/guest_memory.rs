//! The guest's memory as host functions see it: every pointer and length comes from the
//! guest, so every access is bounds-checked, and none can trap (a trap would end the
//! interpreter). Generic over the Store's data, so it needs nothing of the session.

use std::ops::Range;

use wasmtime::{Caller, Extern, Memory};

/// `ptr..ptr+len` (both read as unsigned 32-bit values), when it lies inside `size` bytes.
pub fn range(size: usize, ptr: i32, len: u32) -> Option<Range<usize>> {
    let start = ptr as u32 as usize;
    let end = start.checked_add(len as usize)?;
    (end <= size).then_some(start..end)
}

fn memory<T>(c: &mut Caller<'_, T>) -> Option<Memory> {
    match c.get_export("memory") {
        Some(Extern::Memory(m)) => Some(m),
        _ => None,
    }
}

/// The guest memory's current size in bytes (0 if it exports none).
pub fn size<T>(c: &mut Caller<'_, T>) -> usize {
    memory(c).map_or(0, |m| m.data_size(&*c))
}

/// A copy of `len` bytes at `ptr`.
pub fn read<T>(c: &mut Caller<'_, T>, ptr: i32, len: u32) -> Option<Vec<u8>> {
    let m = memory(c)?;
    let data = m.data(&*c);
    Some(data[range(data.len(), ptr, len)?].to_vec())
}

/// Writes `bytes` at `ptr`; false (nothing written) when they do not fit.
pub fn write<T>(c: &mut Caller<'_, T>, ptr: i32, bytes: &[u8]) -> bool {
    let Some(m) = memory(c) else { return false };
    let data = m.data_mut(&mut *c);
    match range(data.len(), ptr, bytes.len() as u32) {
        Some(r) => {
            data[r].copy_from_slice(bytes);
            true
        }
        None => false,
    }
}

pub fn write_u32<T>(c: &mut Caller<'_, T>, ptr: i32, value: u32) -> bool {
    write(c, ptr, &value.to_le_bytes())
}

#[cfg(test)]
mod tests {
    use super::range;

    #[test]
    fn ranges_stay_inside_and_never_overflow() {
        assert_eq!(range(100, 10, 20), Some(10..30));
        assert_eq!(range(100, 90, 10), Some(90..100));
        assert_eq!(range(100, 90, 11), None);
        assert_eq!(range(100, -1, 1), None, "a negative pointer is a huge address");
        assert_eq!(range(1 << 33, -1, u32::MAX), Some(0xFFFF_FFFF..0x1_FFFF_FFFE));
        assert_eq!(range(100, 0, 0), Some(0..0));
    }
}
