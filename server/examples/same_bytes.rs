//! The limit for the load scripts: a server on the same stack as vitistack (tokio, hyper, axum,
//! mimalloc) that answers every POST with the same bytes and does nothing else. What a request
//! costs vitistack on top of this (authentication, rate limit, request id, metrics, the log line,
//! the response cache) is the difference between the two under the same load.
//!
//! Usage: `same_bytes PORT FILE` — answers `FILE`'s bytes as `application/json`.

use std::sync::Arc;

use axum::http::header;
use axum::response::IntoResponse;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (Some(port), Some(file)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: same_bytes PORT FILE");
        return std::process::ExitCode::from(2);
    };
    let body = match std::fs::read(file) {
        Ok(b) => bytes::Bytes::from(b),
        Err(e) => {
            eprintln!("cannot read {file}: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let addr = format!("127.0.0.1:{port}");
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let body = Arc::new(body);
    let served = runtime.block_on(async move {
        let app = axum::Router::new().fallback(move || {
            let body = body.clone();
            async move {
                (
                    [(header::CONTENT_TYPE, "application/json")],
                    bytes::Bytes::clone(&body),
                )
                    .into_response()
            }
        });
        let listener = tokio::net::TcpListener::bind(&addr).await?;
        axum::serve(listener, app).await
    });
    match served {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            std::process::ExitCode::FAILURE
        }
    }
}
