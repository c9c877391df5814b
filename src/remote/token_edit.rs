//! The `token` subcommand's edits to the tokens file (`add`, `list`, `remove`): a new
//! token's hash appended on a line of its own, a line removed by writing the file aside and
//! renaming it; the file stays readable by its owner only. A running server sees each edit at
//! its next request ([`super::tokens::TokenBook`]).

use std::io::Write as _;
use std::path::Path;

use rand::RngCore as _;
use sha2::{Digest, Sha256};

use super::tokens::{TokenError, valid_name};

/// A new token: 256 random bits, hex, with a prefix that makes it recognisable in a config.
fn new_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    format!("mcs_{}", hex::encode(bytes))
}

fn io(what: &'static str, file: &Path) -> impl FnOnce(std::io::Error) -> TokenError {
    let file = file.display().to_string();
    move |source| TokenError::Io { what, file, source }
}

fn names_in(file: &Path) -> Result<Vec<String>, TokenError> {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(io("read", file)(e)),
    };
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect())
}

/// Appends a new principal and returns its token (shown once; only its hash is kept).
pub fn add(file: &Path, name: &str) -> Result<String, TokenError> {
    if !valid_name(name) {
        return Err(TokenError::BadName(name.to_string()));
    }
    if names_in(file)?.iter().any(|n| n == name) {
        return Err(TokenError::Exists {
            name: name.to_string(),
            file: file.display().to_string(),
        });
    }
    if let Some(dir) = file.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io("create the folder of", file))?;
    }
    let token = new_token();
    let hash = hex::encode(Sha256::digest(token.as_bytes()));
    let mut f = open_private(file, false).map_err(io("open", file))?;
    // A file edited by hand may lack its last newline: the new line must not join it.
    let joins = std::fs::read(file)
        .map_err(io("read", file))?
        .last()
        .is_some_and(|b| *b != b'\n');
    if joins {
        writeln!(f).map_err(io("write", file))?;
    }
    writeln!(f, "{name} {hash}")
        .and_then(|_| f.sync_all())
        .map_err(io("write", file))?;
    Ok(token)
}

/// Opens a tokens file (new ones readable by their owner only): for appending, or truncated.
fn open_private(file: &Path, truncate: bool) -> std::io::Result<std::fs::File> {
    let mut opts = std::fs::OpenOptions::new();
    opts.create(true);
    if truncate {
        opts.write(true).truncate(true);
    } else {
        opts.append(true);
    }
    crate::host::marks::owner_only(&mut opts).open(file)
}

/// A new file for the rewritten list, readable by its owner only.
fn private_file(file: &Path) -> std::io::Result<std::fs::File> {
    let _ = std::fs::remove_file(file);
    open_private(file, true)
}

pub fn list(file: &Path) -> Result<Vec<String>, TokenError> {
    names_in(file)
}

/// Removes `name`'s line (written aside and renamed: the file is never half-written).
pub fn remove(file: &Path, name: &str) -> Result<(), TokenError> {
    let text = std::fs::read_to_string(file).map_err(io("read", file))?;
    let mut found = false;
    let kept: Vec<&str> = text
        .lines()
        .filter(|l| {
            let hit = l.split_whitespace().next() == Some(name);
            found |= hit;
            !hit
        })
        .collect();
    if !found {
        return Err(TokenError::Unknown {
            name: name.to_string(),
            file: file.display().to_string(),
        });
    }
    let tmp = file.with_extension("tmp");
    let mut body = kept.join("\n");
    body.push('\n');
    private_file(&tmp)
        .and_then(|mut f| f.write_all(body.as_bytes()).and_then(|_| f.sync_all()))
        .and_then(|_| std::fs::rename(&tmp, file))
        .map_err(io("rewrite", file))
}
