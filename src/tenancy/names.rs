//! What may name a principal. Names are compared exactly as signed or written, so two names
//! that look alike must not both be accepted: white space at either end, white space other
//! than a plain inner space, control characters and invisible format characters are refused,
//! never trimmed (trimming made `" alice"` and `"alice\u{a0}"` into alice). `local` is the
//! machine's own user of a token-less loopback server; no token or sign-in may claim it.

/// The owner recorded for sandboxes of a token-less server's single local user.
pub const LOCAL: &str = "local";

/// Why a name cannot be a principal's.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadName {
    #[error("it is empty or over 256 bytes")]
    Length,
    #[error("it begins or ends with white space")]
    Padded,
    #[error(
        "it holds U+{0:04X}, a white space, control or invisible format character (only a plain inner space is allowed)"
    )]
    Character(u32),
    #[error("'local' is reserved for the machine's own user of a server without tokens")]
    Reserved,
}

/// Checks a name from a sign-in (a claim's value) or a tokens file line.
pub fn check(name: &str) -> Result<(), BadName> {
    if name.is_empty() || name.len() > 256 {
        return Err(BadName::Length);
    }
    if name.starts_with(char::is_whitespace) || name.ends_with(char::is_whitespace) {
        return Err(BadName::Padded);
    }
    if let Some(c) = name
        .chars()
        .find(|&c| c != ' ' && (c.is_whitespace() || c.is_control() || is_format(c)))
    {
        return Err(BadName::Character(c as u32));
    }
    if name == LOCAL {
        return Err(BadName::Reserved);
    }
    Ok(())
}

/// Unicode's format characters (general category Cf, Unicode 15): invisible, so a name holding
/// one looks like a name without it.
fn is_format(c: char) -> bool {
    matches!(c as u32,
        0xAD | 0x600..=0x605 | 0x61C | 0x6DD | 0x70F | 0x890..=0x891 | 0x8E2 | 0x180E
        | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x2064 | 0x2066..=0x206F | 0xFEFF
        | 0xFFF9..=0xFFFB | 0x110BD | 0x110CD | 0x13430..=0x1343F | 0x1BCA0..=0x1BCA3
        | 0x1D173..=0x1D17A | 0xE0001 | 0xE0020..=0xE007F)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_only_look_like_alice_are_refused() {
        assert_eq!(check("alice"), Ok(()));
        assert_eq!(check("Alice Smith"), Ok(()));
        assert_eq!(check("auth0|1234"), Ok(()));
        for padded in [" alice", "alice\t", "\u{2000}alice", "alice\u{3000}"] {
            assert_eq!(check(padded), Err(BadName::Padded), "{padded:?}");
        }
        assert_eq!(check("alice\u{a0}x"), Err(BadName::Character(0xA0)));
        assert_eq!(check("al\u{2028}ice"), Err(BadName::Character(0x2028)));
        assert_eq!(check("al\u{200b}ice"), Err(BadName::Character(0x200B)));
        assert_eq!(check("al\u{feff}ice"), Err(BadName::Character(0xFEFF)));
        assert_eq!(check("a\nb"), Err(BadName::Character(0x0A)));
        assert_eq!(check(""), Err(BadName::Length));
        assert_eq!(check(LOCAL), Err(BadName::Reserved));
        assert_eq!(check("Local"), Ok(()), "names are compared exactly");
    }
}
