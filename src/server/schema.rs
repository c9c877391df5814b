//! The JSON Schemas the tools declare, limited to what every validator knows.
//!
//! schemars marks integers with formats such as `uint64` and `uint`, which no JSON Schema
//! validator defines; the TypeScript SDK's validator (Ajv) warns about each on every client
//! start. Those formats are dropped here; the `minimum: 0` beside them keeps their meaning.

use std::sync::Arc;

use rmcp::model::JsonObject;
use serde_json::Value;

/// Formats defined by JSON Schema 2020-12, which validators may check.
const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Removes non-standard `format` keywords everywhere in a schema.
fn clean(schema: &mut JsonObject) {
    fn drop_format(o: &mut JsonObject) {
        if o.get("format")
            .and_then(Value::as_str)
            .is_some_and(|f| !STANDARD_FORMATS.contains(&f))
        {
            o.remove("format");
        }
    }
    drop_format(schema);
    let mut stack: Vec<&mut Value> = schema.values_mut().collect();
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(o) => {
                drop_format(o);
                stack.extend(o.values_mut());
            }
            Value::Array(a) => stack.extend(a.iter_mut()),
            _ => {}
        }
    }
}

/// The JSON schema of a tool's arguments.
pub fn input<T: schemars::JsonSchema + 'static>() -> Arc<JsonObject> {
    // The argument types are ours and fixed at build time; a failure here is a build defect
    // caught by the tests that list the tools.
    let schema =
        rmcp::handler::server::common::schema_for_input::<T>().unwrap_or_else(|e| panic!("schema: {e}"));
    let mut schema = (*schema).clone();
    clean(&mut schema);
    Arc::new(schema)
}

/// The JSON schema of a tool's structured result.
pub fn output<T: schemars::JsonSchema + 'static>() -> Arc<JsonObject> {
    let mut schema = (*rmcp::handler::server::common::schema_for_output::<T>()).clone();
    clean(&mut schema);
    Arc::new(schema)
}

#[cfg(test)]
mod tests {
    #[derive(schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Sample {
        n: u64,
        m: Option<usize>,
        inner: Vec<Inner>,
    }
    #[derive(schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Inner {
        k: u32,
    }

    #[test]
    fn no_nonstandard_formats_remain() {
        let s = super::output::<Sample>();
        let text = serde_json::to_string(&*s).unwrap();
        assert!(!text.contains("uint"), "{text}");
        assert!(text.contains("\"minimum\":0"), "{text}");
    }
}
