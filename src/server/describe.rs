//! What tool descriptions add when the user turned something on, so the model knows what
//! sandbox code may reach instead of assuming there is no network (which the base text says).

use crate::config::Settings;
use crate::egress::HostRule;

/// For execute_code: the hosts code may reach: the server's list, or for a remote principal
/// whose tokens line narrows it, those of its entries the server's list covers.
pub fn network(server: &[HostRule], narrowed: Option<&[HostRule]>) -> String {
    let hosts: Vec<String> = match narrowed {
        None => server.iter().map(ToString::to_string).collect(),
        Some(own) => own
            .iter()
            .filter(|r| server.iter().any(|s| r.within(s)))
            .map(ToString::to_string)
            .collect(),
    };
    if hosts.is_empty() {
        return " Network: none for this caller.".into();
    }
    format!(
        " Network: code may fetch over HTTPS (http:// where shown) from these hosts only: {}. urllib, http.client, requests and httpx (install_package them) and pandas.read_csv of a URL work; any other host raises PermissionError.",
        hosts.join(", ")
    )
}

/// For execute_code on the local backend (32-bit WebAssembly): what differs from a laptop's
/// numpy, in one sentence the model reads before it writes code (docs/packages.md has all).
pub fn integers(backend: &str) -> &'static str {
    match backend {
        "wasm" => {
            " numpy's integers are 64-bit as on a laptop, but index results (argsort, argmax, nonzero) and labels a library makes from a plain list are int32 here: call .astype(np.int64) where their type matters."
        }
        _ => "",
    }
}

/// For install_package, when the user set a package index (the local backend uses it).
pub fn package_index(settings: &Settings, backend: &str) -> String {
    let set = settings.package_index_url().is_some();
    match (backend, set) {
        ("wasm", true) => " The user also set a package index: a pure-Python package the local cache lacks (or a version of one) is fetched from it, checked and cached.".into(),
        ("wasm", false) => " Nothing is downloaded: only the cache's packages can be installed.".into(),
        _ => String::new(),
    }
}
