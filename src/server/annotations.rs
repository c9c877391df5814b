//! Titles and behaviour hints of the tools, which clients use to label them and to decide
//! what needs the user's confirmation.

use rmcp::model::{Tool, ToolAnnotations};

/// (tool, title, read-only, destructive, idempotent)
const TABLE: &[(&str, &str, bool, bool, bool)] = &[
    ("create_sandbox", "Create a Python sandbox", false, false, false),
    (
        "close_sandbox",
        "Close a sandbox and delete its files",
        false,
        true,
        true,
    ),
    ("get_sandbox_status", "Show sandbox status", true, false, true),
    ("execute_code", "Run Python code", false, false, false),
    ("install_package", "Install a Python package", false, false, true),
    (
        "create_run_close",
        "Run Python code once in a fresh sandbox",
        false,
        false,
        false,
    ),
    ("list_files", "List files in a sandbox", true, false, true),
    ("read_file", "Read a file from a sandbox", true, false, true),
    (
        "write_file",
        "Write a text file into a sandbox",
        false,
        true,
        true,
    ),
    ("upload_file", "Copy a file into a sandbox", false, true, true),
    // Destructive only with overwrite: true, which replaces a file of the user's.
    (
        "save_file",
        "Save a sandbox file to the user's folder",
        false,
        true,
        false,
    ),
    (
        "fork_sandbox",
        "Copy a sandbox into a new one",
        false,
        false,
        false,
    ),
    (
        "checkpoint_sandbox",
        "Save a sandbox's state",
        false,
        false,
        false,
    ),
    (
        "restore_sandbox",
        "Roll a sandbox back to a checkpoint",
        false,
        true,
        true,
    ),
    ("get_run", "Follow a background run", true, false, true),
    ("cancel_run", "Stop a background run", false, true, true),
    // Writes (or overwrites) one notebook file in the workspace.
    (
        "export_notebook",
        "Export the session as a Jupyter notebook",
        false,
        true,
        true,
    ),
    ("read_table", "Read rows of a result's table", true, false, true),
];

/// Sets each tool's title and annotations. `open_world`: whether the backend reaches beyond
/// the machine (a cloud service), which the local backend never does.
pub fn annotate(tool: &mut Tool, open_world: bool) {
    let Some(&(_, title, read_only, destructive, idempotent)) = TABLE.iter().find(|row| row.0 == tool.name)
    else {
        return;
    };
    let mut a = ToolAnnotations::new();
    a.title = Some(title.to_string());
    a.read_only_hint = Some(read_only);
    a.destructive_hint = Some(destructive);
    a.idempotent_hint = Some(idempotent);
    a.open_world_hint = Some(open_world);
    tool.title = Some(title.to_string());
    tool.annotations = Some(a);
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_row_names_a_tool_once() {
        let mut names: Vec<&str> = super::TABLE.iter().map(|r| r.0).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), super::TABLE.len());
    }
}
