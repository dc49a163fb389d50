//! Which host names the dashboard answers to (DNS rebinding protection).
//!
//! A page of another site whose name an attacker rebinds to 127.0.0.1 is
//! same-origin with the dashboard for the browser, so it could read pages
//! and post forms (its `Origin` matches its `Host`). Every request must
//! therefore name an allowed host in its `Host` header: the listen address
//! itself, `localhost`, `127.0.0.1` or `[::1]` on the listen port, or a name
//! given with `--allowed-host` (`name`: any port, `name:port`: that port).
//! POSTs with an `Origin` must come from the very host they were sent to.

use std::net::SocketAddr;

/// A host as a request names it: lowercase name (IPv6 in brackets) and
/// port, if given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostPort {
    pub name: String,
    pub port: Option<u16>,
}

impl HostPort {
    /// `name`, `name:port`, `[v6]`, `[v6]:port`; None for anything else
    /// (empty, a scheme, a path, user info, spaces, a bad port).
    pub fn parse(s: &str) -> Option<HostPort> {
        if s.is_empty()
            || s.bytes()
                .any(|b| b.is_ascii_whitespace() || b.is_ascii_control() || b"/?#@\\".contains(&b))
        {
            return None;
        }
        let (name, port) = if s.starts_with('[') {
            let end = s.find(']')?;
            let name = &s[..=end];
            match &s[end + 1..] {
                "" => (name, None),
                rest => (name, Some(rest.strip_prefix(':')?)),
            }
        } else {
            match s.split_once(':') {
                Some((n, p)) => (n, Some(p)),
                None => (s, None),
            }
        };
        if name.is_empty() || name == "[]" || (!name.starts_with('[') && name.contains(':')) {
            return None;
        }
        let port = match port {
            None => None,
            Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => {
                Some(p.parse::<u16>().ok()?)
            }
            Some(_) => return None,
        };
        Some(HostPort {
            name: name.to_ascii_lowercase(),
            port,
        })
    }
}

/// An `--allowed-host`: a name, on any port or on one port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostPattern(HostPort);

impl HostPattern {
    pub fn parse(s: &str) -> Result<HostPattern, String> {
        HostPort::parse(s.trim()).map(HostPattern).ok_or_else(|| {
            format!(
                "\u{201c}{s}\u{201d}: give a host name or address, optionally with a port \
                 (dash.example.org, 192.0.2.7:8090, [2001:db8::7]), without scheme or path"
            )
        })
    }
}

/// The hosts a dashboard listening on `listen` answers to.
#[derive(Clone, Debug)]
pub struct AllowedHosts {
    port: u16,
    /// Allowed on the listen port only.
    local: Vec<String>,
    extra: Vec<HostPattern>,
}

impl AllowedHosts {
    pub fn new(listen: SocketAddr, extra: Vec<HostPattern>) -> AllowedHosts {
        let own = match listen {
            SocketAddr::V4(a) => a.ip().to_string(),
            SocketAddr::V6(a) => format!("[{}]", a.ip()),
        };
        let mut local: Vec<String> = ["localhost", "127.0.0.1", "[::1]"]
            .into_iter()
            .map(String::from)
            .collect();
        if !local.contains(&own) {
            local.push(own);
        }
        AllowedHosts {
            port: listen.port(),
            local,
            extra,
        }
    }

    /// Is `host` (a `Host` header's value) one of the allowed hosts? A
    /// Host without a port means port 80 (the dashboard speaks plain HTTP).
    pub fn allows(&self, host: &str) -> bool {
        let Some(h) = HostPort::parse(host) else {
            return false;
        };
        let port = h.port.unwrap_or(80);
        if port == self.port && self.local.contains(&h.name) {
            return true;
        }
        self.extra
            .iter()
            .any(|HostPattern(p)| p.name == h.name && p.port.is_none_or(|pp| pp == port))
    }
}

