//! The MCP App view (the `io.modelcontextprotocol/ui` extension): one self-contained HTML page
//! that hosts such as Claude show beside `execute_code`, `get_run` and `create_run_close`
//! results: output, errors, zoomable figures, tables paged through `read_table`, and a
//! background run followed live. Hosts without the extension ignore the tools' `_meta` and
//! see the results as before.

use std::sync::LazyLock;

use rmcp::model::{ReadResourceResult, ResourceContents, Tool};
use serde_json::json;

/// The page, built into the binary.
pub const HTML: &str = include_str!("view/result.html");
pub const MIME_TYPE: &str = "text/html;profile=mcp-app";

/// The view's URI carries a hash of the page: hosts cache views by URI, so a changed page
/// gets a new one.
pub static URI: LazyLock<String> = LazyLock::new(|| {
    use sha2::Digest as _;
    let hash = hex::encode(sha2::Sha256::digest(HTML.as_bytes()));
    format!("ui://mcp-code-sandbox/result/{}", &hash[..12])
});

/// The tools whose results the view shows.
const SHOWN_BY: [&str; 3] = ["execute_code", "get_run", "create_run_close"];
/// Tools only the view calls, hidden from the model.
const APP_ONLY: [&str; 1] = ["read_table"];

/// Adds the `_meta.ui` of the extension to the tools that have one.
pub fn annotate(tool: &mut Tool) {
    let ui = if SHOWN_BY.contains(&tool.name.as_ref()) {
        json!({"resourceUri": URI.as_str()})
    } else if APP_ONLY.contains(&tool.name.as_ref()) {
        json!({"visibility": ["app"]})
    } else {
        return;
    };
    let mut meta = tool.meta.take().unwrap_or_default();
    meta.insert("ui".into(), ui);
    tool.meta = Some(meta);
}

/// `resources/read` of the view, when `uri` is its URI.
pub fn read(uri: &str) -> Option<ReadResourceResult> {
    if uri != URI.as_str() {
        return None;
    }
    let mut contents = ResourceContents::text(HTML, uri);
    if let ResourceContents::TextResourceContents { mime_type, meta, .. } = &mut contents {
        *mime_type = Some(MIME_TYPE.into());
        let mut m = rmcp::model::MetaObject::default();
        // No origins beyond the page itself; it needs no border from the host.
        m.insert("ui".into(), json!({"csp": {}, "prefersBorder": false}));
        *meta = Some(m);
    }
    Some(ReadResourceResult::new(vec![contents]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_view_is_small_and_self_contained() {
        assert!(HTML.len() < 200 * 1024, "{} bytes", HTML.len());
        for external in ["src=\"http", "href=\"http", "@import", "url(http", "<iframe"] {
            assert!(
                !HTML.contains(external),
                "the view loads from outside: {external}"
            );
        }
        // Guest text is put on the page as text, never as HTML.
        for sink in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
        ] {
            assert!(!HTML.contains(sink), "the view uses {sink}");
        }
        assert!(URI.starts_with("ui://mcp-code-sandbox/result/"));
    }
}
