//! Embeds the dashboard (`web/dist`, made by `scripts/build-web.sh`) into the binary: one table of
//! files with their content type and a gzip copy. Without a built dashboard the table is empty and
//! `/` says how to build it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("wasm") => "application/wasm",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("json") => "application/json",
        _ => "application/octet-stream",
    }
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_none_or(|e| e != "gz") {
            out.push(path);
        }
    }
}

/// The commit the binary is built from: `VITISTACK_COMMIT` when the build sets it (a release
/// pipeline), else what git says of the checkout, else `unknown` (a source tarball).
fn commit(manifest: &Path) -> String {
    println!("cargo:rerun-if-env-changed=VITISTACK_COMMIT");
    if let Ok(c) = std::env::var("VITISTACK_COMMIT")
        && !c.trim().is_empty()
    {
        return c.trim().to_string();
    }
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(manifest)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    // Rebuilt when HEAD moves: HEAD itself (a checkout) and the branch it points at (a commit),
    // loose or packed. Only paths that exist are watched: cargo counts a missing one as changed
    // on every build, and then recompiled the whole server each time (`packed-refs` is absent
    // until git packs refs). The branch's folder is watched rather than its file, so the loose
    // ref a commit writes beside a packed one is seen too.
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        let dir = PathBuf::from(dir);
        let common = git(&["rev-parse", "--git-common-dir"])
            .map(|c| manifest.join(c))
            .unwrap_or_else(|| dir.clone());
        let mut watched = vec![dir.join("HEAD"), common.join("packed-refs")];
        if let Some(head) = git(&["symbolic-ref", "-q", "HEAD"])
            && let Some(folder) = common.join(head).parent()
        {
            watched.push(folder.to_path_buf());
        }
        for path in watched.into_iter().filter(|p| p.exists()) {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into())
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    println!("cargo:rustc-env=VITISTACK_COMMIT={}", commit(&manifest));
    let dist = manifest.join("../web/dist");
    // Watch web/ when dist does not exist yet (a missing path would rebuild the server every time).
    let watched = if dist.is_dir() {
        dist.clone()
    } else {
        manifest.join("../web")
    };
    println!("cargo:rerun-if-changed={}", watched.display());
    let mut paths = Vec::new();
    files(&dist, &mut paths);
    paths.sort();
    let mut code = String::from("&[\n");
    for path in &paths {
        let Ok(relative) = path.strip_prefix(&dist) else {
            continue;
        };
        let url = format!("/{}", relative.to_string_lossy().replace('\\', "/"));
        let gz = PathBuf::from(format!("{}.gz", path.display()));
        let gzip = if gz.is_file() {
            format!("Some(include_bytes!({:?}))", gz.display().to_string())
        } else {
            "None".into()
        };
        let _ = writeln!(
            code,
            "    Asset {{ path: {url:?}, content_type: {:?}, body: include_bytes!({:?}), gzip: {gzip} }},",
            content_type(path),
            path.display().to_string(),
        );
    }
    code.push_str("]\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default()).join("web_assets.rs");
    if let Err(e) = std::fs::write(&out, code) {
        panic!("cannot write {}: {e}", out.display());
    }
}
