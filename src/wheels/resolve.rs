//! Choosing wheels: the requested name and its `Requires-Dist` closure, with PEP 440 version
//! specifiers and PEP 508 markers evaluated for the runtime (CPython 3.15 on WASI), against
//! what the runtime already carries, what the sandbox has, and the local cache.
//!
//! Greedy, newest first, no backtracking: enough for a small curated cache, and when two
//! requirements clash the error names both.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::str::FromStr;

use pep508_rs::pep440_rs::{Version, VersionSpecifiers};
use pep508_rs::{MarkerEnvironment, MarkerEnvironmentBuilder, Requirement, VersionOrUrl};

use super::index::{WheelFile, metadata};
use super::{WheelError, normalize};

/// Where a package already comes from.
#[derive(Clone, Debug)]
pub enum Present {
    Runtime(Version),
    Sandbox(Version),
}

impl Present {
    fn version(&self) -> &Version {
        match self {
            Present::Runtime(v) | Present::Sandbox(v) => v,
        }
    }
}

pub struct Plan {
    /// Wheels to unpack, in the order they were chosen (the request first).
    pub wheels: Vec<WheelFile>,
    /// The request itself was already there.
    pub already: Option<(String, Present)>,
}

fn environment(python: &str) -> MarkerEnvironment {
    let short: String = python.split('.').take(2).collect::<Vec<_>>().join(".");
    MarkerEnvironment::try_from(MarkerEnvironmentBuilder {
        implementation_name: "cpython",
        implementation_version: python,
        os_name: "posix",
        platform_machine: "wasm32",
        platform_python_implementation: "CPython",
        platform_release: "",
        platform_system: "WASI",
        platform_version: "",
        python_full_version: python,
        python_version: &short,
        sys_platform: "wasi",
    })
    .unwrap_or_else(|_| {
        // Only reachable with a malformed version in our own manifest.
        panic!("python version {python:?} from runtime/manifest.toml is not PEP 440")
    })
}

/// Checks the user's text is a plain requirement: a name, optional extras and versions.
pub fn parse_request(text: &str) -> Result<Requirement, WheelError> {
    let t = text.trim();
    let bad = || WheelError::BadName(text.chars().take(100).collect());
    if t.is_empty()
        || t.len() > 200
        || t.contains(['@', '/', '\\', ':', ';'])
        || t.chars().any(char::is_control)
    {
        return Err(bad());
    }
    let req = Requirement::from_str(t).map_err(|_| bad())?;
    if matches!(req.version_or_url, Some(VersionOrUrl::Url(_))) {
        return Err(bad());
    }
    Ok(req)
}

fn specifiers(req: &Requirement) -> Option<&VersionSpecifiers> {
    match &req.version_or_url {
        Some(VersionOrUrl::VersionSpecifier(s)) => Some(s),
        _ => None,
    }
}

fn allows(req: &Requirement, v: &Version) -> bool {
    specifiers(req).is_none_or(|s| s.contains(v))
}

fn shown(req: &Requirement) -> String {
    match specifiers(req) {
        Some(s) if !s.is_empty() => format!("{}{}", req.name, s),
        _ => req.name.to_string(),
    }
}

fn suggestions(name: &str, index: &[WheelFile], present: &HashMap<String, Present>) -> String {
    let mut all: Vec<&str> = index
        .iter()
        .map(|w| w.name.as_str())
        .chain(present.keys().map(String::as_str))
        .collect();
    all.sort_unstable();
    all.dedup();
    let mut scored: Vec<(f64, &str)> = all
        .iter()
        .map(|c| (strsim::jaro_winkler(name, c), *c))
        .filter(|(s, c)| *s > 0.8 || c.contains(name) || (name.len() > 3 && name.contains(c)))
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    let close: Vec<&str> = scored.iter().take(5).map(|(_, c)| *c).collect();
    let mut hint = String::new();
    if !close.is_empty() {
        hint.push_str(&format!(" Close matches: {}.", close.join(", ")));
    }
    hint.push_str(&format!(
        " Call install_package with package_name '?' to list all {} installable packages.",
        index
            .iter()
            .filter(|w| w.pure)
            .map(|w| &w.name)
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    ));
    hint
}

/// Resolves `request` to the wheels that must be unpacked.
pub fn resolve(
    request: &Requirement,
    python: &str,
    index: &[WheelFile],
    present: &HashMap<String, Present>,
) -> Result<Plan, WheelError> {
    let root = normalize(request.name.as_ref());
    if let Some(p) = present.get(&root).filter(|p| allows(request, p.version())) {
        return Ok(Plan {
            wheels: Vec::new(),
            already: Some((root, p.clone())),
        });
    }
    let env = environment(python);
    let target = Target {
        python,
        version: Version::from_str(python).ok(),
        index,
        present,
    };
    let mut chosen: BTreeMap<String, (WheelFile, String)> = BTreeMap::new();
    let mut order = Vec::new();
    let mut queue: VecDeque<(Requirement, Option<String>)> = VecDeque::from([(request.clone(), None)]);
    while let Some((req, by)) = queue.pop_front() {
        let name = normalize(req.name.as_ref());
        if settled(&req, by.as_deref(), present, &chosen)? {
            continue;
        }
        let (wheel, meta) = target.pick(&req, by.as_deref())?;
        for dep in &meta.requires_dist {
            let Ok(d) = Requirement::from_str(dep) else {
                return Err(WheelError::Broken {
                    file: wheel.file.clone(),
                    reason: format!("unreadable requirement '{dep}'"),
                });
            };
            if d.evaluate_markers(&env, &req.extras) {
                queue.push_back((d, Some(format!("{name} {}", wheel.version))));
            }
        }
        let who = by.unwrap_or_else(|| "you".to_string());
        order.push(name.clone());
        chosen.insert(name, (wheel, who));
    }
    let wheels = order
        .into_iter()
        .filter_map(|n| chosen.remove(&n).map(|(w, _)| w))
        .collect();
    Ok(Plan {
        wheels,
        already: None,
    })
}

