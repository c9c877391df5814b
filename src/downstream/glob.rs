//! Tool-name globs for a server's `allow` and `deny` lists: `*` is any run of characters,
//! `?` one character, everything else itself.

/// `name` as a server that looks names up loosely may take it: case-folded, with whitespace and
/// format characters (Unicode category Cf: zero-width spaces, joiners, direction marks)
/// removed. A deny rule is matched against this form too, so `DELETE_ALL` or
/// `delete\u{200b}_all` cannot reach a tool the user denied as `delete_all`.
pub fn folded(name: &str) -> String {
    use unicode_general_category::{GeneralCategory, get_general_category};
    name.chars()
        .filter(|&c| !c.is_whitespace() && get_general_category(c) != GeneralCategory::Format)
        .flat_map(char::to_lowercase)
        .collect()
}

pub fn matches(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    // The classic two-pointer walk: on a mismatch, the last `*` takes one more character.
    let (mut i, mut j) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while j < n.len() {
        if i < p.len() && (p[i] == '?' || p[i] == n[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some((i, j));
            i += 1;
        } else if let Some((si, sj)) = star {
            i = si + 1;
            j = sj + 1;
            star = Some((si, sj + 1));
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::{folded, matches};

    #[test]
    fn folding_drops_case_whitespace_and_format_characters() {
        for spelling in [
            "DELETE_ALL",
            "delete_all ",
            "\tdelete_all",
            "delete\u{200b}_all",
            "De\u{feff}lete_All\n",
        ] {
            assert_eq!(folded(spelling), "delete_all", "{spelling:?}");
        }
        assert_eq!(folded("ADMIN_RESET"), "admin_reset");
        assert_eq!(folded("read_graph"), "read_graph");
    }

    #[test]
    fn stars_and_marks_match_as_in_a_shell() {
        assert!(matches("read_*", "read_graph"));
        assert!(matches("*", "anything"));
        assert!(matches("*graph", "read_graph"));
        assert!(matches("re?d_*", "read_graph"));
        assert!(matches("*_*_*", "a_b_c"));
        assert!(!matches("read_*", "delete_entities"));
        assert!(!matches("read", "read_graph"));
        assert!(!matches("*x", "read_graph"));
        assert!(matches("", ""));
        assert!(!matches("", "a"));
    }
}
