//! The settings reference, made from the code: every setting's variable, flag, default and
//! meaning come from `config.rs` (clap's own description of the arguments), so the page
//! cannot drift from what the server accepts. `cargo xtask docs` writes it to
//! docs/settings.md; a test fails when the page is out of date.

use clap::CommandFactory as _;
use mcp_code_sandbox::config::Settings;

/// One setting as the page shows it.
pub struct Setting {
    pub env: Option<String>,
    pub flag: Option<String>,
    pub default: String,
    pub meaning: String,
}

/// The help text's first paragraph on one line, and a default it states in words.
fn meaning_and_default(help: &str) -> (String, Option<String>) {
    let first = help.split("\n\n").next().unwrap_or("");
    let mut text = first.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut default = None;
    if let Some(start) = text.find("(default: ")
        && let Some(len) = text[start..].find(')')
    {
        default = Some(text[start + 10..start + len].to_string());
        text = format!("{}{}", text[..start].trim_end(), &text[start + len + 1..]);
    }
    (text.trim().to_string(), default)
}

/// Every setting the server takes, in the order `config.rs` declares them.
pub fn settings() -> Vec<Setting> {
    let cmd = Settings::command();
    cmd.get_arguments()
        .filter(|a| !a.is_hide_set() && !matches!(a.get_id().as_str(), "help" | "version"))
        .filter(|a| a.get_long().is_some() || a.get_env().is_some())
        .map(|a| {
            let help = a
                .get_long_help()
                .or(a.get_help())
                .map(|h| h.to_string())
                .unwrap_or_default();
            let (mut meaning, said) = meaning_and_default(&help);
            let values: Vec<String> = a
                .get_possible_values()
                .iter()
                .filter(|v| !v.is_hide_set())
                .map(|v| format!("`{}`", v.get_name()))
                .collect();
            if !values.is_empty() && a.get_action().takes_values() {
                let bools = values.iter().all(|v| v == "`true`" || v == "`false`");
                if !bools {
                    meaning = format!("{meaning} ({})", values.join(", "));
                }
            }
            let clap_default: Vec<String> = a
                .get_default_values()
                .iter()
                .map(|v| v.to_string_lossy().into_owned())
                .collect();
            let default = if !clap_default.is_empty() {
                format!("`{}`", clap_default.join(","))
            } else {
                said.unwrap_or_else(|| "none".into())
            };
            Setting {
                env: a.get_env().map(|e| e.to_string_lossy().into_owned()),
                flag: a.get_long().map(|l| format!("--{l}")),
                default,
                meaning,
            }
        })
        .collect()
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// docs/settings.md.
pub fn settings_page() -> String {
    let mut page = String::from(
        "# Settings\n\n\
         <!-- Made by `cargo xtask docs` from src/config.rs; edit the doc comments there, not this page. -->\n\n\
         Every setting is an environment variable, a line in a `.env` file in the working folder, or the flag beside\n\
         it (`mcp-code-sandbox --help` prints the same). Flags win over variables. Remote-mode settings matter only\n\
         with `--transport http`; see [Remote mode](remote-mode.md) and [Add to Claude as a connector](oauth-connector.md).\n\n\
         | variable | flag | default | meaning |\n|---|---|---|---|\n",
    );
    for s in settings() {
        page.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            s.env.as_deref().map_or("-".into(), |e| format!("`{e}`")),
            s.flag.as_deref().map_or("-".into(), |f| format!("`{f}`")),
            cell(&s.default),
            cell(&s.meaning),
        ));
    }
    page.push_str(&format!(
        "\nAlso read: `RUST_LOG` (what the log on stderr shows, e.g. `info` or `mcp_code_sandbox::remote=debug`; default `{}`).\n\n",
        mcp_code_sandbox::config::DEFAULT_LOG_FILTER
    ));
    page.push_str(
        "Commands besides serving: `mcp-code-sandbox token add NAME | list | remove NAME` (remote mode's tokens file) and\n\
         `mcp-code-sandbox install-runtime [--from WHEEL]` (fetch, verify and compile the runtime ahead of time).\n",
    );
    page
}

/// Every page `cargo xtask docs` writes, by its path in the repository.
pub fn pages() -> Vec<(&'static str, String)> {
    let mut pages = vec![("docs/settings.md", settings_page())];
    pages.extend(store_schemas());
    pages
}

/// The published JSON Schemas of what the team store holds, by their path in the repository
/// (`docs/schemas/`), made from the types the server writes.
pub fn store_schemas() -> Vec<(&'static str, String)> {
    use mcp_code_sandbox::store::{lease, manifest};
    let pretty = |v: serde_json::Value| serde_json::to_string_pretty(&v).unwrap_or_default() + "\n";
    vec![
        (
            "docs/schemas/store-manifest.schema.json",
            pretty(manifest::schema()),
        ),
        ("docs/schemas/store-lease.schema.json", pretty(lease::schema())),
    ]
}
