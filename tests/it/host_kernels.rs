//! Host kernels (issue 65): the runtime's matrix products computed natively give the answers
//! native numpy, scipy and scikit-learn give, and the guest's own kernels give; they stop at
//! the call's time limit like any code while the server answers; they pay fuel; and
//! `CODE_SANDBOX_HOST_KERNELS=0` keeps every product in WebAssembly.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{Server, repo_root};
use crate::native_answers::{native_answers, sandbox_answers};
use crate::remote_harness::{Remote, http};
use crate::team_server::metrics_url;

/// How far a case's numbers may be from native's, relative to the case's largest magnitude
/// (at least 1): summation order differs between any two BLAS builds.
fn tolerance(precision: &str) -> f64 {
    if precision == "f32" { 2e-3 } else { 1e-8 }
}

/// The cases where `ours` differs from `reference` beyond the tolerance, each with its first
/// difference.
fn differences(reference: &Value, ours: &Value) -> Vec<String> {
    let (reference, ours) = (&reference["answers"], &ours["answers"]);
    let names = reference.as_object().expect("answers by name");
    let mut out = Vec::new();
    for (name, want) in names {
        let got = &ours[name.as_str()];
        if got["shape"] != want["shape"] {
            out.push(format!(
                "{name}: shape {} instead of {}",
                got["shape"], want["shape"]
            ));
            continue;
        }
        let (w, g) = (
            want["values"].as_array().expect("values"),
            got["values"].as_array().expect("values"),
        );
        let scale = w
            .iter()
            .filter_map(Value::as_f64)
            .fold(1.0f64, |m, v| m.max(v.abs()));
        let tol = tolerance(want["precision"].as_str().unwrap_or("f64")) * scale;
        let first = w.iter().zip(g).position(|(w, g)| match (w.as_f64(), g.as_f64()) {
            (Some(w), Some(g)) => (w - g).abs() > tol,
            _ => w != g,
        });
        if g.len() != w.len() {
            out.push(format!("{name}: {} values instead of {}", g.len(), w.len()));
        } else if let Some(i) = first {
            out.push(format!(
                "{name}: value {i} is {} instead of {} (tolerance {tol:e})",
                g[i], w[i]
            ));
        }
    }
    out
}

#[tokio::test]
async fn linear_algebra_gives_native_answers_with_host_kernels_and_without() {
    let dir = repo_root().join("tests/native");
    let source = std::fs::read_to_string(dir.join("linalg.py")).expect("tests/native/linalg.py");
    let native = native_answers(&dir, "linalg.py");
    let cases = native["answers"].as_object().map_or(0, |a| a.len());
    assert!(cases >= 150, "the corpus has {cases} cases");
    let mut sandboxes = Vec::new();
    for kernels in ["1", "0"] {
        let s = Server::start_with(&[("CODE_SANDBOX_HOST_KERNELS", kernels)]).await;
        sandboxes.push(sandbox_answers(&s, "linalg", &source).await);
        s.stop().await;
    }
    let (on, off) = (&sandboxes[0], &sandboxes[1]);
    let against_native = differences(&native, on);
    assert!(
        against_native.is_empty(),
        "host kernels against native:\n{}",
        against_native.join("\n")
    );
    let against_guest = differences(off, on);
    assert!(
        against_guest.is_empty(),
        "host kernels against the guest's own:\n{}",
        against_guest.join("\n")
    );
    let guest_against_native = differences(&native, off);
    assert!(
        guest_against_native.is_empty(),
        "the guest's own kernels against native:\n{}",
        guest_against_native.join("\n")
    );
}

