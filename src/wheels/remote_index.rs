//! A package index (`CODE_SANDBOX_INDEX_URL`, PEP 503 HTML or PEP 691 JSON "simple" API): a
//! project's files read from it, the newest pure-Python wheel a requirement allows picked, and
//! downloaded into the wheel cache only when its SHA-256 matches what the index states.
//!
//! [`super::package_index`] decides what to ask it for.

use std::path::{Path, PathBuf};

use pep508_rs::Requirement;
use std::str::FromStr;

use pep508_rs::pep440_rs::{Version, VersionSpecifiers};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::index::parse_file_name;
use super::{WheelError, normalize};

/// Largest wheel downloaded from an index.
const MAX_WHEEL: u64 = 100 << 20;
/// Largest project page read.
const MAX_PAGE: usize = 16 << 20;

/// One file a project page lists.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexFile {
    pub filename: String,
    pub url: reqwest::Url,
    pub sha256: Option<String>,
    pub requires_python: Option<String>,
    pub yanked: bool,
}

#[derive(Deserialize)]
struct JsonPage {
    files: Vec<JsonFile>,
}

#[derive(Deserialize)]
struct JsonFile {
    filename: String,
    url: String,
    #[serde(default)]
    hashes: std::collections::HashMap<String, String>,
    #[serde(rename = "requires-python", default)]
    requires_python: Option<String>,
    #[serde(default)]
    yanked: serde_json::Value,
}

/// PEP 691's JSON page.
pub fn parse_json(base: &reqwest::Url, text: &str) -> Result<Vec<IndexFile>, String> {
    let page: JsonPage = serde_json::from_str(text).map_err(|e| e.to_string())?;
    Ok(page
        .files
        .into_iter()
        .filter_map(|f| {
            Some(IndexFile {
                url: base.join(&f.url).ok()?,
                sha256: f.hashes.get("sha256").map(|h| h.to_ascii_lowercase()),
                requires_python: f.requires_python,
                yanked: !matches!(f.yanked, serde_json::Value::Bool(false) | serde_json::Value::Null),
                filename: f.filename,
            })
        })
        .collect())
}

/// PEP 503's HTML page: each `<a href="URL#sha256=HEX" data-requires-python="...">FILE</a>`.
pub fn parse_html(base: &reqwest::Url, text: &str) -> Vec<IndexFile> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("<a ").or_else(|| rest.find("<A ")) {
        let after = &rest[start..];
        let Some(tag_end) = after.find('>') else { break };
        let tag = &after[..tag_end];
        let Some(close) = after[tag_end..]
            .find("</a>")
            .or_else(|| after[tag_end..].find("</A>"))
        else {
            break;
        };
        let name = unescape(after[tag_end + 1..tag_end + close].trim());
        rest = &after[tag_end + close..];
        let Some(href) = attribute(tag, "href") else {
            continue;
        };
        let Ok(mut url) = base.join(&href) else { continue };
        let sha256 = url
            .fragment()
            .and_then(|f| f.strip_prefix("sha256="))
            .map(|h| h.to_ascii_lowercase());
        url.set_fragment(None);
        out.push(IndexFile {
            filename: name,
            url,
            sha256,
            requires_python: attribute(tag, "data-requires-python"),
            yanked: attribute(tag, "data-yanked").is_some() || tag.contains(" data-yanked"),
        });
    }
    out
}

fn attribute(tag: &str, name: &str) -> Option<String> {
    let at = tag.find(&format!("{name}="))? + name.len() + 1;
    let value = &tag[at..];
    let (quote, value) = match value.chars().next()? {
        q @ ('"' | '\'') => (q, &value[1..]),
        _ => (' ', value),
    };
    let end = value.find(quote).unwrap_or(value.len());
    Some(unescape(&value[..end]))
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// The newest pure-Python wheel of `req`'s project that it allows, not yanked, and (when the
/// index says) made for `python`.
pub fn pick<'a>(files: &'a [IndexFile], req: &Requirement, python: &str) -> Option<(&'a IndexFile, Version)> {
    let name = normalize(req.name.as_ref());
    let allows = |v: &Version| match &req.version_or_url {
        Some(pep508_rs::VersionOrUrl::VersionSpecifier(s)) => s.contains(v),
        _ => true,
    };
    let python = Version::from_str(python).ok();
    let fits_python = |f: &IndexFile| match (&f.requires_python, &python) {
        (Some(spec), Some(v)) => VersionSpecifiers::from_str(spec).map_or(true, |s| s.contains(v)),
        _ => true,
    };
    files
        .iter()
        .filter(|f| !f.yanked && fits_python(f))
        .filter_map(|f| {
            let (n, v, pure) = parse_file_name(&f.filename)?;
            (n == name && pure && allows(&v)).then_some((f, v))
        })
        .max_by(|a, b| a.1.cmp(&b.1))
}

