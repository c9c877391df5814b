//! A save folder the user named before anything was saved (the README's own Claude Desktop
//! example): `save_file` is offered anyway, the folder is made on the first save into it when
//! the folder that would hold it exists, and otherwise the save fails naming it and what to do.

use serde_json::json;

use crate::common::{LOG_TO, Server};

#[tokio::test]
async fn a_named_save_folder_that_is_not_there_is_made_on_the_first_save() {
    let root = std::env::temp_dir().join(format!("mcs-savefolder-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&root).unwrap();
    let root = std::fs::canonicalize(root).unwrap();
    let (results, deep) = (root.join("results"), root.join("no/such/place"));
    let log = root.join("server.log");
    let sep = if cfg!(windows) { ";" } else { ":" };
    let named = format!("{}{sep}{}", results.display(), deep.display());
    let s = Server::start_with(&[
        ("CODE_SANDBOX_SAVE_DIRS", named.as_str()),
        ("RUST_LOG", "info"),
        (LOG_TO, log.to_str().unwrap()),
    ])
    .await;
    let tools = s.client.list_all_tools().await.unwrap();
    assert!(
        tools.iter().any(|t| t.name == "save_file"),
        "save_file is offered though neither folder exists yet"
    );
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(
        said.contains(&format!(
            "'{}' does not exist yet; it is made on the first save",
            results.display()
        )),
        "{said}"
    );
    assert!(said.contains("nor does the folder that would hold it"), "{said}");
    assert!(!results.exists(), "nothing is made before a save");

    let id = s.create().await;
    s.run_ok(&id, "open('table.csv', 'w').write('a,b\\n1,2\\n')")
        .await;
    // Relative: into the first folder named.
    let (err, v, text) = s
        .call_json(
            "save_file",
            json!({"sandbox_id": id, "path": "table.csv", "destination": "table.csv"}),
        )
        .await;
    assert!(!err, "{text}");
    assert_eq!(v["folder_made"], results.display().to_string(), "{v}");
    assert!(text.contains("did not exist; it was made"), "{text}");
    assert_eq!(
        std::fs::read_to_string(results.join("table.csv")).unwrap(),
        "a,b\n1,2\n"
    );
    // Made once: the next save says nothing of it.
    let (err, v, _) = s
        .call_json(
            "save_file",
            json!({"sandbox_id": id, "path": "table.csv", "destination": "again.csv"}),
        )
        .await;
    assert!(!err && v.get("folder_made").is_none(), "{v}");

    let into_deep = deep.join("table.csv");
    let (err, _, text) = s
        .call_json(
            "save_file",
            json!({"sandbox_id": id, "path": "table.csv", "destination": into_deep.to_str().unwrap()}),
        )
        .await;
    assert!(err, "a folder whose parent is missing is not made");
    assert!(
        text.contains(&deep.display().to_string()) && text.contains("Ask the user to make it"),
        "{text}"
    );
    assert!(!root.join("no").exists(), "no parent folder is made");
    let _ = std::fs::remove_dir_all(root);
}
