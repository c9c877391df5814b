//! Settings as an MCP Bundle passes them.

use super::*;

/// An MCP Bundle passes `--upload-dir` followed by the folders picked in its form, which
/// may be none at all; the boolean fields arrive as the strings "true" and "false".
#[test]
fn bundle_arguments_parse() {
    let a = std::env::temp_dir().join(format!("mcs-cfg-a-{}", std::process::id()));
    let b = std::env::temp_dir().join(format!("mcs-cfg-b-{}", std::process::id()));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let none = Settings::try_parse_from(["mcp-code-sandbox", "--upload-dir"]).unwrap();
    assert!(none.upload_dir.is_empty());
    let two = Settings::try_parse_from([
        "mcp-code-sandbox".as_ref(),
        "--upload-dir".as_ref(),
        a.as_os_str(),
        b.as_os_str(),
        "--persist".as_ref(),
        "false".as_ref(),
    ])
    .unwrap();
    assert!(!two.persist);
    let roots = two.upload_roots();
    assert!(roots.contains(&std::fs::canonicalize(&a).unwrap()));
    assert!(roots.contains(&std::fs::canonicalize(&b).unwrap()));
    assert!(Settings::try_parse_from(["mcp-code-sandbox", "--persist", "maybe"]).is_err());
    // A bundle's form left blank passes an empty servers file: accepted, and read as off.
    let blank = Settings::try_parse_from(["mcp-code-sandbox", "--mcp-servers", ""]).unwrap();
    assert_eq!(blank.mcp_servers.as_deref(), Some(std::path::Path::new("")));
    let _ = std::fs::remove_dir(&a);
    let _ = std::fs::remove_dir(&b);
}