/// Whether the project has wheels at all but none pure (the sandbox cannot load it).
pub fn only_compiled(files: &[IndexFile], name: &str) -> bool {
    let name = normalize(name);
    let wheels: Vec<bool> = files
        .iter()
        .filter_map(|f| parse_file_name(&f.filename))
        .filter(|(n, _, _)| *n == name)
        .map(|(_, _, pure)| pure)
        .collect();
    !wheels.is_empty() && !wheels.iter().any(|p| *p)
}

/// Reads a project's page from `index`.
pub async fn project(
    client: &reqwest::Client,
    index: &reqwest::Url,
    name: &str,
) -> Result<Vec<IndexFile>, WheelError> {
    let url = index
        .join(&format!("{}/", normalize(name)))
        .map_err(|e| WheelError::Fetch(format!("the index URL cannot name the project {name}: {e}")))?;
    let response = client
        .get(url.clone())
        .header("Accept", "application/vnd.pypi.simple.v1+json, text/html;q=0.1")
        .send()
        .await
        .map_err(|e| {
            WheelError::Fetch(format!(
                "the package index (CODE_SANDBOX_INDEX_URL) did not answer for {name}: {}; check that it is up and reachable",
                said(e)
            ))
        })?;
    if response.status() == reqwest::StatusCode::NOT_FOUND {
        return Ok(Vec::new());
    }
    if !response.status().is_success() {
        return Err(WheelError::Fetch(format!(
            "the package index answered {} for {name}",
            response.status()
        )));
    }
    let json = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("json"));
    let base = response.url().clone();
    let bytes = body_within(response, MAX_PAGE as u64)
        .await
        .map_err(|e| {
            WheelError::Fetch(format!(
                "reading the index page of {name} failed: {}",
                e.without_url()
            ))
        })?
        .ok_or_else(|| WheelError::Fetch(format!("the index page of {name} is over {MAX_PAGE} bytes")))?;
    let text = String::from_utf8_lossy(&bytes);
    if json {
        parse_json(&base, &text)
            .map_err(|e| WheelError::Fetch(format!("the index page of {name} is not PEP 691 JSON: {e}")))
    } else {
        Ok(parse_html(&base, &text))
    }
}

/// What went wrong with a request, without its URL (it may hold a token); a refused redirect
/// says why it was refused.
fn said(e: reqwest::Error) -> String {
    let redirect = e.is_redirect();
    let e = e.without_url();
    match std::error::Error::source(&e) {
        Some(why) if redirect => format!("{e}: {why}"),
        _ => e.to_string(),
    }
}

/// The body of `response` as it arrives, given up (`None`) past `max` bytes: a hostile index
/// cannot make the host hold more than that.
async fn body_within(mut response: reqwest::Response, max: u64) -> Result<Option<Vec<u8>>, reqwest::Error> {
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        bytes.extend_from_slice(&chunk);
        if bytes.len() as u64 > max {
            return Ok(None);
        }
    }
    Ok(Some(bytes))
}

