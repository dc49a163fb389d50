//! Command line and the safety rules checked before anything starts.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use clap::Parser;

/// Orca queue dashboard: see and steer Orca queues in a browser.
#[derive(Parser, Debug, Clone)]
#[command(name = "orca-dashboard", version)]
pub struct Args {
    /// Redis to inspect (redis://[user:password@]host:port[/db]).
    #[arg(
        long,
        env = "ORCA_DASHBOARD_REDIS",
        default_value = "redis://127.0.0.1:6379"
    )]
    pub redis: String,

    /// Address to listen on. Anything but a loopback address needs --token.
    #[arg(long, env = "ORCA_DASHBOARD_LISTEN", default_value = "127.0.0.1:8090")]
    pub listen: String,

    /// Access token (at least 16 characters): browsers log in with it once
    /// (a cookie keeps the session), scripts send `Authorization: Bearer <token>`.
    #[arg(long, env = "ORCA_DASHBOARD_TOKEN", hide_env_values = true)]
    pub token: Option<String>,

    /// Show everything, change nothing: no action buttons, every POST refused.
    /// Works with a Redis ACL user limited to the read commands.
    #[arg(long, env = "ORCA_DASHBOARD_READ_ONLY", value_parser = clap::builder::BoolishValueParser::new())]
    pub read_only: bool,

    /// Seconds between samples of every queue's length and front wait.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub sample_interval: u64,

    /// Seconds an ORCA.STATS reply (O(n) on the server) is reused.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub stats_ttl: u64,

    /// Queued jobs one search by config key or collation reads per request
    /// (it pages on from there).
    #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u64).range(100..=100_000))]
    pub scan_window: u64,

    /// Another host name (or address) browsers may use to reach the
    /// dashboard, as `name` (any port) or `name:port`; repeatable (the env
    /// var takes a comma-separated list). Requests naming any other host
    /// are refused (DNS rebinding). The listen address, localhost,
    /// 127.0.0.1 and [::1] on the listen port are always allowed.
    #[arg(
        long = "allowed-host",
        value_name = "NAME",
        env = "ORCA_DASHBOARD_ALLOWED_HOST",
        value_delimiter = ','
    )]
    pub allowed_host: Vec<String>,
}

pub const MIN_TOKEN_LEN: usize = 16;

/// The checked settings the server runs with.
#[derive(Debug, Clone)]
pub struct Settings {
    pub redis: String,
    pub listen: SocketAddr,
    pub token: Option<String>,
    pub read_only: bool,
    pub sample_interval: Duration,
    pub stats_ttl: Duration,
    pub scan_window: u64,
    /// The `--allowed-host` names, checked and lowercased.
    pub allowed_hosts: Vec<crate::web::hosts::HostPattern>,
}

