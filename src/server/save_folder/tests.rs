use super::*;
use crate::config::folders::SaveFolder;

fn scratch() -> PathBuf {
    let d = std::env::temp_dir().join(format!("mcs-savefolder-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&d).unwrap();
    std::fs::canonicalize(d).unwrap()
}

fn missing(p: PathBuf) -> SaveFolder {
    let parent = p.parent().and_then(|d| std::fs::canonicalize(d).ok());
    SaveFolder::Missing { named: p, parent }
}

#[test]
fn a_missing_folder_is_made_on_the_first_save_into_it_and_only_then() {
    let root = scratch();
    let (there, results) = (root.join("there"), root.join("results"));
    std::fs::create_dir(&there).unwrap();
    let folders = [SaveFolder::Present(there.clone()), missing(results.clone())];
    let home = root.join("home");
    let elsewhere = prepare(there.join("a.csv").to_str().unwrap(), &folders, &home).unwrap();
    assert_eq!((elsewhere.roots, elsewhere.made), (vec![there.clone()], None));
    assert!(!results.exists(), "a save elsewhere makes nothing");
    let into = prepare(results.join("a.csv").to_str().unwrap(), &folders, &home).unwrap();
    assert_eq!(into.made.as_ref(), Some(&results));
    assert_eq!(into.roots, vec![there, results.clone()]);
    assert!(results.is_dir());
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn a_relative_destination_makes_the_first_folder_named() {
    let root = scratch();
    let results = root.join("results");
    let folders = [missing(results.clone())];
    let ready = prepare("plot.png", &folders, &root.join("home")).unwrap();
    assert_eq!(ready.made, Some(results.clone()));
    assert!(results.is_dir());
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn a_folder_whose_parent_is_missing_is_named_with_what_to_do() {
    let root = scratch();
    let deep = root.join("no/such/results");
    let folders = [missing(deep.clone())];
    let err = prepare(deep.join("a.csv").to_str().unwrap(), &folders, &root.join("home"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&deep.display().to_string()) && err.contains("make it"),
        "{err}"
    );
    assert!(!root.join("no").exists(), "no parent is made");
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn a_folder_that_would_be_in_the_servers_own_is_not_made() {
    let root = scratch();
    let inside = root.join("results");
    let err = prepare(
        inside.join("a").to_str().unwrap(),
        &[missing(inside.clone())],
        &root,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("server's own folder"), "{err}");
    assert!(!inside.exists());
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn a_save_into_no_folder_there_says_which_are_named() {
    let root = scratch();
    let results = root.join("results");
    let err = prepare(
        "/elsewhere/a.csv",
        &[missing(results.clone())],
        &root.join("home"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("none of the folders") && err.contains("results"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(root);
}