/// Downloads `file` into `dir` (written aside, renamed when whole), refusing it unless its
/// SHA-256 is the one the index states.
pub async fn download(client: &reqwest::Client, file: &IndexFile, dir: &Path) -> Result<PathBuf, WheelError> {
    let Some(expected) = &file.sha256 else {
        return Err(WheelError::Unsafe {
            file: file.filename.clone(),
            reason: "the index gives no SHA-256 for it, so it cannot be checked".into(),
        });
    };
    if file.filename.contains(['/', '\\']) || !file.filename.ends_with(".whl") {
        return Err(WheelError::Unsafe {
            file: file.filename.clone(),
            reason: "it is not a plain wheel file name".into(),
        });
    }
    let response = client
        .get(file.url.clone())
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .map_err(|e| WheelError::Fetch(format!("downloading {} failed: {}", file.filename, said(e))))?;
    let bytes = body_within(response, MAX_WHEEL)
        .await
        .map_err(|e| {
            WheelError::Fetch(format!(
                "downloading {} failed: {}",
                file.filename,
                e.without_url()
            ))
        })?
        .ok_or_else(|| WheelError::Unsafe {
            file: file.filename.clone(),
            reason: format!("it is over {MAX_WHEEL} bytes"),
        })?;
    let got = hex::encode(Sha256::digest(&bytes));
    if &got != expected {
        return Err(WheelError::Unsafe {
            file: file.filename.clone(),
            // What came back is not described: it may be anything a hostile index pointed at.
            reason: format!("its SHA-256 is not the {expected} the index states"),
        });
    }
    let io = |context: String| move |source| WheelError::Io { context, source };
    std::fs::create_dir_all(dir).map_err(io(format!("creating {}", dir.display())))?;
    let target = dir.join(&file.filename);
    // Two installs may fetch the same wheel at once: each writes its own file aside.
    let aside = dir.join(format!(
        ".{}.{}.part",
        file.filename,
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::write(&aside, &bytes).map_err(io(format!("writing {}", aside.display())))?;
    std::fs::rename(&aside, &target).map_err(io(format!("placing {}", target.display())))?;
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> reqwest::Url {
        reqwest::Url::parse("http://127.0.0.1:8080/simple/demo-pkg/").unwrap()
    }

    #[test]
    fn html_and_json_pages_give_files_with_their_hashes() {
        let html = r#"<html><body>
            <a href="../../packages/demo_pkg-1.0-py3-none-any.whl#sha256=ABC">demo_pkg-1.0-py3-none-any.whl</a>
            <a href="/packages/demo_pkg-2.0-py3-none-any.whl#sha256=def" data-requires-python="&gt;=3.8">demo_pkg-2.0-py3-none-any.whl</a>
            <a href="demo_pkg-3.0-cp312-cp312-manylinux_2_17_x86_64.whl#sha256=123">demo_pkg-3.0-cp312-cp312-manylinux_2_17_x86_64.whl</a>
            <a href="demo_pkg-2.5-py3-none-any.whl#sha256=999" data-yanked="">demo_pkg-2.5-py3-none-any.whl</a>
        </body></html>"#;
        let files = parse_html(&base(), html);
        assert_eq!(files.len(), 4);
        assert_eq!(
            files[0].url.as_str(),
            "http://127.0.0.1:8080/packages/demo_pkg-1.0-py3-none-any.whl"
        );
        assert_eq!(files[0].sha256.as_deref(), Some("abc"));
        assert_eq!(files[1].requires_python.as_deref(), Some(">=3.8"));
        assert!(files[3].yanked);
        let req = Requirement::from_str("demo-pkg").unwrap();
        let (f, v) = pick(&files, &req, "3.13").unwrap();
        assert_eq!(
            (f.filename.as_str(), v.to_string()),
            ("demo_pkg-2.0-py3-none-any.whl", "2.0".into())
        );
        let req = Requirement::from_str("demo-pkg<2").unwrap();
        assert_eq!(pick(&files, &req, "3.13").unwrap().1.to_string(), "1.0");
        // 2.0 needs Python 3.8 or newer: an older guest gets 1.0.
        let req = Requirement::from_str("demo-pkg").unwrap();
        assert_eq!(pick(&files, &req, "3.7").unwrap().1.to_string(), "1.0");
        assert!(!only_compiled(&files, "demo-pkg"));

        let json = r#"{"meta": {"api-version": "1.0"}, "name": "demo-pkg", "files": [
            {"filename": "demo_pkg-1.0-py3-none-any.whl", "url": "/packages/demo_pkg-1.0-py3-none-any.whl",
             "hashes": {"sha256": "AB12"}, "requires-python": ">=3.9", "yanked": false},
            {"filename": "demo_pkg-1.1-py3-none-any.whl", "url": "x.whl", "hashes": {}, "yanked": "broken"}]}"#;
        let files = parse_json(&base(), json).unwrap();
        assert_eq!(files[0].sha256.as_deref(), Some("ab12"));
        assert!(!files[0].yanked && files[1].yanked);
        assert_eq!(
            files[1].url.as_str(),
            "http://127.0.0.1:8080/simple/demo-pkg/x.whl"
        );
    }

    #[test]
    fn a_project_with_only_compiled_wheels_is_told_apart() {
        let files = parse_html(
            &base(),
            r#"<a href="n-1.0-cp312-cp312-win_amd64.whl#sha256=1">n-1.0-cp312-cp312-win_amd64.whl</a>"#,
        );
        assert!(only_compiled(&files, "n"));
        assert!(pick(&files, &Requirement::from_str("n").unwrap(), "3.13").is_none());
    }
}
