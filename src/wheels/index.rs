//! The wheels on disk: found by file name, read for their metadata on demand.

use std::io::Read;
use std::path::PathBuf;

use pep508_rs::pep440_rs::Version;

use super::{WheelError, normalize};

#[derive(Clone, Debug)]
pub struct WheelFile {
    pub path: PathBuf,
    pub file: String,
    /// Normalised name.
    pub name: String,
    pub version: Version,
    /// `py3-none-any` and the like: loads anywhere, including WebAssembly.
    pub pure: bool,
}

/// Tags a pure wheel for CPython 3.15 on WASI may carry.
fn is_pure(python: &str, abi: &str, platform: &str) -> bool {
    abi == "none"
        && platform == "any"
        && python
            .split('.')
            .any(|t| matches!(t, "py3" | "py315" | "cp315") || t == "py2.py3")
}

/// Parses `{name}-{version}(-{build})?-{python}-{abi}-{platform}.whl`.
pub fn parse_file_name(file: &str) -> Option<(String, Version, bool)> {
    let stem = file.strip_suffix(".whl")?;
    let parts: Vec<&str> = stem.split('-').collect();
    if parts.len() != 5 && parts.len() != 6 {
        return None;
    }
    let n = parts.len();
    let version: Version = parts[1].parse().ok()?;
    Some((
        normalize(parts[0]),
        version,
        is_pure(parts[n - 3], parts[n - 2], parts[n - 1]),
    ))
}

/// Every wheel in `dirs` (missing folders are skipped).
pub fn scan(dirs: &[PathBuf]) -> Vec<WheelFile> {
    let mut out = Vec::new();
    for dir in dirs {
        let Ok(rd) = std::fs::read_dir(dir) else { continue };
        for entry in rd.flatten() {
            let file = entry.file_name().to_string_lossy().into_owned();
            let Some((name, version, pure)) = parse_file_name(&file) else {
                continue;
            };
            if !entry.file_type().map(|t| t.is_file()).unwrap_or(false) {
                continue;
            }
            out.push(WheelFile {
                path: entry.path(),
                file,
                name,
                version,
                pure,
            });
        }
    }
    out
}

/// What a wheel's METADATA says about dependencies.
#[derive(Debug, Default)]
pub struct Metadata {
    pub requires_dist: Vec<String>,
    pub requires_python: Option<String>,
}

const MAX_METADATA: u64 = 4 << 20;

pub fn metadata(wheel: &WheelFile) -> Result<Metadata, WheelError> {
    let broken = |reason: String| WheelError::Broken {
        file: wheel.file.clone(),
        reason,
    };
    let f = std::fs::File::open(&wheel.path).map_err(|e| broken(e.to_string()))?;
    let mut zip = zip::ZipArchive::new(std::io::BufReader::new(f)).map_err(|e| broken(e.to_string()))?;
    let name = zip
        .file_names()
        .find(|n| {
            let mut it = n.split('/');
            matches!((it.next(), it.next(), it.next()), (Some(d), Some("METADATA"), None) if d.ends_with(".dist-info"))
        })
        .map(str::to_string)
        .ok_or_else(|| broken("it has no .dist-info/METADATA".into()))?;
    let mut text = String::new();
    zip.by_name(&name)
        .map_err(|e| broken(e.to_string()))?
        .take(MAX_METADATA)
        .read_to_string(&mut text)
        .map_err(|e| broken(e.to_string()))?;
    Ok(parse_metadata(&text))
}

/// Reads the header part of a core-metadata file (RFC 822 style, continuation lines indented).
pub fn parse_metadata(text: &str) -> Metadata {
    let mut m = Metadata::default();
    let mut last: Option<(String, String)> = None;
    let flush = |field: Option<(String, String)>, m: &mut Metadata| {
        if let Some((k, v)) = field {
            match k.to_ascii_lowercase().as_str() {
                "requires-dist" => m.requires_dist.push(v.trim().to_string()),
                "requires-python" => m.requires_python = Some(v.trim().to_string()),
                _ => {}
            }
        }
    };
    for line in text.lines() {
        if line.is_empty() {
            break;
        }
        if line.starts_with([' ', '\t']) {
            if let Some((_, v)) = last.as_mut() {
                v.push(' ');
                v.push_str(line.trim());
            }
            continue;
        }
        flush(last.take(), &mut m);
        if let Some((k, v)) = line.split_once(':') {
            last = Some((k.trim().to_string(), v.trim().to_string()));
        }
    }
    flush(last.take(), &mut m);
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_give_name_version_and_purity() {
        let (n, v, pure) = parse_file_name("Markdown-3.5-py3-none-any.whl").unwrap();
        assert_eq!(
            (n.as_str(), v.to_string().as_str(), pure),
            ("markdown", "3.5", true)
        );
        assert!(parse_file_name("six-1.16.0-py2.py3-none-any.whl").unwrap().2);
        assert!(
            !parse_file_name("numpy-2.0.0-cp312-cp312-manylinux_2_17_x86_64.whl")
                .unwrap()
                .2
        );
        assert!(parse_file_name("not-a-wheel.zip").is_none());
    }

    #[test]
    fn metadata_headers_are_read() {
        let m = parse_metadata(
            "Metadata-Version: 2.1\nName: rich\nRequires-Python: >=3.8\nRequires-Dist: pygments<3,>=2.13\nRequires-Dist: ipywidgets ; extra == \"jupyter\"\n\nBody: not a header\n",
        );
        assert_eq!(m.requires_python.as_deref(), Some(">=3.8"));
        assert_eq!(m.requires_dist.len(), 2);
    }
}
