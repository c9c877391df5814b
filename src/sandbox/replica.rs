//! Which replica a sandbox lives on, read from its id alone. Behind a proxy that routes by
//! principal, a principal's calls reach the replica holding its sandboxes; while that replica
//! restarts, the proxy sends them to another, which has no record of the id. The id names its
//! replica (`sbx-<replica>-<32 hex>`), so that replica can say where the sandbox lives and that
//! a retry will find it, instead of "no such sandbox". The name says nothing the caller did not
//! send: it is in the id the caller gave.

/// Longest replica name: a Kubernetes StatefulSet pod's name fits.
pub const MAX_NAME: usize = 63;

/// A sandbox id: `sbx-<replica>-<hex>` on a named replica, `sbx-<hex>` otherwise.
pub fn sandbox_id(replica: Option<&str>, hex: &str) -> String {
    match replica {
        Some(r) => format!("sbx-{r}-{hex}"),
        None => format!("sbx-{hex}"),
    }
}

/// The replica `id` names, if it names one.
pub fn replica_of(id: &str) -> Option<&str> {
    let rest = id.strip_prefix("sbx-")?;
    let (replica, hex) = rest.rsplit_once('-')?;
    (hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()) && valid_name(replica).is_ok())
        .then_some(replica)
}

/// Checks a replica name (`CODE_SANDBOX_REPLICA`): a DNS label, as Kubernetes names pods, so it
/// is safe in ids, file names, headers and a proxy's configuration.
pub fn valid_name(name: &str) -> Result<(), String> {
    let ok_char = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-';
    let fits = !name.is_empty() && name.len() <= MAX_NAME;
    let edges = !name.starts_with('-') && !name.ends_with('-');
    if fits && edges && name.bytes().all(ok_char) {
        Ok(())
    } else {
        Err(format!(
            "'{name}' is not a replica name: use 1 to {MAX_NAME} lowercase letters, digits and inner dashes, such as the pod's name (mcp-code-sandbox-0)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn an_id_names_its_replica_and_only_a_well_formed_one() {
        let id = sandbox_id(Some("mcp-code-sandbox-1"), HEX);
        assert_eq!(id, format!("sbx-mcp-code-sandbox-1-{HEX}"));
        assert_eq!(replica_of(&id), Some("mcp-code-sandbox-1"));
        assert_eq!(replica_of(&sandbox_id(None, HEX)), None, "an unnamed server's id");
        assert_eq!(replica_of(&format!("sbx-r1-{}", &HEX[..31])), None, "short hex");
        assert_eq!(replica_of(&format!("sbx-R1-{HEX}")), None, "not a DNS label");
        assert_eq!(replica_of(&format!("sbx-r 1-{HEX}")), None);
        assert_eq!(replica_of("nonsense"), None);
    }

    #[test]
    fn the_longest_id_a_replica_makes_is_one_the_store_takes() {
        let longest = sandbox_id(Some(&"r".repeat(MAX_NAME)), HEX);
        assert_eq!(longest.len(), crate::store::space::MAX_ID);
        assert!(crate::store::space::plausible_id(&longest), "{longest}");
    }

    #[test]
    fn replica_names_are_dns_labels() {
        for good in ["r1", "mcp-code-sandbox-0", "a"] {
            assert!(valid_name(good).is_ok(), "{good}");
        }
        for bad in ["", "-r", "r-", "R1", "r_1", "r/1", "r.1", &"r".repeat(64)] {
            let e = valid_name(bad).expect_err(bad);
            assert!(e.contains("replica name"), "{e}");
        }
    }
}
