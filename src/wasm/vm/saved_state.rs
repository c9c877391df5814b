//! An interpreter's state between turns, as plain data: the pages of linear memory that differ
//! from the image it started from, its mutable globals, and its clock. Enough to start another
//! interpreter from the same image in the same state (a fork, a restored checkpoint).
//!
//! On disk it is a magic line, a JSON header and the changed pages, deflated in segments of
//! their own (the pages of each 256 KiB of memory): a small change alters one segment's
//! bytes and leaves the others' as they were, so a copy kept elsewhere in content-defined
//! chunks (a team's store) is sent only what changed. Nothing in it is trusted when read
//! back: sizes are checked against the header and the header against the image, so a
//! damaged or foreign file is refused, never half-applied.

use std::io::{Read, Write};

use serde::{Deserialize, Serialize};

/// Granularity of the comparison with the image: the host's page size (refcount writes dirty
/// a few bytes here and there; 64 KiB wasm pages would carry far more unchanged bytes).
pub const PAGE: usize = 4 << 10;
/// One deflate stream for all pages (states written before segments).
const MAGIC: &[u8] = b"MCSSTATE1\n";
/// Deflated segments, each its length then its bytes.
const MAGIC_SEGMENTED: &[u8] = b"MCSSTATE2\n";
/// Pages of memory per segment.
const SEGMENT_PAGES: u32 = 64;
/// Largest header accepted when reading (a few thousand page numbers).
const MAX_HEADER: usize = 16 << 20;
/// Largest guest clock accepted when reading: a century of running, far below where the
/// guest's own arithmetic on it would overflow.
const MAX_CLOCK_NS: u64 = 100 * 365 * 86_400 * 1_000_000_000;

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub enum GlobalValue {
    I32(i32),
    I64(i64),
    F32(u32),
    F64(u64),
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Header {
    /// Which image the pages are relative to; a state is only applied to the same one.
    pub image: String,
    pub memory_bytes: u64,
    /// The guest's monotonic clock when the state was taken.
    pub clock_ns: u64,
    pub globals: Vec<(String, GlobalValue)>,
    /// Indices of the pages stored, in order.
    pub pages: Vec<u32>,
    /// Whose state it is (a sandbox, or one of its checkpoints): a state file copied from
    /// elsewhere is refused, not restored into the wrong sandbox. States written before this
    /// field have none and are accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

/// A state in memory: the header and the stored pages, back to back.
#[derive(Clone)]
pub struct SavedState {
    pub header: Header,
    pub data: Vec<u8>,
}

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("the saved state is damaged or incomplete ({0})")]
    Damaged(String),
    #[error("the saved state belongs to another image of the interpreter")]
    OtherImage,
    #[error("the saved state belongs to {found}, not to {expected}")]
    OtherOwner { expected: String, found: String },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl SavedState {
    /// The pages of `memory` that differ from `base` (pages past its end that are all zero
    /// match a freshly grown memory and are left out too).
    pub fn diff(
        image: &str,
        memory: &[u8],
        base: &[u8],
        clock_ns: u64,
        globals: Vec<(String, GlobalValue)>,
    ) -> Self {
        let mut pages = Vec::new();
        let mut data = Vec::new();
        for (i, page) in memory.chunks(PAGE).enumerate() {
            let start = i * PAGE;
            let same = match base.get(start..start + page.len()) {
                Some(b) => b == page,
                None => page.iter().all(|&x| x == 0),
            };
            if !same {
                pages.push(i as u32);
                data.extend_from_slice(page);
            }
        }
        SavedState {
            header: Header {
                image: image.to_string(),
                memory_bytes: memory.len() as u64,
                clock_ns,
                globals,
                pages,
                owner: None,
            },
            data,
        }
    }

    /// The same state, bound to `owner` (see [`Header::owner`]).
    pub fn owned_by(mut self, owner: String) -> Self {
        self.header.owner = Some(owner);
        self
    }

    /// Each stored page with its byte offset in memory.
    pub fn pages(&self) -> impl Iterator<Item = (usize, &[u8])> {
        self.header
            .pages
            .iter()
            .zip(self.data.chunks(PAGE))
            .map(|(&i, page)| (i as usize * PAGE, page))
    }

    pub fn write_to(&self, out: &mut impl Write) -> Result<(), StateError> {
        let header = serde_json::to_vec(&self.header).map_err(|e| StateError::Damaged(e.to_string()))?;
        out.write_all(MAGIC_SEGMENTED)?;
        out.write_all(&(header.len() as u64).to_le_bytes())?;
        out.write_all(&header)?;
        let mut pages = self.header.pages.iter().zip(self.data.chunks(PAGE)).peekable();
        while let Some(&(&first, _)) = pages.peek() {
            let segment = first / SEGMENT_PAGES;
            let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
            while let Some((_, page)) = pages.next_if(|(i, _)| **i / SEGMENT_PAGES == segment) {
                z.write_all(page)?;
            }
            let bytes = z.finish()?;
            out.write_all(&(bytes.len() as u64).to_le_bytes())?;
            out.write_all(&bytes)?;
        }
        Ok(())
    }

    /// Writes the state to a new file at `path` and syncs it; its size. The caller renames it
    /// into place, so no reader ever sees a partial state.
    pub fn write_file(&self, path: &std::path::Path) -> Result<u64, StateError> {
        let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
        self.write_to(&mut f)?;
        f.flush()?;
        let f = f.into_inner().map_err(|e| e.into_error())?;
        f.sync_all()?;
        Ok(f.metadata()?.len())
    }

    /// Reads a state written by [`Self::write_file`], for one of the images `known` accepts.
    pub fn read_file(path: &std::path::Path, known: impl Fn(&str) -> bool) -> Result<Self, StateError> {
        Self::read_from(&mut std::io::BufReader::new(std::fs::File::open(path)?), known)
    }

    /// Refuses a state bound to an owner other than `expected`.
    pub fn check_owner(&self, expected: &str) -> Result<(), StateError> {
        match &self.header.owner {
            Some(found) if found != expected => Err(StateError::OtherOwner {
                expected: expected.to_string(),
                found: found.clone(),
            }),
            _ => Ok(()),
        }
    }

    /// The image a state file belongs to, from its header alone: resuming it waits for that
    /// image only.
    pub fn image_of(path: &std::path::Path) -> Result<String, StateError> {
        let mut input = std::io::BufReader::new(std::fs::File::open(path)?);
        Ok(Self::read_header(&mut input)?.0.image)
    }

    /// The header, and whether the pages are in segments.
    fn read_header(input: &mut impl Read) -> Result<(Header, bool), StateError> {
        let damaged = |why: &str| StateError::Damaged(why.to_string());
        let mut magic = [0u8; MAGIC.len()];
        input.read_exact(&mut magic).map_err(|_| damaged("no header"))?;
        let segmented = match &magic[..] {
            m if m == MAGIC_SEGMENTED => true,
            m if m == MAGIC => false,
            _ => return Err(damaged("not a saved state")),
        };
        let mut len = [0u8; 8];
        input
            .read_exact(&mut len)
            .map_err(|_| damaged("truncated header"))?;
        let len = usize::try_from(u64::from_le_bytes(len)).unwrap_or(usize::MAX);
        if len > MAX_HEADER {
            return Err(damaged("header too large"));
        }
        let mut raw = vec![0u8; len];
        input
            .read_exact(&mut raw)
            .map_err(|_| damaged("truncated header"))?;
        let header = serde_json::from_slice(&raw).map_err(|e| StateError::Damaged(e.to_string()))?;
        Ok((header, segmented))
    }

    pub fn read_from(input: &mut impl Read, known: impl Fn(&str) -> bool) -> Result<Self, StateError> {
        let damaged = |why: &str| StateError::Damaged(why.to_string());
        let (header, segmented) = Self::read_header(input)?;
        if !known(&header.image) {
            return Err(StateError::OtherImage);
        }
        let pages_in_memory = header.memory_bytes.div_ceil(PAGE as u64);
        if header.memory_bytes > super::WASM32_MAX_BYTES
            || header.pages.iter().any(|&p| u64::from(p) >= pages_in_memory)
            || !header.pages.windows(2).all(|w| w[0] < w[1])
        {
            return Err(damaged("page list does not fit the memory size"));
        }
        if header.clock_ns > MAX_CLOCK_NS {
            return Err(damaged("its clock is out of range"));
        }
        let expected = header.pages.len() * PAGE;
        let mut data = Vec::with_capacity(expected);
        if segmented {
            read_segments(input, expected, &mut data)?;
        } else {
            inflate(input, expected, &mut data)?;
        }
        if data.len() != expected {
            return Err(damaged("page data is truncated"));
        }
        Ok(SavedState { header, data })
    }
}

/// Inflates one deflate stream of `input` onto `data`, at most to `expected` bytes (and one
/// more, so that too much is seen).
fn inflate(input: &mut impl Read, expected: usize, data: &mut Vec<u8>) -> Result<(), StateError> {
    let left = (expected + 1).saturating_sub(data.len()) as u64;
    flate2::read::DeflateDecoder::new(input)
        .take(left)
        .read_to_end(data)
        .map_err(|e| StateError::Damaged(e.to_string()))?;
    Ok(())
}

/// Each segment: its length, then its deflated pages; until `expected` bytes are read.
fn read_segments(input: &mut impl Read, expected: usize, data: &mut Vec<u8>) -> Result<(), StateError> {
    while data.len() < expected {
        let mut len = [0u8; 8];
        input
            .read_exact(&mut len)
            .map_err(|_| StateError::Damaged("a segment is missing".into()))?;
        let len = u64::from_le_bytes(len);
        let before = data.len();
        inflate(&mut input.take(len), expected, data)?;
        if data.len() == before {
            return Err(StateError::Damaged("an empty segment".into()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_only_changed_pages_and_refuses_damage() {
        let base = vec![1u8; 3 * PAGE];
        let mut mem = base.clone();
        mem[PAGE + 5] = 9;
        mem.extend(vec![0u8; PAGE]); // grown, still zero
        mem.extend(vec![7u8; PAGE]); // grown and written
        let s = SavedState::diff("img", &mem, &base, 42, vec![("g".into(), GlobalValue::I32(3))]);
        assert_eq!(s.header.pages, [1, 4]);
        let mut buf = Vec::new();
        s.write_to(&mut buf).unwrap();
        assert!(buf.len() < 4 * 1024, "deflated: {}", buf.len());
        let back = SavedState::read_from(&mut buf.as_slice(), |i| i == "img").unwrap();
        assert_eq!(back.header.pages, [1, 4]);
        assert_eq!(back.data, s.data);
        assert!(matches!(
            SavedState::read_from(&mut buf.as_slice(), |i| i == "other"),
            Err(StateError::OtherImage)
        ));
        let cut = &buf[..buf.len() - 8];
        assert!(matches!(
            SavedState::read_from(&mut &cut[..], |i| i == "img"),
            Err(StateError::Damaged(_))
        ));
        assert!(SavedState::read_from(&mut &b"garbage"[..], |i| i == "img").is_err());
    }

    /// A change to one page alters one segment's bytes: the rest of the file is as it was
    /// (shifted at most), which is what lets a content-defined copy send only the change.
    #[test]
    fn a_small_change_alters_one_segment_and_old_single_stream_states_still_read() {
        let base = vec![0u8; 1024 * PAGE];
        let mut mem: Vec<u8> = (0..base.len()).map(|i| (i * 7 % 251) as u8).collect();
        let one = SavedState::diff("img", &mem, &base, 1, vec![]);
        mem[500 * PAGE + 3] ^= 0xff;
        let two = SavedState::diff("img", &mem, &base, 1, vec![]);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        one.write_to(&mut a).unwrap();
        two.write_to(&mut b).unwrap();
        let head = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
        let tail = a
            .iter()
            .rev()
            .zip(b.iter().rev())
            .take_while(|(x, y)| x == y)
            .count();
        let differ = b.len().saturating_sub(head + tail);
        // 16 segments: one of them differs.
        assert!(
            differ < b.len() / 12,
            "one segment differs: {differ} bytes of {}",
            b.len()
        );
        let back = SavedState::read_from(&mut b.as_slice(), |i| i == "img").unwrap();
        assert_eq!(back.data, two.data);
        // The single-stream format of earlier versions.
        let header = serde_json::to_vec(&one.header).unwrap();
        let mut old = MAGIC.to_vec();
        old.extend((header.len() as u64).to_le_bytes());
        old.extend(header);
        let mut z = flate2::write::DeflateEncoder::new(old, flate2::Compression::fast());
        z.write_all(&one.data).unwrap();
        let old = z.finish().unwrap();
        let back = SavedState::read_from(&mut old.as_slice(), |i| i == "img").unwrap();
        assert_eq!(back.data, one.data);
    }
}
