//! The host buffer the shadows hand to wasmtime-wasi's own functions as their memory.
//!
//! wiggle generates each WASI function as `f(ctx, memory, args…)`, reading pointers as
//! offsets into `memory`, which need not be the guest's. The shadows copy what a call needs
//! (a path, one piece of a write) into this buffer, call the original on it, and read the
//! results back, so the guest's own memory is only ever read and written through bounds
//! checks, and a write passes in pieces that the quota can check one by one.

/// Where things go in the buffer.
pub const OUT: usize = 0;
pub const IOV: usize = 16;
pub const PATH_A: usize = 1024;
/// Longest path a shadowed call accepts (longer: ENAMETOOLONG).
pub const PATH_MAX: usize = 16 << 10;
pub const PATH_B: usize = PATH_A + PATH_MAX;
pub const DATA: usize = 64 << 10;
/// Largest piece of one write passed through at a time.
pub const CHUNK: usize = 1 << 20;
const SIZE: usize = DATA + CHUNK;

#[derive(Debug)]
pub struct Scratch(Vec<u8>);

impl Default for Scratch {
    fn default() -> Self {
        // Zeroed pages are only committed once touched.
        Scratch(vec![0; SIZE])
    }
}

impl Scratch {
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.0
    }

    /// Copies `bytes` to `at`; false when they do not fit (never for the fixed areas).
    pub fn write(&mut self, at: usize, bytes: &[u8]) -> bool {
        match self.0.get_mut(at..at.saturating_add(bytes.len())) {
            Some(dst) => {
                dst.copy_from_slice(bytes);
                true
            }
            None => false,
        }
    }

    pub fn read(&self, at: usize, len: usize) -> &[u8] {
        self.0.get(at..at.saturating_add(len)).unwrap_or(&[])
    }

    pub fn u32_at(&self, at: usize) -> u32 {
        let mut b = [0u8; 4];
        b.copy_from_slice(&self.0[at..at + 4]);
        u32::from_le_bytes(b)
    }

    pub fn u64_at(&self, at: usize) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.0[at..at + 8]);
        u64::from_le_bytes(b)
    }
}