impl Args {
    /// Applies the safety rules: a non-loopback listen needs a token; a
    /// token must be long enough to resist guessing.
    pub fn check(self) -> Result<Settings, String> {
        let addrs: Vec<SocketAddr> = self
            .listen
            .to_socket_addrs()
            .map_err(|e| format!("--listen {}: {e}", self.listen))?
            .collect();
        let listen = *addrs
            .first()
            .ok_or_else(|| format!("--listen {}: no address", self.listen))?;
        let token = self.token.filter(|t| !t.is_empty());
        if let Some(t) = &token {
            if t.trim().is_empty() {
                return Err("--token is only whitespace: choose a real secret \
                            (at least 16 characters)"
                    .to_string());
            }
            if t.trim() != t {
                return Err("--token starts or ends with whitespace, which an \
                            `Authorization: Bearer` header cannot carry: remove it"
                    .to_string());
            }
            if t.chars().count() < MIN_TOKEN_LEN {
                return Err(format!(
                    "--token must be at least {MIN_TOKEN_LEN} characters (got {})",
                    t.chars().count()
                ));
            }
        }
        if token.is_none() && !listen.ip().is_loopback() {
            return Err(format!(
                "refusing to listen on {listen} without --token (or ORCA_DASHBOARD_TOKEN): \
                 anyone who can reach it could read and change the queues. \
                 Listen on 127.0.0.1, or set a token."
            ));
        }
        let allowed_hosts = self
            .allowed_host
            .iter()
            .map(|h| {
                crate::web::hosts::HostPattern::parse(h).map_err(|e| format!("--allowed-host {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Settings {
            allowed_hosts,
            redis: self.redis,
            listen,
            token,
            read_only: self.read_only,
            sample_interval: Duration::from_secs(self.sample_interval),
            stats_ttl: Duration::from_secs(self.stats_ttl),
            scan_window: self.scan_window,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(listen: &str, token: Option<&str>) -> Args {
        Args::try_parse_from(
            ["orca-dashboard", "--listen", listen]
                .into_iter()
                .chain(token.map(|t| ["--token", t]).into_iter().flatten()),
        )
        .unwrap()
    }

    #[test]
    fn read_only_from_the_command_line() {
        let a = Args::try_parse_from(["orca-dashboard", "--read-only"]).unwrap();
        assert!(a.read_only);
        let a = Args::try_parse_from(["orca-dashboard"]).unwrap();
        assert!(!a.read_only);
    }

    #[test]
    fn loopback_needs_no_token() {
        assert!(args("127.0.0.1:8090", None).check().is_ok());
        assert!(args("[::1]:8090", None).check().is_ok());
    }

    #[test]
    fn other_addresses_need_a_token() {
        let e = args("0.0.0.0:8090", None).check().unwrap_err();
        assert!(e.contains("without --token"), "{e}");
        assert!(args("0.0.0.0:8090", Some("0123456789abcdef"))
            .check()
            .is_ok());
        let e = args("0.0.0.0:8090", Some("short")).check().unwrap_err();
        assert!(e.contains("at least 16"), "{e}");
        assert!(args("not an address", None).check().is_err());
    }

    #[test]
    fn tokens_of_whitespace_are_refused() {
        let e = args("127.0.0.1:8090", Some(&" ".repeat(20)))
            .check()
            .unwrap_err();
        assert!(e.contains("only whitespace"), "{e}");
        let e = args("127.0.0.1:8090", Some("\t\n\t\n\t\n\t\n\t\n\t\n\t\n\t\n"))
            .check()
            .unwrap_err();
        assert!(e.contains("only whitespace"), "{e}");
        let e = args("127.0.0.1:8090", Some(" 0123456789abcdef"))
            .check()
            .unwrap_err();
        assert!(e.contains("whitespace"), "{e}");
        // inner spaces are fine
        assert!(args("127.0.0.1:8090", Some("correct horse battery"))
            .check()
            .is_ok());
    }

    #[test]
    fn allowed_hosts_are_checked() {
        let a = Args::try_parse_from([
            "orca-dashboard",
            "--allowed-host",
            "Dash.Example.com",
            "--allowed-host",
            "[::1]:9000",
        ])
        .unwrap()
        .check()
        .unwrap();
        assert_eq!(a.allowed_hosts.len(), 2);
        // the env var takes a comma-separated list (this test alone sets it)
        std::env::set_var("ORCA_DASHBOARD_ALLOWED_HOST", "a.example,b.example:81");
        let a = Args::try_parse_from(["orca-dashboard"]).unwrap();
        std::env::remove_var("ORCA_DASHBOARD_ALLOWED_HOST");
        assert_eq!(a.allowed_host, ["a.example", "b.example:81"]);
        assert_eq!(a.check().unwrap().allowed_hosts.len(), 2);
        for bad in ["", "http://x", "a/b", "a b", "x:notaport", "[::1"] {
            let e = Args::try_parse_from(["orca-dashboard", "--allowed-host", bad])
                .unwrap()
                .check()
                .unwrap_err();
            assert!(e.contains("--allowed-host"), "{bad}: {e}");
        }
    }
}
