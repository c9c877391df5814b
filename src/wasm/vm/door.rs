//! The guest's one custom import, `host.call` (docs/RUNTIME-INTERFACE.md): our side channel.
//!
//! The guest prelude sends small JSON messages through it (a final expression's repr, a
//! structured exception, a figure's PNG), so results never have to be scraped from stdout.
//! Frames of code mode's `mcp_tools` module pass through it too, to the call's
//! [`GuestServices`], and their answers come back the same way.
//! Everything arriving here is guest-controlled: sizes are capped and bounds checked, and the
//! function never traps, since a trap would end the session.

use std::sync::Arc;
use std::time::Instant;

use wasmtime::{Caller, Extern, Linker};

use super::guest_memory;
use crate::sandbox::GuestServices;

/// Largest single message (a big PNG fits; a runaway loop does not).
pub const MAX_MESSAGE: usize = 16 << 20;
/// Largest total of messages in one call.
pub const MAX_PER_CALL: usize = 64 << 20;

const OK: i32 = 0;
/// "No host is bound to the door": what the runtime's `host.tools` takes for "this run has
/// no tools" (RUNTIME-ABI, the door).
const NO_HOST: i32 = -1;
const FAULT: i32 = -2;

/// Frames of `mcp_tools` one call may send (a loop gone wrong stops here, not downstream).
const MAX_TOOL_FRAMES: usize = 1000;

/// A frame of the runtime's own tool protocol (`host.tools`, protocol 1), which begins with
/// its version; the prelude's messages begin with their fields. Tools are offered through
/// `mcp_tools` instead, so such a frame is answered "no host", and `import host.tools` says
/// the run has no tools instead of failing on an answer it cannot read.
fn is_runtime_tool_frame(message: &[u8]) -> bool {
    message.starts_with(br#"{"v""#)
}

/// A frame for the call's services: code mode's `mcp_tools` module (runtime/guest/mcp_tools.py)
/// or the prelude's HTTP client (egress).
fn is_service_frame(message: &[u8]) -> bool {
    message.starts_with(br#"{"mcp""#) || message.starts_with(br#"{"net""#)
}

/// Messages received during the current call, and the tools it may call.
#[derive(Default)]
pub struct Inbox {
    pub messages: Vec<Vec<u8>>,
    pub bytes: usize,
    pub dropped: usize,
    /// Code mode: the tools this call's code may use, and when its turn ends.
    pub tools: Option<(Arc<dyn GuestServices>, Instant)>,
    pub tool_frames: usize,
}

impl std::fmt::Debug for Inbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inbox")
            .field("messages", &self.messages.len())
            .field("bytes", &self.bytes)
            .field("dropped", &self.dropped)
            .field("tools", &self.tools.is_some())
            .finish()
    }
}

impl Inbox {
    pub fn take(&mut self) -> Inbox {
        std::mem::take(self)
    }
}

/// Where the door finds its inbox in the Store's data (a projection, as wasmtime-wasi's own
/// linker functions take), so this module depends on nothing of the Store's data type.
pub type Project<T> = for<'a> fn(&'a mut T) -> &'a mut Inbox;

pub fn add_to_linker<T: Send + 'static>(linker: &mut Linker<T>, inbox: Project<T>) -> wasmtime::Result<()> {
    linker.func_wrap_async(
        "host",
        "call",
        move |mut caller: Caller<'_, T>,
              (req_ptr, req_len, out_ptr_ptr, out_len_ptr): (i32, i32, i32, i32)| {
            Box::new(
                async move { answer(&mut caller, inbox, req_ptr, req_len, out_ptr_ptr, out_len_ptr).await },
            )
        },
    )?;
    Ok(())
}

async fn answer<T: Send>(
    caller: &mut Caller<'_, T>,
    inbox_of: Project<T>,
    req_ptr: i32,
    req_len: i32,
    out_ptr_ptr: i32,
    out_len_ptr: i32,
) -> i32 {
    let size = guest_memory::size(caller);
    let Ok(len) = u32::try_from(req_len) else {
        return FAULT;
    };
    if guest_memory::range(size, out_ptr_ptr, 4).is_none()
        || guest_memory::range(size, out_len_ptr, 4).is_none()
    {
        return FAULT;
    }
    let inbox = inbox_of(caller.data_mut());
    // Tool frames are answered, not kept, so only the size of one counts for them.
    if len as usize > MAX_MESSAGE {
        inbox.dropped += 1;
        return FAULT;
    }
    let Some(message) = guest_memory::read(caller, req_ptr, len) else {
        return FAULT;
    };
    if is_runtime_tool_frame(&message) {
        return NO_HOST;
    }
    if is_service_frame(&message) {
        let inbox = inbox_of(caller.data_mut());
        let Some((tools, deadline)) = inbox.tools.clone() else {
            return NO_HOST;
        };
        inbox.tool_frames += 1;
        if inbox.tool_frames > MAX_TOOL_FRAMES {
            return FAULT;
        }
        // The Store is not borrowed while the tool works: other host calls cannot happen
        // meanwhile (the guest waits here), and the turn's deadline still bounds it.
        let reply = tools.answer(&message, deadline).await;
        return reply_with(caller, &reply, out_ptr_ptr, out_len_ptr).await;
    }
    let inbox = inbox_of(caller.data_mut());
    if inbox.bytes + message.len() > MAX_PER_CALL {
        inbox.dropped += 1;
        return FAULT;
    }
    inbox.bytes += message.len();
    inbox.messages.push(message);
    // The reply is a fixed "ok".
    reply_with(caller, b"ok", out_ptr_ptr, out_len_ptr).await
}

/// Places `reply` in a buffer the guest allocates (and then owns), and tells it where.
async fn reply_with<T: Send>(
    caller: &mut Caller<'_, T>,
    reply: &[u8],
    out_ptr_ptr: i32,
    out_len_ptr: i32,
) -> i32 {
    let Ok(len) = i32::try_from(reply.len()) else {
        return FAULT;
    };
    let Some(Extern::Func(alloc)) = caller.get_export("host_alloc") else {
        return FAULT;
    };
    let Ok(alloc) = alloc.typed::<i32, i32>(&*caller) else {
        return FAULT;
    };
    let ptr = match alloc.call_async(&mut *caller, len.max(1)).await {
        Ok(p) if p != 0 => p,
        _ => return FAULT,
    };
    if !guest_memory::write(caller, ptr, reply)
        || !guest_memory::write_u32(caller, out_ptr_ptr, ptr as u32)
        || !guest_memory::write_u32(caller, out_len_ptr, reply.len() as u32)
    {
        return FAULT;
    }
    OK
}
