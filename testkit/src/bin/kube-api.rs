//! The Kubernetes API test server as a process, for the Node suites (which drive the server as
//! users do and cannot call the test server in process): the vitistack kinds, RBAC, Events and
//! what the application inventory reads, served on a free local port. Prints
//! `listening http://127.0.0.1:PORT` once it serves; objects are created and deleted over HTTP
//! (`POST`, `DELETE`), as with kubectl; it runs until killed.

use std::time::Duration;

use vitistack_testkit::kube_api::{self, KubeApi};

fn main() {
    vitistack_testkit::runtime::main(|| async {
        let mut resources = kube_api::watched_resources();
        resources.extend(kube_api::rbac_resources());
        resources.extend(kube_api::inventory_resources());
        resources.push(kube_api::events());
        resources.push(kube_api::leases());
        let api = KubeApi::start(&resources, Duration::from_secs(5)).await;
        println!("listening {}", api.url());
        std::future::pending::<()>().await;
    });
}
