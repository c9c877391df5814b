//! An execution shaped into a tool result that every client accepts: at most the result
//! budget when serialized, with the end of the output, the traceback and at least one figure
//! inline, and everything that did not fit saved in the sandbox and named in the result.
//!
//! Claude Desktop refuses results over 1 MiB, the TypeScript SDK's reader closes the
//! connection at 10 MiB, and Claude Code cuts results at 25,000 tokens, so the model-facing
//! text is capped well below the byte budget: each stream at about 20,000 characters.

use std::time::Instant;

use base64::Engine as _;
use rmcp::model::{CallToolResult, ContentBlock, Resource};

use super::figures::{self, Figure, MAX_SIDE};
use super::outputs::ExecResult;
use super::reply::size_of;
use crate::sandbox::paths::{WORKSPACE, WorkspacePath};
use crate::sandbox::text_cap::{head_tail, lost_its_middle};
use crate::sandbox::{Execution, Image, PyError};

/// Characters of stdout, of stderr, of a final value and of a traceback put inline.
pub const INLINE_CHARS: usize = 20_000;
/// Characters of an exception's message put inline.
const INLINE_VALUE_CHARS: usize = 2_000;
/// Bytes kept back for the JSON-RPC envelope, links and notes added after measuring.
const RESERVE: usize = 16 << 10;
/// Longest a result's figures are decoded and shrunk; figures still undecoded then are saved
/// as files, not shown, so a call of 50 large figures costs seconds of server CPU, not minutes.
const DECODE_TIME: std::time::Duration = std::time::Duration::from_secs(5);
/// Folder in the workspace that holds what did not fit.
pub const OVERFLOW_DIR: &str = ".outputs";

/// Where the parts that did not fit go.
pub enum Keep {
    /// Saved under this folder of the sandbox.
    In {
        sandbox_id: String,
        folder: WorkspacePath,
    },
    /// The sandbox is gone after the call (create_run_close): nothing can be kept.
    Nowhere,
}

/// A file to save in the sandbox for the result to point at.
pub struct Overflow {
    pub path: WorkspacePath,
    pub bytes: Vec<u8>,
    pub mime: &'static str,
}

/// A figure as it came from the backend. It is decoded only when it must be resized (its
/// header says it is larger than [`MAX_SIDE`], or it does not fit as it is), then once, and
/// only its PNG at the usual size is kept: one full-size picture is in memory at a time.
pub struct RawFigure {
    pub image: Image,
    /// The long side its PNG header gives, when it has one.
    header_side: Option<u32>,
    usual: std::sync::OnceLock<Option<Vec<u8>>>,
}

impl RawFigure {
    pub fn new(image: Image) -> RawFigure {
        let header_side = figures::png_long_side(&image.data);
        RawFigure {
            image,
            header_side,
            usual: std::sync::OnceLock::new(),
        }
    }

    /// The figure re-encoded at its usual size, or `None` when it cannot be decoded within
    /// the bounds; CPU work, so callers run it off the async threads.
    fn usual(&self, until: Instant) -> Option<&[u8]> {
        if self.usual.get().is_none() && Instant::now() > until {
            return None;
        }
        self.usual
            .get_or_init(|| {
                let f = Figure::decode(&self.image.data).ok()?;
                f.encode(MAX_SIDE).ok()
            })
            .as_deref()
    }

    /// The usual-size figure decoded again (at most [`MAX_SIDE`] a side: cheap) to be shrunk.
    fn shrinkable(&self, until: Instant) -> Option<Figure> {
        Figure::decode(self.usual(until)?).ok()
    }

    /// The PNG as the guest drew it, when it can be shown unchanged: a PNG no larger than
    /// figures are shown, within `room`.
    fn as_drawn(&self, fits: impl Fn(&[u8]) -> bool) -> Option<Vec<u8>> {
        (self.header_side.is_some_and(|s| s <= MAX_SIDE) && fits(&self.image.data))
            .then(|| self.image.data.clone())
    }

    /// The PNG shown for this figure within `room`, and whether it is smaller than usual. The
    /// first figure always comes inline, shrunk if need be; the others at their usual size
    /// or not at all.
    fn shown(&self, room: usize, first: bool, until: Instant) -> Option<(Vec<u8>, bool)> {
        let fits = |png: &[u8]| b64_len(png.len()) + 64 <= room;
        if let Some(png) = self.as_drawn(fits) {
            return Some((png, false));
        }
        if first {
            let f = self.shrinkable(until)?;
            let usual = f.long_side();
            let (png, side) = f.fit(room.saturating_sub(64) / 4 * 3).ok().flatten()?;
            return Some((png, side < usual));
        }
        self.usual(until)
            .filter(|png| fits(png))
            .map(|png| (png.to_vec(), false))
    }
}

pub struct Shaped {
    pub result: CallToolResult,
    pub overflow: Vec<Overflow>,
}

fn b64_len(n: usize) -> usize {
    n.div_ceil(3) * 4
}

