use super::*;

fn registry_with_one() -> (std::path::PathBuf, Arc<Registry>, Arc<Sandbox>) {
    let home = std::env::temp_dir().join(format!("registry-{}", uuid::Uuid::new_v4().simple()));
    let reg = Arc::new(Registry::new(Layout::new(&home), None).unwrap());
    let sb = reg
        .reserve(Limits {
            timeout_seconds: 30,
            memory_mb: 256,
            disk_bytes: 1 << 30,
            output_bytes: 1 << 20,
            fuel_per_call: None,
        })
        .unwrap();
    (home, reg, sb)
}

fn chattr(flag: &str, path: &Path) {
    let ok = std::process::Command::new("chattr")
        .arg(flag)
        .arg(path)
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "chattr {flag} failed: this test needs root on a file system with immutable files"
    );
}

#[test]
fn a_folder_that_cannot_be_removed_stays_counted_and_is_retried() {
    let (home, reg, sb) = registry_with_one();
    let before = reg.host_disk.used();
    sb.quota.reserve(10_000).unwrap();
    let stuck = sb.dirs.workspace.join("deep").join("stuck");
    std::fs::create_dir_all(stuck.parent().unwrap()).unwrap();
    std::fs::write(&stuck, b"x").unwrap();
    chattr("+i", &stuck);

    reg.remove(&sb.id);
    assert!(!sb.dirs.workspace.exists(), "the folder left the home at once");
    // Moved into the server's trash, where the immutable file is still there.
    let trash = std::fs::read_dir(home.join("trash"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.is_dir())
        .unwrap();
    let stuck = trash.join(&sb.id).join("workspace").join("deep").join("stuck");
    assert!(stuck.exists(), "the immutable file is still there");
    assert_eq!(reg.host_disk.used(), before + 10_000, "its disk stays counted");
    assert_eq!(
        reg.retry_leftovers(),
        1,
        "a retry that cannot finish keeps it queued"
    );
    assert!(stuck.exists());

    chattr("-i", &stuck);
    assert_eq!(reg.retry_leftovers(), 0);
    assert!(!trash.join(&sb.id).exists() && !sb.dirs.scratch.exists());
    assert_eq!(reg.host_disk.used(), before, "and is given back once removed");
    let _ = std::fs::remove_dir_all(&home);
}

#[tokio::test]
async fn waiting_for_removals_covers_a_close_under_way() {
    let (home, reg, sb) = registry_with_one();
    std::fs::write(sb.dirs.workspace.join("f.txt"), b"x").unwrap();
    // A call still holds the interpreter, so the close waits for it.
    let held = sb.slot.lock().await;
    let closing = tokio::spawn({
        let reg = reg.clone();
        let id = sb.id.clone();
        async move { reg.close(&id).await }
    });
    while reg.is_open(&sb.id) {
        tokio::task::yield_now().await;
    }
    let waiting = tokio::spawn({
        let reg = reg.clone();
        async move { reg.finish_removals(Duration::from_secs(30)).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiting.is_finished(), "a close under way is waited for");
    drop(held);
    let all_ended = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the wait ends once the folders are gone")
        .unwrap();
    assert!(all_ended, "the deletion ended within the bound");
    assert!(!sb.dirs.workspace.exists() && !sb.dirs.scratch.exists());
    closing.await.unwrap().unwrap();
    let _ = std::fs::remove_dir_all(&home);
}
