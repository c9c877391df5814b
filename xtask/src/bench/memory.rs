//! Fifty sandboxes, each with numpy imported: what the server's resident memory grows by per
//! sandbox, beside the guest's own linear memory.

use std::path::Path;

use serde_json::json;

use super::harness::{call, new_sandbox, rss_bytes, serve};

/// The note under the table, when the kernel reports resident memory.
pub async fn note(bin: &Path, home: &Path, guest_numpy_bytes: u64) -> anyhow::Result<Option<String>> {
    eprintln!("bench: 50 sandboxes, each with numpy imported");
    let (c, pid) = serve(bin, home, &[("CODE_SANDBOX_MAX_SANDBOXES", "64")]).await?;
    let warm = new_sandbox(&c).await?;
    call(
        &c,
        "execute_code",
        json!({"sandbox_id": warm, "code": "import numpy"}),
    )
    .await?;
    let before = pid.and_then(rss_bytes);
    let mut ids = Vec::new();
    for _ in 0..50 {
        let sid = new_sandbox(&c).await?;
        call(
            &c,
            "execute_code",
            json!({"sandbox_id": sid, "code": "import numpy"}),
        )
        .await?;
        ids.push(sid);
    }
    let after = pid.and_then(rss_bytes);
    let mut answering = 0;
    for sid in &ids {
        if call(&c, "execute_code", json!({"sandbox_id": sid, "code": "1+1"}))
            .await
            .is_ok()
        {
            answering += 1;
        }
    }
    let _ = c.cancel().await;
    let (Some(b), Some(a)) = (before, after) else {
        return Ok(None);
    };
    let per = (a.saturating_sub(b)) as f64 / 50.0;
    Ok(Some(format!(
        "Memory: 50 sandboxes with numpy imported, {answering}/50 answering `1+1`; server RSS {:.0} MiB -> {:.0} MiB, {:.1} MiB per sandbox; the guest's linear memory after `import numpy` is {:.1} MiB ({:.2}x).",
        b as f64 / 1048576.0,
        a as f64 / 1048576.0,
        per / 1048576.0,
        guest_numpy_bytes as f64 / 1048576.0,
        per / guest_numpy_bytes as f64
    )))
}