/// The text the model reads: output first, then the value, the error and the notes.
pub fn exec_text(res: &ExecResult) -> String {
    let mut t = String::new();
    let block = |t: &mut String, s: &str| {
        t.push_str(s);
        if !s.ends_with('\n') {
            t.push('\n');
        }
    };
    if !res.stdout.is_empty() {
        block(&mut t, &res.stdout);
    }
    // A traceback is written to stderr too; show it once.
    let stderr_is_traceback = res
        .error
        .as_ref()
        .is_some_and(|e| !e.traceback.is_empty() && res.stderr.trim_end().ends_with(e.traceback.trim_end()));
    let stderr = if stderr_is_traceback {
        let tb = res.error.as_ref().map_or("", |e| e.traceback.trim_end());
        res.stderr.trim_end().strip_suffix(tb).unwrap_or("")
    } else {
        &res.stderr
    };
    if !stderr.trim().is_empty() {
        t.push_str("[stderr]\n");
        block(&mut t, stderr);
    }
    if let Some(r) = &res.result {
        block(&mut t, &format!("Out: {r}"));
    }
    if let Some(e) = &res.error {
        if e.traceback.is_empty() {
            t.push_str(&format!("{}: {}\n", e.name, e.value));
        } else {
            block(&mut t, &e.traceback);
        }
    }
    if let Some(l) = &res.limit {
        t.push_str(&format!("[limit reached: {}]\n", l.as_str()));
    }
    for n in &res.notes {
        t.push_str(&format!("[note] {n}\n"));
    }
    if res.images > 0 {
        t.push_str(&format!("[{} image(s) attached]\n", res.images));
    }
    if t.is_empty() {
        t.push_str("(no output)\n");
    }
    t
}

/// Shapes an execution within `budget` bytes. Deterministic CPU work: run it off the async
/// threads when figures are attached.
pub fn shape(
    sandbox_id: String,
    ex: Execution,
    figures: Vec<RawFigure>,
    notes: Vec<String>,
    keep: &Keep,
    budget: usize,
) -> Shaped {
    // Caps shrink only if a pathological result (say, text that is all escapes) still does
    // not fit at the usual ones.
    let until = Instant::now() + DECODE_TIME;
    let mut last = None;
    for chars in [INLINE_CHARS, 8_000, 2_000, 500] {
        let shaped = shape_with(&sandbox_id, &ex, &figures, &notes, keep, (budget, chars), until);
        if size_of(&shaped.result) <= budget {
            return shaped;
        }
        last = Some(shaped);
    }
    let mut shaped =
        last.unwrap_or_else(|| shape_with(&sandbox_id, &ex, &figures, &notes, keep, (budget, 500), until));
    // Nothing is left to cut but the figures.
    shaped.result.content.retain(|c| c.as_image().is_none());
    shaped
}

struct Spill<'a> {
    keep: &'a Keep,
    files: Vec<Overflow>,
}

impl Spill<'_> {
    /// Saves bytes under `name`, returning the guest path to name in the result.
    fn save(&mut self, name: &str, bytes: Vec<u8>, mime: &'static str) -> Option<String> {
        let Keep::In { folder, .. } = self.keep else {
            return None;
        };
        let path = folder.join(name);
        let shown = format!("{WORKSPACE}/{}", path.relative());
        self.files.push(Overflow { path, bytes, mime });
        Some(shown)
    }
}

fn cap_stream(text: &str, name: &str, chars: usize, spill: &mut Spill) -> String {
    let saved = text.chars().count() > chars;
    let path = if saved {
        spill.save(&format!("{name}.txt"), text.as_bytes().to_vec(), "text/plain")
    } else {
        None
    };
    let kept = if lost_its_middle(text) {
        "what was kept of it (its first and last part)"
    } else {
        "all of it"
    };
    head_tail(text, chars, |n| match &path {
        Some(p) => format!("[... {n} characters of {name} omitted here; {kept} is in {p} (read it with read_file, or open it in code) ...]"),
        None => format!("[... {n} characters of {name} omitted ...]"),
    })
    .unwrap_or_else(|| text.to_string())
}

fn shape_with(
    sandbox_id: &str,
    ex: &Execution,
    figures: &[RawFigure],
    notes: &[String],
    keep: &Keep,
    (budget, chars): (usize, usize),
    until: Instant,
) -> Shaped {
    let mut spill = Spill {
        keep,
        files: Vec::new(),
    };
    let mut res = text_part(sandbox_id, ex, notes, &mut spill, (budget, chars));
    // Figures get what the text leaves, less room for the links and the note about them.
    let base = size_of(&build(&res, Vec::new()));
    let room = budget.saturating_sub(base + RESERVE + 400 * figures.len());
    let inline = place_figures(figures, room, until, &mut spill, &mut res);
    if matches!(keep, Keep::Nowhere)
        && (res.stdout.len() < ex.stdout.len() || res.stderr.len() < ex.stderr.len())
    {
        res.notes.push("Output was cut to fit the result; this sandbox is closed after the call, so the rest was not kept. Run the code with execute_code to get all of it as a file.".into());
    }
    res.images = inline.len();
    let mut content: Vec<ContentBlock> = inline
        .into_iter()
        .map(|png| ContentBlock::image(base64::engine::general_purpose::STANDARD.encode(png), "image/png"))
        .collect();
    content.extend(links_to(keep, &spill.files));
    Shaped {
        result: build(&res, content),
        overflow: spill.files,
    }
}

