//! `fd_readdir` served from the host twin of a directory, in linear time.
//!
//! wasmtime-wasi re-reads the whole directory, and stats every entry, on each `fd_readdir`
//! call, while wasi-libc reads a directory a few kilobytes per call: listing a folder of n
//! files costs O(n²) system calls (4,000 files took 4-7 s). Here the listing is read once,
//! when a read starts at cookie 0, and kept for the calls that continue it.

use std::collections::VecDeque;
use std::sync::Arc;

use cap_std::fs::{Dir, FileType};

/// One directory entry as WASI describes it.
pub struct Entry {
    name: Vec<u8>,
    ino: u64,
    kind: u8,
}

/// Listings being read, by descriptor; a few at once (os.walk nests them).
#[derive(Default)]
pub struct Listings(VecDeque<(u32, Arc<Vec<Entry>>)>);

const KEPT: usize = 4;
/// WASI `dirent`: d_next u64, d_ino u64, d_namlen u32, d_type u8, padding to 24.
const DIRENT: usize = 24;

impl Listings {
    /// The listing of `dir` (descriptor `fd`): read afresh when a read starts over.
    pub fn get(&mut self, fd: u32, dir: &Dir, cookie: u64) -> std::io::Result<Arc<Vec<Entry>>> {
        if cookie != 0
            && let Some((_, kept)) = self.0.iter().find(|(f, _)| *f == fd)
        {
            return Ok(kept.clone());
        }
        let fresh = Arc::new(read(dir)?);
        self.forget(fd);
        if self.0.len() >= KEPT {
            self.0.pop_front();
        }
        self.0.push_back((fd, fresh.clone()));
        Ok(fresh)
    }

    pub fn forget(&mut self, fd: u32) {
        self.0.retain(|(f, _)| *f != fd);
    }
}

#[cfg(unix)]
fn ino_of(md: &cap_std::fs::Metadata) -> u64 {
    use cap_std::fs::MetadataExt;
    md.ino()
}

#[cfg(not(unix))]
fn ino_of(_md: &cap_std::fs::Metadata) -> u64 {
    0
}

/// WASI `filetype` of `ft`.
fn kind(ft: FileType) -> u8 {
    #[cfg(unix)]
    {
        use cap_std::fs::FileTypeExt;
        if ft.is_block_device() {
            return 1;
        }
        if ft.is_char_device() {
            return 2;
        }
        if ft.is_socket() {
            return 6;
        }
    }
    if ft.is_dir() {
        3
    } else if ft.is_file() {
        4
    } else if ft.is_symlink() {
        7
    } else {
        0
    }
}

#[cfg(unix)]
fn name_bytes(name: std::ffi::OsString) -> Vec<u8> {
    use std::os::unix::ffi::OsStringExt;
    name.into_vec()
}

#[cfg(not(unix))]
fn name_bytes(name: std::ffi::OsString) -> Vec<u8> {
    name.to_string_lossy().into_owned().into_bytes()
}

/// `.`, `..`, then the entries, as wasmtime-wasi lists them.
fn read(dir: &Dir) -> std::io::Result<Vec<Entry>> {
    let here = ino_of(&dir.dir_metadata()?);
    let mut out = vec![
        Entry {
            name: b".".to_vec(),
            ino: here,
            kind: 3,
        },
        Entry {
            name: b"..".to_vec(),
            ino: here,
            kind: 3,
        },
    ];
    for entry in dir.entries()? {
        let entry = entry?;
        let ino = {
            #[cfg(unix)]
            {
                use std::os::unix::fs::DirEntryExt;
                entry.ino()
            }
            #[cfg(not(unix))]
            {
                0
            }
        };
        out.push(Entry {
            kind: entry.file_type().map(kind).unwrap_or(0),
            name: name_bytes(entry.file_name()),
            ino,
        });
    }
    Ok(out)
}

/// The bytes `fd_readdir` returns for `entries` from `cookie`, at most `cap` of them: whole
/// entries, the last one cut at the end of the buffer (the caller then reads on from it).
pub fn encode(entries: &[Entry], cookie: u64, cap: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(cap.min(64 << 10));
    let start = usize::try_from(cookie).unwrap_or(usize::MAX);
    for (i, e) in entries.iter().enumerate().skip(start) {
        let mut head = [0u8; DIRENT];
        head[0..8].copy_from_slice(&(i as u64 + 1).to_le_bytes());
        head[8..16].copy_from_slice(&e.ino.to_le_bytes());
        head[16..20].copy_from_slice(&(e.name.len() as u32).to_le_bytes());
        head[20] = e.kind;
        for part in [&head[..], &e.name[..]] {
            let room = cap - out.len();
            out.extend_from_slice(&part[..part.len().min(room)]);
            if out.len() == cap {
                return out;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str) -> Entry {
        Entry {
            name: name.as_bytes().to_vec(),
            ino: 7,
            kind: 4,
        }
    }

    #[test]
    fn entries_follow_each_other_and_the_buffer_end_cuts_the_last() {
        let list = vec![entry("."), entry(".."), entry("data.csv")];
        let all = encode(&list, 0, 4096);
        assert_eq!(all.len(), 3 * DIRENT + 1 + 2 + 8);
        // The third entry starts after the first two; its d_next is 3 and its name follows.
        let third = DIRENT + 1 + DIRENT + 2;
        assert_eq!(u64::from_le_bytes(all[third..third + 8].try_into().unwrap()), 3);
        assert_eq!(&all[third + DIRENT..], b"data.csv");
        // Reading on from cookie 2 gives just that entry.
        assert_eq!(encode(&list, 2, 4096), all[third..].to_vec());
        // A small buffer is filled exactly: the caller sees it full and reads on.
        assert_eq!(encode(&list, 0, 30).len(), 30);
        assert!(encode(&list, 3, 4096).is_empty(), "past the end");
        assert!(encode(&list, u64::MAX, 4096).is_empty());
    }
}