/// Does an `Origin` header name the same host as the (allowed) `Host` the
/// request was sent to? Names compare case-insensitively; a port left out
/// is the scheme's default (80 for http, 443 for https, so a TLS proxy
/// that passes `Host` through works). `null` and anything unparsable is
/// another origin.
pub fn same_origin(origin: &str, host: &str) -> bool {
    let Some((scheme, authority)) = origin.split_once("://") else {
        return false;
    };
    let default = match scheme.to_ascii_lowercase().as_str() {
        "http" => 80,
        "https" => 443,
        _ => return false,
    };
    match (HostPort::parse(authority), HostPort::parse(host)) {
        (Some(o), Some(h)) => {
            o.name == h.name && o.port.unwrap_or(default) == h.port.unwrap_or(default)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(listen: &str, extra: &[&str]) -> AllowedHosts {
        AllowedHosts::new(
            listen.parse().unwrap(),
            extra
                .iter()
                .map(|e| HostPattern::parse(e).unwrap())
                .collect(),
        )
    }

    #[test]
    fn host_headers_parse() {
        let hp = |n: &str, p| {
            Some(HostPort {
                name: n.into(),
                port: p,
            })
        };
        assert_eq!(
            HostPort::parse("LocalHost:8090"),
            hp("localhost", Some(8090))
        );
        assert_eq!(HostPort::parse("[::1]:8090"), hp("[::1]", Some(8090)));
        assert_eq!(HostPort::parse("[::1]"), hp("[::1]", None));
        assert_eq!(HostPort::parse("example.org"), hp("example.org", None));
        for bad in [
            "", ":8090", "a:", "a:b", "a:99999", "a b", "http://a", "a/b", "u@a", "[::1", "[::1]x",
            "::1", "[]:80", "a:80:80",
        ] {
            assert_eq!(HostPort::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn only_local_names_on_the_listen_port_and_the_allowed_ones() {
        let h = hosts("127.0.0.1:48090", &[]);
        for ok in [
            "127.0.0.1:48090",
            "localhost:48090",
            "LOCALHOST:48090",
            "[::1]:48090",
        ] {
            assert!(h.allows(ok), "{ok}");
        }
        for bad in [
            "rebind.attacker.example:48090",
            "rebind.attacker.example",
            "localhost:8080",
            "localhost",
            "127.0.0.1",
            "127.0.0.2:48090",
            "localhost.:48090",
            "",
            "127.0.0.1:48090/x",
        ] {
            assert!(!h.allows(bad), "{bad}");
        }
        // the listen address itself, and names given
        let h = hosts(
            "192.0.2.7:8090",
            &["dash.example.org", "proxy.example.org:8443"],
        );
        assert!(h.allows("192.0.2.7:8090"));
        assert!(!h.allows("192.0.2.7:8091"));
        assert!(h.allows("Dash.Example.org"));
        assert!(h.allows("dash.example.org:9999"));
        assert!(h.allows("proxy.example.org:8443"));
        assert!(!h.allows("proxy.example.org"));
        assert!(!h.allows("example.org:8090"));
        let h = hosts("[::1]:80", &[]);
        assert!(h.allows("[::1]") && h.allows("localhost") && h.allows("[::1]:80"));
    }

    #[test]
    fn origins_must_be_the_host() {
        assert!(same_origin("http://127.0.0.1:8090", "127.0.0.1:8090"));
        assert!(same_origin("http://LOCALHOST:8090", "localhost:8090"));
        assert!(same_origin("https://dash.example.org", "dash.example.org"));
        assert!(same_origin(
            "https://dash.example.org:443",
            "dash.example.org"
        ));
        assert!(same_origin(
            "http://dash.example.org",
            "dash.example.org:80"
        ));
        assert!(!same_origin("http://evil.example", "127.0.0.1:8090"));
        assert!(!same_origin("http://localhost:8090", "127.0.0.1:8090"));
        assert!(!same_origin("http://127.0.0.1:8091", "127.0.0.1:8090"));
        assert!(!same_origin("null", "127.0.0.1:8090"));
        assert!(!same_origin("ftp://127.0.0.1:8090", "127.0.0.1:8090"));
        assert!(!same_origin("http://127.0.0.1:8090/x", "127.0.0.1:8090"));
    }
}