/// The result's text and fields, each stream capped at `chars` (the rest spilled to files).
fn text_part(
    sandbox_id: &str,
    ex: &Execution,
    notes: &[String],
    spill: &mut Spill,
    (budget, chars): (usize, usize),
) -> ExecResult {
    let stdout = cap_stream(&ex.stdout, "stdout", chars, spill);
    let stderr = cap_stream(&ex.stderr, "stderr", chars, spill);
    let result = ex.result.as_ref().map(|r| cap_stream(r, "result", chars, spill));
    let error = ex.error.as_ref().map(|e| PyError {
        name: e.name.chars().take(200).collect(),
        value: head_tail(&e.value, INLINE_VALUE_CHARS, |n| {
            format!("[... {n} characters omitted ...]")
        })
        .unwrap_or_else(|| e.value.clone()),
        traceback: head_tail(&e.traceback, chars, |n| {
            format!("[... {n} characters of the traceback omitted ...]")
        })
        .unwrap_or_else(|| e.traceback.clone()),
    });
    ExecResult {
        sandbox_id: sandbox_id.to_string(),
        stdout,
        stderr,
        result,
        table: ex
            .table
            .clone()
            .map(|t| t.fitted(budget / 4))
            .and_then(|t| t.named_in(sandbox_id)),
        error,
        images: 0,
        duration_ms: ex.duration_ms,
        limit: ex.limit,
        state_lost: ex.state_lost,
        notes: notes.iter().chain(&ex.notes).cloned().collect(),
        saved_files: spill
            .files
            .iter()
            .map(|f| format!("{WORKSPACE}/{}", f.path.relative()))
            .collect(),
        run_id: None,
        state: None,
        started_at: None,
        tool_calls: ex.tool_calls.clone(),
        network: ex.network.clone(),
    }
}

/// The figures shown inline within `room` (the first always, shrunk if need be); the others
/// saved as files, and the result's notes and saved files saying which.
fn place_figures(
    figures: &[RawFigure],
    mut room: usize,
    until: Instant,
    spill: &mut Spill,
    res: &mut ExecResult,
) -> Vec<Vec<u8>> {
    let mut inline: Vec<Vec<u8>> = Vec::new();
    let mut saved = Vec::new();
    for (k, fig) in figures.iter().enumerate() {
        let name = format!("figure-{}.png", k + 1);
        let Some((png, shrunk)) = fig.shown(room, inline.is_empty(), until) else {
            saved.push((k + 1, spill.save(&name, fig.image.data.clone(), "image/png")));
            continue;
        };
        room = room.saturating_sub(b64_len(png.len()) + 64);
        // The inline copy is smaller than usual to fit: keep the figure itself too.
        if shrunk && let Some(p) = spill.save(&name, fig.image.data.clone(), "image/png") {
            res.saved_files.push(p.clone());
            res.notes.push(format!(
                "Figure {} was shrunk to fit this result; the full-size PNG is {p}",
                k + 1
            ));
        }
        inline.push(png);
    }
    if saved.is_empty() {
        return inline;
    }
    let n = saved.len();
    let paths: Vec<String> = saved.iter().filter_map(|(_, p)| p.clone()).collect();
    res.saved_files.extend(paths.iter().cloned());
    let which: Vec<String> = saved.iter().map(|(k, _)| k.to_string()).collect();
    res.notes.push(if paths.is_empty() {
        format!(
            "{n} of {} figures (number {}) did not fit in this result and were not kept, because this sandbox is closed after the call; draw them in a sandbox of your own (execute_code) to get them as files",
            figures.len(),
            which.join(", ")
        )
    } else {
        format!(
            "{n} of {} figures (number {}) did not fit in this result; they are saved as PNG files: {} (read_file shows one as an image)",
            figures.len(),
            which.join(", "),
            paths.join(", ")
        )
    });
    inline
}

/// A resource link for each file saved in the sandbox, so a client can open it.
fn links_to(keep: &Keep, files: &[Overflow]) -> Vec<ContentBlock> {
    let Keep::In { sandbox_id, .. } = keep else {
        return Vec::new();
    };
    files
        .iter()
        .map(|f| {
            let name = f.path.file_name().unwrap_or_default().to_string();
            ContentBlock::resource_link(
                Resource::new(super::resources::uri(sandbox_id, &f.path.relative()), name)
                    .with_mime_type(f.mime)
                    .with_size(f.bytes.len() as u64),
            )
        })
        .collect()
}

/// The result: the text first, then images and links; structured content always.
fn build(res: &ExecResult, extra: Vec<ContentBlock>) -> CallToolResult {
    let mut content = vec![ContentBlock::text(exec_text(res))];
    content.extend(extra);
    let mut r = if res.error.is_some() || res.limit.is_some() {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    r.structured_content = serde_json::to_value(res).ok();
    r
}
