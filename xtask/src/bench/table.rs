//! The bench's table: medians, and one row per measurement beside its baseline.

use std::time::Duration;

pub fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

pub fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

pub struct Row {
    pub what: String,
    pub ours: Duration,
    pub baseline: Option<(String, Duration)>,
    pub runs: usize,
}

impl Row {
    /// A row measured `runs` times, beside a named baseline if there is one.
    pub fn new(what: String, ours: Duration, baseline: Option<(&str, Duration)>, runs: usize) -> Row {
        Row {
            what,
            ours,
            baseline: baseline.map(|(name, d)| (name.to_string(), d)),
            runs,
        }
    }
}

/// Prints the rows as the README's table.
pub fn print_table(rows: Vec<Row>) {
    println!("| measurement | runs | median | baseline (same run) | baseline median | ratio |");
    println!("|---|---|---|---|---|---|");
    for r in rows {
        match r.baseline {
            Some((name, b)) => {
                let ratio = r.ours.as_secs_f64() / b.as_secs_f64();
                // Small ratios keep their digits (a warm start is a thousandth of a cold one).
                let ratio = if ratio < 0.1 {
                    format!("{ratio:.4}x")
                } else {
                    format!("{ratio:.2}x")
                };
                println!(
                    "| {} | {} | {} | {} | {} | {ratio} |",
                    r.what,
                    r.runs,
                    ms(r.ours),
                    name,
                    ms(b)
                )
            }
            None => println!("| {} | {} | {} | - | - | - |", r.what, r.runs, ms(r.ours)),
        }
    }
}
