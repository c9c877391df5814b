//! Extra trusted roots (`CODE_SANDBOX_CA_FILE`) for the HTTPS the host makes on the guest's
//! behalf and for package-index installs. Read at start, so a bad file stops the start
//! instead of failing every request later.

use std::path::Path;

#[derive(Debug, thiserror::Error)]
#[error("CODE_SANDBOX_CA_FILE {file} could not be used ({why}); it must be a PEM file of CA certificates")]
pub struct RootsError {
    pub file: String,
    pub why: String,
}

/// The certificates of the CA file setting; none when it is unset or empty (a bundle's form
/// left blank passes an empty value).
pub fn load(ca_file: Option<&Path>) -> Result<Vec<reqwest::Certificate>, RootsError> {
    let Some(file) = ca_file.filter(|f| !f.as_os_str().is_empty()) else {
        return Ok(Vec::new());
    };
    let bad = |why: String| RootsError {
        file: file.display().to_string(),
        why,
    };
    let pem = std::fs::read(file).map_err(|e| bad(e.to_string()))?;
    let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| bad(e.to_string()))?;
    if certs.is_empty() {
        return Err(bad("it holds no certificate".into()));
    }
    Ok(certs)
}
