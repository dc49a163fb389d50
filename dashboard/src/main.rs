//! `orca-dashboard`: see and steer Orca queues in a browser.
//!
//!     orca-dashboard --redis redis://127.0.0.1:6379 --listen 127.0.0.1:8090
//!
//! See dashboard/README.md.

mod config;
mod drops;
mod format;
mod orca;
mod render;
mod sampler;
mod stats_cache;
mod svg;
mod web;

use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use tracing_subscriber::EnvFilter;

use crate::config::Args;
use crate::orca::Orca;
use crate::sampler::History;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("ORCA_DASHBOARD_LOG")
                .unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_target(false)
        // stderr, as documented (fmt's default writer is stdout)
        .with_writer(std::io::stderr)
        // colours only on a terminal: the log is also the record of dropped gates
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let settings = match Args::parse().check() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("orca-dashboard: {e}");
            return ExitCode::from(2);
        }
    };
    let orca = match Orca::new(&settings.redis) {
        Ok(o) => Arc::new(o),
        Err(e) => {
            eprintln!("orca-dashboard: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("orca-dashboard: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(serve(settings, orca))
}

async fn serve(s: config::Settings, orca: Arc<Orca>) -> ExitCode {
    let listener = match tokio::net::TcpListener::bind(s.listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("orca-dashboard: cannot listen on {}: {e}", s.listen);
            return ExitCode::FAILURE;
        }
    };
    let listen = listener.local_addr().unwrap_or(s.listen);
    let history = History::default();
    tokio::spawn(history.clone().run(orca.clone(), s.sample_interval));
    let app = web::App::new(
        orca.clone(),
        history,
        web::Options {
            token: s.token.clone(),
            hosts: web::hosts::AllowedHosts::new(listen, s.allowed_hosts.clone()),
            read_only: s.read_only,
            scan_window: s.scan_window,
            sample_interval: s.sample_interval,
            stats_ttl: s.stats_ttl,
        },
    );
    tracing::info!(
        "orca-dashboard on http://{} (Redis {}{}{})",
        listen,
        orca.display_url,
        if s.read_only { ", read-only" } else { "" },
        if s.token.is_some() {
            ", token required"
        } else {
            ""
        },
    );
    let result = axum::serve(listener, web::router(app))
        .with_graceful_shutdown(shutdown())
        .await;
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("orca-dashboard: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Ctrl-C or SIGTERM.
async fn shutdown() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("shutting down");
}
