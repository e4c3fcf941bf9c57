//! The Kubernetes API test server as a process of its own, for the browser tests (which drive the
//! real server binary and cannot host the test server in process).
//!
//! `kube_api KUBECONFIG_PATH` serves every watched resource with the small demo fleet in it,
//! writes a kubeconfig (context `test`) to KUBECONFIG_PATH, holds every list request, and prints
//! `ready` once listening. Lines on stdin control it: `release` answers the held lists, `hold`
//! holds them again.
//!
//! `kube_api --empty` serves the watched resources, RBAC (answering SubjectAccessReviews from
//! it), Events, Leases and what the application inventory reads, with nothing in them and lists
//! answered; it prints `listening URL`. The test writes objects over HTTP, as kubectl would (a
//! datacenter of its own in the tenants suite).
//!
//! It stops when stdin closes.

use vitistack_testkit::kube_api;

use std::io::BufRead;
use std::time::Duration;

use kube_api::KubeApi;
use vitistack::source::demo::{FleetSpec, fleet};

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: kube_api KUBECONFIG_PATH | kube_api --empty");
        std::process::exit(2);
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let api = if path == "--empty" {
            let mut resources = kube_api::watched_resources();
            resources.extend(kube_api::rbac_resources());
            resources.extend(kube_api::inventory_resources());
            resources.extend([kube_api::events(), kube_api::leases()]);
            let api = KubeApi::start(&resources, Duration::from_secs(1)).await;
            println!("listening {}", api.url());
            api
        } else {
            let api = KubeApi::start(&kube_api::watched_resources(), Duration::from_secs(1)).await;
            for r in fleet(&FleetSpec::demo()) {
                api.apply(r.kind().plural(), r.to_value());
            }
            api.hold_lists(true);
            api.write_kubeconfig(std::path::Path::new(&path));
            println!("ready");
            api
        };
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        while let Some(line) = rx.recv().await {
            match line.trim() {
                "release" => api.hold_lists(false),
                "hold" => api.hold_lists(true),
                other => eprintln!("kube_api: unknown command {other:?}"),
            }
        }
    });
}
