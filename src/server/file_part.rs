//! A file as `read_file` answers it: whole when it fits the result budget, else the part
//! from `offset` that does, with where the next part starts. Claude's clients take a tool
//! result of about 100,000 characters at most, so refusing every larger file would leave a
//! model no way to read a log or a CSV but code; a part it can page through does. A picture too
//! large to send as it is comes shrunk, like a figure, without its bytes.

use base64::Engine as _;
use rmcp::model::{CallToolResult, ContentBlock};

use super::figures::{Figure, MAX_SIDE};
use super::outputs::ReadResult;
use super::reply::{ok, size_of};
use super::{mime, resources};

/// Largest file `read_file` reads to answer with a part of it; larger ones are read in code.
pub const MAX_PAGED: u64 = 64 << 20;

/// What one read asks for.
pub struct Ask<'a> {
    pub sandbox_id: &'a str,
    /// The path relative to the workspace, as results name it.
    pub path: &'a str,
    pub offset: u64,
    pub budget: usize,
}

/// The reply for `bytes`, the whole file, within the ask's budget.
pub fn reply(ask: &Ask, bytes: &[u8]) -> CallToolResult {
    let mime = mime::guess(ask.path);
    if std::str::from_utf8(bytes).is_ok() {
        return fitted(ask, bytes, Kind::Text);
    }
    if mime::is_image(mime) && ask.offset == 0 {
        let mut shown = part_reply(ask, bytes, 0, bytes.len(), Kind::Binary);
        with_picture(&mut shown, ask, base64_of(bytes), mime);
        if size_of(&shown) <= ask.budget {
            return shown;
        }
        if let Some(r) = shrunk_picture(ask, bytes) {
            return r;
        }
    }
    fitted(ask, bytes, Kind::Binary)
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Text,
    Binary,
}

/// The longest part from the offset that fits, cut at a line's end where one is near.
fn fitted(ask: &Ask, bytes: &[u8], kind: Kind) -> CallToolResult {
    let size = bytes.len();
    let start = start_at(bytes, ask.offset as usize, kind);
    let mut end = size;
    loop {
        let r = part_reply(ask, bytes, start, end, kind);
        if size_of(&r) <= ask.budget || end == start {
            return r;
        }
        end = cut(bytes, start, start + (end - start) * 3 / 4, kind);
    }
}

/// Where a part starts: the offset, moved forward to a character's start in text.
fn start_at(bytes: &[u8], offset: usize, kind: Kind) -> usize {
    let mut at = offset.min(bytes.len());
    if kind == Kind::Text {
        while at < bytes.len() && (bytes[at] & 0xC0) == 0x80 {
            at += 1;
        }
    }
    at
}

/// A part's end at most `end`: after the last newline in its second half, else at a
/// character's start.
fn cut(bytes: &[u8], start: usize, end: usize, kind: Kind) -> usize {
    if kind == Kind::Binary {
        return end;
    }
    let half = start + (end - start) / 2;
    if let Some(nl) = bytes[half..end].iter().rposition(|&b| b == b'\n') {
        return half + nl + 1;
    }
    let mut at = end;
    while at > start && (bytes[at] & 0xC0) == 0x80 {
        at -= 1;
    }
    at
}

fn next_of(start: usize, end: usize, size: usize) -> Option<u64> {
    (end < size || (start == end && start < size)).then_some(end as u64)
}

/// What the model reads after a part that is not the whole file.
fn part_note(ask: &Ask, start: usize, end: usize, size: usize) -> String {
    if end < size {
        format!(
            "\n[read_file: bytes {start}-{end} of {size} of '{}' are above, all that fits in one result ({}); call read_file with offset={end} for what follows]\n",
            ask.path,
            if end == start {
                "none did"
            } else {
                "Claude takes about 100,000 characters"
            }
        )
    } else {
        format!(
            "\n[read_file: bytes {start}-{end} of {size} of '{}', to its end]\n",
            ask.path
        )
    }
}

/// The part `start..end` of the file: as text the model reads, or as base64 with a line
/// saying so; either way with where it lies in the file.
fn part_reply(ask: &Ask, bytes: &[u8], start: usize, end: usize, kind: Kind) -> CallToolResult {
    let size = bytes.len();
    let (content, content_base64, mut text) = match kind {
        Kind::Text => {
            let part = String::from_utf8_lossy(&bytes[start..end]).into_owned();
            (Some(part.clone()), None, part)
        }
        Kind::Binary => (
            None,
            Some(base64_of(&bytes[start..end])),
            format!(
                "'{}' is binary ({size} bytes); its bytes are in content_base64.",
                ask.path
            ),
        ),
    };
    if start > 0 || end < size {
        text.push_str(&part_note(ask, start, end, size));
    }
    ok(
        &ReadResult {
            sandbox_id: ask.sandbox_id.to_string(),
            path: ask.path.to_string(),
            size: size as u64,
            offset: start as u64,
            next_offset: next_of(start, end, size),
            content,
            content_base64,
        },
        text,
    )
}

fn base64_of(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Shows a picture as a picture, named as a resource the client can reopen.
fn with_picture(r: &mut CallToolResult, ask: &Ask, b64: String, mime: &str) {
    r.content.push(ContentBlock::image(b64, mime));
    r.content.push(ContentBlock::text(format!(
        "resource: {}",
        resources::uri(ask.sandbox_id, ask.path)
    )));
}

/// A PNG too large to send with its bytes, shown shrunk to what the budget holds.
fn shrunk_picture(ask: &Ask, bytes: &[u8]) -> Option<CallToolResult> {
    let figure = Figure::decode(bytes).ok()?;
    let text = |side: u32| {
        format!(
            "'{}' is a {} byte picture, too large for one result: it is shown below with its long side {side} px (it is {} px). Its bytes are not in this result; use the file in code (for example PIL.Image.open) to work with it.",
            ask.path,
            bytes.len(),
            figure.long_side()
        )
    };
    let mut r = ok(
        &ReadResult {
            sandbox_id: ask.sandbox_id.to_string(),
            path: ask.path.to_string(),
            size: bytes.len() as u64,
            offset: 0,
            next_offset: None,
            content: None,
            content_base64: None,
        },
        text(figure.long_side().min(MAX_SIDE)),
    );
    let room = ask.budget.saturating_sub(size_of(&r) + 1024) / 4 * 3;
    let (png, side) = figure.fit(room).ok().flatten()?;
    if let Some(ContentBlock::Text(t)) = r.content.first_mut() {
        t.text = text(side);
    }
    with_picture(&mut r, ask, base64_of(&png), "image/png");
    Some(r)
}
