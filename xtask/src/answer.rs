//! Reading an MCP answer over streamable HTTP by hand (tests and the scale test send some
//! requests raw, to control their headers): the server answers with the JSON-RPC message as
//! the body, or as an event stream whose `data:` line carries it.

/// The JSON-RPC message of an answer's body `text`.
pub fn message(text: &str) -> &str {
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .find(|l| l.starts_with('{'))
        .unwrap_or(text.trim())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_plain_body_or_the_data_line_of_an_event_stream() {
        assert_eq!(super::message(" {\"id\":1}\n"), "{\"id\":1}");
        assert_eq!(
            super::message("event: message\nid: 0\ndata: {\"id\":2}\n\n"),
            "{\"id\":2}"
        );
    }
}
