//! A sandbox's history as a Jupyter notebook (nbformat 4.5): each cell with its outputs as
//! Jupyter would show them (streams, the value as `text/plain` and, for tables, `text/html`,
//! figures as `image/png`, errors with their traceback), numbered in order.

use serde_json::{Value, json};

use super::history::Cell;
use crate::sandbox::Table;

/// Splits text into the notebook's list of lines, each keeping its newline.
fn lines(text: &str) -> Value {
    Value::Array(
        text.split_inclusive('\n')
            .map(|l| Value::String(l.into()))
            .collect(),
    )
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The table's rows as an HTML table, every cell escaped (the values are the guest's).
fn table_html(t: &Table) -> String {
    let mut html = String::from("<table class=\"dataframe\">\n<thead><tr>");
    for c in &t.columns {
        html += &format!("<th>{}</th>", escape(c));
    }
    html += "</tr></thead>\n<tbody>\n";
    for row in &t.rows {
        html += "<tr>";
        for v in row {
            let text = match v {
                Value::Null => String::new(),
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            html += &format!("<td>{}</td>", escape(&text));
        }
        html += "</tr>\n";
    }
    html += "</tbody>\n</table>\n";
    if t.total_rows as usize > t.rows.len() {
        html += &format!("<p>{} of {} rows</p>\n", t.rows.len(), t.total_rows);
    }
    html
}

fn outputs(cell: &Cell, count: usize) -> Vec<Value> {
    let mut out = Vec::new();
    for (name, text) in [("stdout", &cell.stdout), ("stderr", &cell.stderr)] {
        if !text.is_empty() {
            out.push(json!({"output_type": "stream", "name": name, "text": lines(text)}));
        }
    }
    for png in &cell.figures {
        out.push(json!({
            "output_type": "display_data",
            "data": {"image/png": png, "text/plain": ["<Figure>"]},
            "metadata": {}
        }));
    }
    if let Some(value) = &cell.result {
        let mut data = json!({"text/plain": lines(value)});
        if let Some(t) = &cell.table {
            data["text/html"] = lines(&table_html(t));
        }
        out.push(json!({
            "output_type": "execute_result",
            "execution_count": count,
            "data": data,
            "metadata": {}
        }));
    }
    if let Some(e) = &cell.error {
        out.push(json!({
            "output_type": "error",
            "ename": e.name,
            "evalue": e.value,
            "traceback": e.traceback.lines().collect::<Vec<_>>(),
        }));
    }
    out
}

/// The notebook document.
pub fn notebook(cells: &[Cell], python_version: &str) -> Value {
    let cells: Vec<Value> = cells
        .iter()
        .enumerate()
        .map(|(i, c)| {
            json!({
                "cell_type": "code",
                "id": format!("cell-{}", i + 1),
                "execution_count": i + 1,
                "metadata": {},
                "source": lines(&c.code),
                "outputs": outputs(c, i + 1),
            })
        })
        .collect();
    json!({
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3 (mcp-code-sandbox)", "language": "python"},
            "language_info": {"name": "python", "version": python_version, "file_extension": ".py", "mimetype": "text/x-python"},
            "mcp-code-sandbox": {"exported_at": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)}
        },
        "cells": cells,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guest_text_in_a_table_is_escaped() {
        let t = Table {
            columns: vec!["<b>".into()],
            dtypes: vec!["object".into()],
            rows: vec![vec![json!("<script>alert(1)</script>")]],
            total_rows: 1,
            offset: 0,
            handle: "t1".into(),
            columns_left_out: 0,
        };
        let html = table_html(&t);
        assert!(
            !html.contains("<script>") && html.contains("&lt;script&gt;"),
            "{html}"
        );
        assert!(html.contains("<th>&lt;b&gt;</th>"));
    }
}
