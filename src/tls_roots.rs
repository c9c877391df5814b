//! Extra trusted roots (`CODE_SANDBOX_CA_FILE`) for the HTTPS the host makes on the guest's
//! behalf and for package-index installs. Read once, at start, so a bad file stops the start
//! instead of failing every request later.

use std::path::Path;

/// The certificates of a PEM file; the reason it cannot be used otherwise.
pub fn load(file: &Path) -> Result<Vec<reqwest::Certificate>, String> {
    let pem = std::fs::read(file).map_err(|e| e.to_string())?;
    let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| e.to_string())?;
    if certs.is_empty() {
        return Err("it holds no certificate".into());
    }
    Ok(certs)
}
