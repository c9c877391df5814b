//! Text that leaves the server without the credentials URLs in it may carry. A servers file
//! or setting may hold `https://user:password@host/...?api_key=...`, and library errors quote
//! the URL they failed on inside other words ("error sending request for url (http://...)"),
//! so every URL found anywhere in the text, whatever surrounds it, loses its user, password,
//! query and fragment. Used where such text is made, so the guest, the model, log
//! notifications and the server's own log all get the redacted form.

/// What stands where a credential was.
const HIDDEN: &str = "…";

/// `text` with every `scheme://` URL's user information, query and fragment replaced by `…`.
pub fn urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let start = scheme_start(rest, at);
        out.push_str(&rest[..start]);
        let end = rest[at + 3..].find(ends_url).map_or(rest.len(), |n| at + 3 + n);
        out.push_str(&one_url(&rest[start..end], at - start));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Where the scheme before `://` at `at` begins (letters, digits, `+`, `-`, `.`).
fn scheme_start(text: &str, at: usize) -> usize {
    let bytes = text.as_bytes();
    let mut start = at;
    while start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || b"+-.".contains(&bytes[start - 1])) {
        start -= 1;
    }
    start
}

/// Characters that end a URL quoted in prose: white space, quotes, brackets.
fn ends_url(c: char) -> bool {
    c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '<' | '>' | ')' | ']' | '}' | '|' | '\\')
}

/// One URL (`scheme_len` bytes of scheme, then `://`) without credentials.
fn one_url(url: &str, scheme_len: usize) -> String {
    let after = &url[scheme_len + 3..];
    let authority_end = after.find(['/', '?', '#']).unwrap_or(after.len());
    let (authority, tail) = after.split_at(authority_end);
    let host = match authority.rfind('@') {
        Some(at) => format!("{HIDDEN}@{}", &authority[at + 1..]),
        None => authority.to_string(),
    };
    let (path, query) = match tail.find(['?', '#']) {
        Some(q) => (&tail[..q], Some(&tail[q..q + 1])),
        None => (tail, None),
    };
    let mut out = format!("{}://{host}{path}", &url[..scheme_len]);
    if let Some(mark) = query {
        out.push_str(mark);
        out.push_str(HIDDEN);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::urls;

    #[test]
    fn credentials_go_wherever_a_url_stands() {
        assert_eq!(
            urls("error sending request for url (http://127.0.0.1:9/mcp?api_key=s3cret)"),
            "error sending request for url (http://127.0.0.1:9/mcp?…)"
        );
        assert_eq!(
            urls("https://bob:pw@mcp.example/mcp?key=s3cret did not complete: 401"),
            "https://…@mcp.example/mcp?… did not complete: 401"
        );
        assert_eq!(urls("see=https://u:p@h/x#tok,"), "see=https://…@h/x#…");
        assert_eq!(urls("'ws://a:b@h'"), "'ws://…@h'");
        assert_eq!(urls("plain text, no url"), "plain text, no url");
        assert_eq!(
            urls("https://h/p/a@b"),
            "https://h/p/a@b",
            "an @ in the path is no credential"
        );
        assert_eq!(urls("odd ://x?y"), "odd ://x?…");
        assert!(!urls("x http://a:p%40ss@h:1/?k=v&t=w y").contains("ss@"));
    }
}
