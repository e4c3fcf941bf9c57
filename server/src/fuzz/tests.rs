use super::*;
use crate::source::demo::{FleetSpec, fleet};

/// Every input of `fuzz/seeds/<target>/` (the seeds and the crashes found, kept as regressions).
fn seeds(target: &str) -> Vec<Vec<u8>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/seeds")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    let inputs: Vec<Vec<u8>> = files.iter().filter_map(|p| std::fs::read(p).ok()).collect();
    assert!(!inputs.is_empty(), "seeds in {}", dir.display());
    inputs
}

/// Each input, and variations of it: every prefix, each byte dropped, doubled and replaced by a
/// few bytes parsers are sensitive to (a small deterministic fuzzer, so the tests explore a bit
/// around every seed).
fn around(inputs: &[Vec<u8>], body: fn(&[u8])) -> usize {
    let mut n = 0;
    for input in inputs {
        let mut run = |v: &[u8]| {
            body(v);
            n += 1;
        };
        run(input);
        for i in 0..input.len() {
            run(&input[..i]);
            let mut v = input.clone();
            v.remove(i);
            run(&v);
            let mut v = input.clone();
            v.insert(i, input[i]);
            run(&v);
            for b in [
                b',', b'(', b')', b'!', b'=', b' ', b'"', b'\\', b'{', b'[', b':', 0xff,
            ] {
                let mut v = input.clone();
                v[i] = b;
                run(&v);
            }
        }
    }
    n
}

#[test]
fn label_selectors_never_panic_and_read_back_the_same() {
    let n = around(&seeds("label_selector"), label_selector);
    assert!(n > 1000, "{n} inputs");
}

#[test]
fn global_ids_never_panic_and_read_back_the_same() {
    let mut inputs = seeds("global_id");
    for r in fleet(&FleetSpec::demo()).iter().take(20) {
        inputs.push(crate::graphql::types::global_id(r).0.into_bytes());
    }
    around(&inputs, global_id);
}

#[test]
fn cursors_never_panic_and_read_back_the_same() {
    around(&seeds("cursor"), cursor);
}

#[test]
fn manifests_never_panic_and_accepted_objects_read_back_the_same() {
    let mut inputs = seeds("manifest");
    // The demo fleet's objects, one file each (the variations are made of every byte of a few).
    for r in fleet(&FleetSpec::demo()).iter().take(3) {
        inputs.push(
            serde_yaml::to_string(&r.to_value())
                .unwrap_or_default()
                .into_bytes(),
        );
    }
    around(&inputs, manifest);
}

#[test]
fn documents_never_panic() {
    around(&seeds("document"), document);
}

#[test]
fn websocket_messages_never_panic_and_read_back_the_same() {
    let n = around(&seeds("ws_message"), ws_message);
    assert!(n > 1000, "{n} inputs");
}

#[test]
fn api_key_files_never_panic_nor_quote_a_key() {
    let n = around(&seeds("api_keys"), api_keys);
    assert!(n > 1000, "{n} inputs");
}

#[test]
fn helm_releases_never_panic_and_refusals_quote_nothing() {
    let mut inputs = seeds("helm_release");
    // A release gzipped as Helm stores it.
    let release = serde_json::json!({"name": "shop", "namespace": "t", "version": 2,
        "info": {"status": "deployed"}, "chart": {"metadata": {"name": "c", "version": "1"}},
        "manifest": "---\nkind: Service\nmetadata:\n  name: s\n"});
    use base64::Engine;
    let zipped = base64::engine::general_purpose::STANDARD
        .decode(crate::model::helm::encode(&release))
        .unwrap_or_default();
    inputs.push(zipped);
    let n = around(&inputs, helm_release);
    assert!(n > 1000, "{n} inputs");
}