/// Products the host's kernels computed, by bound function, from a scrape.
async fn host_products(metrics: &str) -> Vec<(String, f64)> {
    let text = http()
        .get(metrics)
        .send()
        .await
        .expect("a scrape")
        .text()
        .await
        .expect("text");
    text.lines()
        .filter_map(|l| l.strip_prefix("mcp_code_sandbox_host_kernel_products_total{kernel=\""))
        .filter_map(|l| l.split_once("\"} "))
        .map(|(kernel, n)| (kernel.to_string(), n.trim().parse().unwrap_or(0.0)))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_huge_product_stops_at_the_time_limit_while_the_server_answers() {
    let r = Remote::start(&["alice"], &[("CODE_SANDBOX_METRICS_LISTEN", "127.0.0.1:0")]).await;
    let metrics = metrics_url(&r);
    let alice = r.client("alice").await;
    let id = alice.create().await;
    alice
        .run_ok(&id, "import numpy as np\na = np.ones((5000, 5000))\nkept = 41")
        .await;
    let health = format!("http://{}/healthz", r.addr());
    let watcher = tokio::spawn(async move {
        let mut answered = 0;
        for _ in 0..15 {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let got = http().get(&health).timeout(Duration::from_secs(2)).send().await;
            if got.is_ok_and(|r| r.status() == 200) {
                answered += 1;
            }
        }
        answered
    });
    // 125 billion multiply-adds: tens of seconds on the host, far past a 2 s limit.
    let (failed, v, text) = alice
        .call_json(
            "execute_code",
            json!({"sandbox_id": id, "code": "b = a @ a", "timeout_seconds": 2}),
        )
        .await;
    assert!(failed, "{text}");
    assert_eq!(v["limit"], "timeout", "{v}");
    let answered = watcher.await.expect("the watcher");
    assert_eq!(
        answered, 15,
        "/healthz answered {answered} of 15 times during and after the product"
    );
    let v = alice
        .run_ok(
            &id,
            "import numpy as np\nfloat((np.ones((300, 300)) @ np.ones((300, 300)))[0, 0])",
        )
        .await;
    assert_eq!(v["result"], "300.0", "{v}");
    let products = host_products(&metrics).await;
    assert!(
        products.iter().any(|(k, n)| k == "cblas_dgemm" && *n >= 1.0),
        "the host computed no product: {products:?}"
    );
    alice.stop().await;
    r.terminate().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn with_host_kernels_off_every_product_stays_in_webassembly() {
    let envs = [
        ("CODE_SANDBOX_METRICS_LISTEN", "127.0.0.1:0"),
        ("CODE_SANDBOX_HOST_KERNELS", "0"),
    ];
    let r = Remote::start(&["alice"], &envs).await;
    assert!(r.log_text().contains("host kernels are off"), "{}", r.log_text());
    let metrics = metrics_url(&r);
    let alice = r.client("alice").await;
    let id = alice.create().await;
    let code = "import numpy as np\nx = np.random.default_rng(0).standard_normal((400, 400))\n\
                (x @ x).shape, np.linalg.solve(x, x[:, 0]).shape, (x.T @ x).shape";
    let v = alice.run_ok(&id, code).await;
    assert_eq!(v["result"], "((400, 400), (400,), (400, 400))", "{v}");
    assert_eq!(
        host_products(&metrics).await,
        Vec::new(),
        "host kernels computed products while off"
    );
    alice.stop().await;
    r.terminate().await;
}

#[tokio::test]
async fn a_product_the_fuel_cannot_pay_runs_out_of_fuel() {
    let s = Server::start_with(&[
        ("CODE_SANDBOX_FUEL", "4000000000"),
        ("CODE_SANDBOX_WARM_IMAGE", "false"),
    ])
    .await;
    crate::common::progress("compiling the fuel-metered interpreter once (about a minute)");
    let started = std::time::Instant::now();
    let id = loop {
        let (failed, v, text) = s
            .call_json(
                "execute_code",
                json!({"code": "import numpy as np\na = np.ones((2000, 2000))"}),
            )
            .await;
        if !(failed && text.contains("not ready")) || started.elapsed().as_secs() > 600 {
            assert!(!failed, "{text} {v}");
            break v["sandbox_id"]
                .as_str()
                .expect("the new sandbox's id")
                .to_string();
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    // 8 billion multiply-adds, twice the call's fuel: not free on the host.
    let (failed, v, text) = s
        .call_json("execute_code", json!({"sandbox_id": id, "code": "a @ a"}))
        .await;
    assert!(failed, "{text}");
    assert_eq!(v["limit"], "fuel", "{v}");
    s.stop().await;
}