/// "you asked for idna<3.20", "requests requires idna<3.20".
fn asks(by: Option<&str>) -> String {
    by.map_or_else(|| "you asked for".to_string(), |b| format!("{b} requires"))
}

/// Whether `req` is met already (by what is installed, or by a wheel chosen for another
/// requirement); an error when what is there conflicts with it.
fn settled(
    req: &Requirement,
    by: Option<&str>,
    present: &HashMap<String, Present>,
    chosen: &BTreeMap<String, (WheelFile, String)>,
) -> Result<bool, WheelError> {
    let name = normalize(req.name.as_ref());
    if let Some(p) = present.get(&name) {
        let place = match p {
            Present::Runtime(_) => "the runtime",
            Present::Sandbox(_) => "this sandbox",
        };
        let v = p.version();
        if allows(req, v) {
            return Ok(true);
        }
        if by.is_some() || matches!(p, Present::Runtime(_)) {
            return Err(WheelError::Conflict(format!(
                "{} {}, but {place} has {name} {v}",
                asks(by),
                shown(req)
            )));
        }
    }
    if let Some((w, chooser)) = chosen.get(&name) {
        if !allows(req, &w.version) {
            return Err(WheelError::Conflict(format!(
                "{} {}, but {chooser} needed {name} {}, and no version satisfies both",
                asks(by),
                shown(req),
                w.version
            )));
        }
        return Ok(true);
    }
    Ok(false)
}

/// What a resolution picks from: the wheels of the cache, for this Python, beside what is
/// installed.
struct Target<'a> {
    python: &'a str,
    version: Option<Version>,
    index: &'a [WheelFile],
    present: &'a HashMap<String, Present>,
}

impl Target<'_> {
    /// The newest pure wheel that satisfies `req` and supports this Python, with its metadata.
    fn pick(
        &self,
        req: &Requirement,
        by: Option<&str>,
    ) -> Result<(WheelFile, super::index::Metadata), WheelError> {
        let name = normalize(req.name.as_ref());
        let same_name: Vec<&WheelFile> = self.index.iter().filter(|w| w.name == name).collect();
        if same_name.is_empty() {
            return Err(match by {
                None => WheelError::Unknown {
                    name: req.name.to_string(),
                    hint: suggestions(&name, self.index, self.present),
                    wanted: Box::new(req.clone()),
                },
                Some(b) => WheelError::DependencyMissing {
                    by: b.to_string(),
                    shown: shown(req),
                    wanted: Box::new(req.clone()),
                },
            });
        }
        if !same_name.iter().any(|w| w.pure) {
            return Err(WheelError::NativeOnly(name));
        }
        let mut fitting: Vec<&WheelFile> = same_name
            .iter()
            .copied()
            .filter(|w| w.pure && allows(req, &w.version))
            .collect();
        fitting.sort_by(|a, b| b.version.cmp(&a.version));
        for w in fitting {
            let meta = metadata(w)?;
            let python_ok = match (&meta.requires_python, &self.version) {
                (Some(rp), Some(pv)) => VersionSpecifiers::from_str(rp)
                    .map(|s| s.contains(pv))
                    .unwrap_or(true),
                _ => true,
            };
            if python_ok {
                return Ok((w.clone(), meta));
            }
        }
        let versions: Vec<String> = same_name.iter().map(|w| w.version.to_string()).collect();
        Err(WheelError::VersionMissing {
            message: format!(
                "{} {}, but the cache has {name} {} only (or none for Python {})",
                asks(by),
                shown(req),
                versions.join(", "),
                self.python
            ),
            named: match by {
                None => shown(req),
                Some(b) => format!("{} (needed by {b})", shown(req)),
            },
            wanted: Box::new(req.clone()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_and_versions_pass_paths_and_urls_do_not() {
        assert!(parse_request("tabulate").is_ok());
        assert!(parse_request("rich>=13,<16").is_ok());
        assert!(parse_request("rich[jupyter]").is_ok());
        for bad in [
            "../../etc",
            "x @ file:///etc/passwd",
            "https://evil/x.whl",
            "/etc/passwd",
            "a;b",
            "",
            "C:\\x",
        ] {
            assert!(matches!(parse_request(bad), Err(WheelError::BadName(_))), "{bad}");
        }
    }

    #[test]
    fn markers_are_evaluated_for_wasi() {
        let env = environment("3.15.0");
        let yes: Requirement =
            Requirement::from_str("a; python_version >= '3.9' and sys_platform == 'wasi'").unwrap();
        let no: Requirement = Requirement::from_str("b; sys_platform == 'win32'").unwrap();
        let extra: Requirement = Requirement::from_str("c; extra == 'jupyter'").unwrap();
        assert!(yes.evaluate_markers(&env, &[]));
        assert!(!no.evaluate_markers(&env, &[]));
        assert!(!extra.evaluate_markers(&env, &[]));
    }
}
