//! What authentication adds to each request: finding a presented API key (a SHA-256 of the key
//! and a constant-time compare with every key held) among 1 and 1,000 keys, an anonymous caller
//! on a trusted network, a wrong key, and the rate limiter's check of one operation.

use std::net::IpAddr;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use vitistack::auth::{Auth, AuthSettings, KeySet, Role};
use vitistack::http::rate::RateLimits;

fn keys(n: usize) -> KeySet {
    let text: String = (0..n)
        .map(|i| format!("k{i} viewer bench-key-{i:06}-0123456789\n"))
        .collect();
    KeySet::parse(&text, "bench").expect("keys")
}

fn bench(c: &mut Criterion) {
    let client: IpAddr = [127, 0, 0, 1].into();
    let mut g = c.benchmark_group("authenticate");
    for n in [1usize, 1000] {
        let auth = Auth::new(
            AuthSettings {
                anonymous_from: vec!["127.0.0.0/8".parse().expect("net")],
                reload: Duration::from_secs(5),
                ..Default::default()
            },
            None,
        )
        .expect("auth");
        auth.set_keys(keys(n));
        let last = format!("bench-key-{:06}-0123456789", n - 1);
        g.bench_function(format!("key_among_{n}"), |b| {
            b.iter(|| futures::executor::block_on(auth.authenticate(Some(&last), client)))
        });
        g.bench_function(format!("wrong_key_among_{n}"), |b| {
            b.iter(|| {
                futures::executor::block_on(
                    auth.authenticate(Some("no-such-key-0123456789"), client),
                )
            })
        });
        if n == 1 {
            g.bench_function("anonymous", |b| {
                b.iter(|| futures::executor::block_on(auth.authenticate(None, client)))
            });
            let principal = futures::executor::block_on(auth.authenticate(Some(&last), client))
                .expect("principal");
            let limits = RateLimits::new(&[(
                Role::Viewer,
                "1000000000/1000000000".parse().expect("limit"),
            )]);
            g.bench_function("rate_limit_check", |b| {
                b.iter(|| limits.check(&principal, 1))
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
