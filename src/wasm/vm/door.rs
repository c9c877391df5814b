//! The guest's one custom import, `host.call` (docs/RUNTIME-INTERFACE.md): our side channel.
//!
//! The guest prelude sends small JSON messages through it (a final expression's repr, a
//! structured exception, a figure's PNG), so results never have to be scraped from stdout.
//! Everything arriving here is guest-controlled: sizes are capped and bounds checked, and the
//! function never traps, since a trap would end the session.

use wasmtime::{Caller, Extern, Linker};

use super::guest_memory;

/// Largest single message (a big PNG fits; a runaway loop does not).
pub const MAX_MESSAGE: usize = 16 << 20;
/// Largest total of messages in one call.
pub const MAX_PER_CALL: usize = 64 << 20;

const OK: i32 = 0;
/// "No host is bound to the door": what the runtime's `host.tools` takes for "this run has
/// no tools" (RUNTIME-ABI, the door).
const NO_HOST: i32 = -1;
const FAULT: i32 = -2;

/// A frame of the runtime's tool protocol (`host.tools`, protocol 1), which begins with its
/// version; the prelude's own messages begin with their fields. No tools are offered yet, so
/// such a frame is answered "no host", and `import host.tools` says the run has no tools
/// instead of failing on an answer it cannot read.
fn is_tool_frame(message: &[u8]) -> bool {
    message.starts_with(br#"{"v""#)
}

/// Messages received during the current call.
#[derive(Debug, Default)]
pub struct Inbox {
    pub messages: Vec<Vec<u8>>,
    pub bytes: usize,
    pub dropped: usize,
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
    if len as usize > MAX_MESSAGE || inbox.bytes + len as usize > MAX_PER_CALL {
        inbox.dropped += 1;
        return FAULT;
    }
    let Some(message) = guest_memory::read(caller, req_ptr, len) else {
        return FAULT;
    };
    if is_tool_frame(&message) {
        return NO_HOST;
    }
    {
        let inbox = inbox_of(caller.data_mut());
        inbox.bytes += message.len();
        inbox.messages.push(message);
    }
    // The reply is a fixed "ok": the guest owns the buffer it allocates for it.
    let reply = b"ok";
    let Some(Extern::Func(alloc)) = caller.get_export("host_alloc") else {
        return FAULT;
    };
    let Ok(alloc) = alloc.typed::<i32, i32>(&*caller) else {
        return FAULT;
    };
    let ptr = match alloc.call_async(&mut *caller, reply.len() as i32).await {
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
