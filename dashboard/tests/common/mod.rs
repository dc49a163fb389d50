//! Test harness: a real redis-server with the built module, the dashboard
//! binary, and headless Chromium driven through chromedriver (WebDriver).
//! Everything listens on free 127.0.0.1 ports, lives in its own temp dir and
//! is stopped when the test ends (also when it fails).

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;

/// Percent-encode everything but the unreserved characters (for addresses).
pub fn enc(s: &str) -> String {
    s.bytes()
        .map(|c| match c {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (c as char).to_string()
            }
            _ => format!("%{c:02X}"),
        })
        .collect()
}

/// A port free now and never handed out before in this test process: the
/// kernel may give a port just released by `bind(0)` to the next caller, so
/// two tests running in parallel could otherwise start their servers on the
/// same port, and one would talk to the other's (a dashboard has no identity
/// check like `is_our_redis`).
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

fn wait_for_port(port: u16, what: &str, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            // Listening, and it is ours: a process that could not bind exits.
            if let Ok(Some(status)) = child.try_wait() {
                panic!("{what} exited ({status}) while something else listens on {port}");
            }
            return;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("{what} exited before listening: {status}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{what} did not listen on {port} within 20 s");
}

/// Is the redis-server answering on `port` the process `pid`? (`INFO
/// server` names its process id: a port another test's server or dashboard
/// took in the meantime does not pass.)
fn is_our_redis(port: u16, pid: u32) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"INFO server\r\n").is_err() {
        return false;
    }
    let want = format!("process_id:{pid}\r\n");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while got.len() < 64 * 1024 {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return false,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
        let text = String::from_utf8_lossy(&got);
        if text.contains(&want) {
            return true;
        }
        if text.contains("process_id:") && text.contains("\r\n\r\n") {
            return false;
        }
    }
    false
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("dashboard/ has a parent")
        .to_path_buf()
}

/// The module, built by `cargo build --release` at the workspace root
/// (`make test-dashboard` does it), or ORCA_MODULE.
pub fn module_path() -> PathBuf {
    let p = std::env::var_os("ORCA_MODULE")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target/release/liborca.so"));
    assert!(
        p.exists(),
        "{} is missing: run `cargo build --release` at the workspace root (or make test-dashboard)",
        p.display()
    );
    p
}

/// Where screenshots go: ORCA_SCREENSHOT_DIR or target/dashboard-screenshots.
pub fn screenshot_dir() -> PathBuf {
    let d = std::env::var_os("ORCA_SCREENSHOT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target/dashboard-screenshots"));
    std::fs::create_dir_all(&d).expect("screenshot dir");
    d
}

/// A child process killed (and reaped) when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A redis-server with the module loaded.
pub struct Redis {
    pub port: u16,
    _child: Proc,
    _dir: tempfile::TempDir,
    extra: Vec<String>,
}

impl Redis {
    pub fn start() -> Redis {
        Self::start_with(|_| Vec::new())
    }

    /// With more server options, made from the server's own temp dir.
    pub fn start_with(extra: impl FnOnce(&Path) -> Vec<String>) -> Redis {
        let dir = tempfile::tempdir().expect("temp dir");
        let extra = extra(dir.path());
        // A free port can be taken by another test between `free_port` and
        // the server's bind: then try another.
        let mut attempt = 0;
        let (port, child) = loop {
            let port = free_port();
            match Self::try_spawn(port, dir.path(), &extra) {
                Ok(child) => break (port, child),
                Err(e) if attempt < 5 => {
                    eprintln!("redis-server on {port}: {e}; another port");
                    attempt += 1;
                }
                Err(e) => panic!("redis-server on {port}: {e}"),
            }
        };
        Redis {
            port,
            _child: Proc(child),
            _dir: dir,
            extra,
        }
    }

    fn spawn(port: u16, dir: &Path, extra: &[String]) -> Child {
        Self::try_spawn(port, dir, extra).unwrap_or_else(|e| panic!("redis-server on {port}: {e}"))
    }

    /// Start a server on `port` and wait until it answers there as itself.
    fn try_spawn(port: u16, dir: &Path, extra: &[String]) -> Result<Child, String> {
        let mut child =
            Command::new(std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into()))
                .args([
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ])
                .arg("--dir")
                .arg(dir)
                .arg("--loadmodule")
                .arg(module_path())
                .args(extra)
                .args(["--logfile", "redis.log"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server (apt install redis-server)");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!("exited before listening: {status}"));
            }
            if is_our_redis(port, child.id()) {
                return Ok(child);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err("did not answer within 20 s".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The server's process id (to freeze it with SIGSTOP).
    pub fn pid(&self) -> u32 {
        self._child.0.id()
    }

    /// Stop the server (its data is gone: nothing is saved).
    pub fn stop(&mut self) {
        let _ = self._child.0.kill();
        let _ = self._child.0.wait();
    }

    /// Start it again on the same port (after `stop`).
    pub fn restart(&mut self) {
        self._child = Proc(Self::spawn(self.port, self._dir.path(), &self.extra));
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The server's own temp dir.
    pub fn dir(&self) -> &Path {
        self._dir.path()
    }

    pub fn conn(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection())
            .unwrap_or_else(|e| {
                let log = std::fs::read_to_string(self.dir().join("redis.log")).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(30).collect();
                panic!(
                    "connect to redis on {}: {e}\n---- redis.log tail ----\n{}",
                    self.port,
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                )
            })
    }

    /// Run a command, return its reply (errors as Err text).
    pub fn cmd(&self, args: &[&str]) -> Result<redis::Value, String> {
        let mut c = self.conn();
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query::<redis::Value>(&mut c).map_err(|e| e.to_string())
    }

    pub fn int(&self, args: &[&str]) -> i64 {
        match self.cmd(args) {
            Ok(redis::Value::Int(i)) => i,
            other => panic!("{args:?}: expected an integer, got {other:?}"),
        }
    }

    /// A field of a flat RESP2 map reply (ORCA.STATUS, ORCA.STATS...).
    pub fn field(&self, args: &[&str], name: &str) -> Option<redis::Value> {
        match self.cmd(args) {
            Ok(redis::Value::Array(a)) => a
                .chunks(2)
                .find(|kv| matches!(&kv[0], redis::Value::BulkString(k) if k == name.as_bytes()))
                .map(|kv| kv[1].clone()),
            Ok(redis::Value::Nil) => None,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    pub fn field_int(&self, args: &[&str], name: &str) -> Option<i64> {
        match self.field(args, name)? {
            redis::Value::Int(i) => Some(i),
            other => panic!("{args:?} {name}: {other:?}"),
        }
    }

    pub fn field_str(&self, args: &[&str], name: &str) -> Option<String> {
        match self.field(args, name)? {
            redis::Value::BulkString(b) => Some(String::from_utf8_lossy(&b).into_owned()),
            redis::Value::SimpleString(s) => Some(s),
            other => panic!("{args:?} {name}: {other:?}"),
        }
    }

    /// Enqueue a config; returns its orca key.
    pub fn enqueue(&self, queue: &str, config: serde_json::Value) -> String {
        let c = config.to_string();
        self.field_str(&["ORCA.ENQUEUE", queue, &c], "key")
            .expect("ORCA.ENQUEUE replies a key")
    }

    /// One text field of every job a listing replies (`ORCA.LIST ...`,
    /// any state), in reply order; "" where a job lacks it.
    pub fn list_field(&self, args: &[&str], name: &str) -> Vec<String> {
        match self.cmd(args) {
            Ok(redis::Value::Array(jobs)) => jobs
                .into_iter()
                .map(|j| match j {
                    redis::Value::Array(f) => f
                        .chunks(2)
                        .find(|kv| matches!(&kv[0], redis::Value::BulkString(k) if k == name.as_bytes()))
                        .map(|kv| match &kv[1] {
                            redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                            redis::Value::Int(i) => i.to_string(),
                            other => panic!("{args:?} {name}: {other:?}"),
                        })
                        .unwrap_or_default(),
                    other => panic!("job: {other:?}"),
                })
                .collect(),
            other => panic!("{args:?}: {other:?}"),
        }
    }

    /// The orca keys of the whole queue in pop order (small queues only).
    pub fn order(&self, queue: &str) -> Vec<String> {
        self.list_field(&["ORCA.LIST", queue, "LIMIT", "1000"], "key")
    }

    /// A nested map field of a RESP2 reply (ORCA.STATS `gates`, `running`,
    /// `settings`) as (name, value text) pairs.
    pub fn map_field(&self, args: &[&str], name: &str) -> Vec<(String, String)> {
        let text = |v: &redis::Value| match v {
            redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            redis::Value::SimpleString(s) => s.clone(),
            redis::Value::Int(i) => i.to_string(),
            other => panic!("{args:?} {name}: {other:?}"),
        };
        match self.field(args, name) {
            Some(redis::Value::Array(a)) => {
                a.chunks(2).map(|kv| (text(&kv[0]), text(&kv[1]))).collect()
            }
            Some(redis::Value::Map(m)) => m.iter().map(|(k, v)| (text(k), text(v))).collect(),
            None => Vec::new(),
            other => panic!("{args:?} {name}: {other:?}"),
        }
    }
}

/// The token of dashboards that show payloads and results (without one,
/// the dashboard hides them: tests/hostile.rs).
pub const TOKEN: &str = "orca-dashboard-test-token";

/// `Authorization: Bearer <TOKEN>`, for `Dashboard::http` outside the browser.
pub fn bearer() -> String {
    format!("Bearer {TOKEN}")
}

/// The dashboard binary under test.
pub struct Dashboard {
    pub port: u16,
    child: Proc,
}

impl Dashboard {
    pub fn start(redis_url: &str, extra: &[&str]) -> Dashboard {
        Self::start_logging(redis_url, extra, Stdio::inherit(), "warn")
    }

    /// Started with its log (stderr) going to `log` at level `level`.
    pub fn start_logging(redis_url: &str, extra: &[&str], log: Stdio, level: &str) -> Dashboard {
        let port = free_port();
        let mut child = Self::command(redis_url, &format!("127.0.0.1:{port}"), extra)
            .env("ORCA_DASHBOARD_LOG", level)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start orca-dashboard");
        wait_for_port(port, "orca-dashboard", &mut child);
        Dashboard {
            port,
            child: Proc(child),
        }
    }

    pub fn command(redis_url: &str, listen: &str, extra: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_orca-dashboard"));
        c.args(["--redis", redis_url, "--listen", listen]);
        // sample every second unless the test says otherwise
        if !extra.contains(&"--sample-interval") {
            c.args(["--sample-interval", "1"]);
        }
        c.args(extra)
            .env_remove("ORCA_DASHBOARD_TOKEN")
            .env_remove("ORCA_DASHBOARD_READ_ONLY")
            .env("ORCA_DASHBOARD_LOG", "warn");
        c
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn alive(&mut self) -> bool {
        matches!(self.child.0.try_wait(), Ok(None))
    }

    /// The dashboard's process id (its memory is in /proc/<pid>/status).
    pub fn pid(&self) -> u32 {
        self.child.0.id()
    }

    /// A GET outside the browser, the body as bytes (a download may be
    /// any bytes): (status, body).
    pub fn get_bytes(&self, path: &str, headers: &[(&str, &str)]) -> (u16, Vec<u8>) {
        get_bytes(self.port, path, headers)
    }

    /// A raw HTTP/1.0 request outside the browser: (status, body).
    pub fn http(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (u16, String) {
        self.http_to(
            &format!("127.0.0.1:{}", self.port),
            method,
            path,
            headers,
            body,
        )
    }

    /// `http` with another `Host` header (or none, for "").
    pub fn http_to(
        &self,
        host: &str,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (u16, String) {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect dashboard");
        s.set_read_timeout(Some(Duration::from_secs(60))).ok();
        let host_line = if host.is_empty() {
            String::new()
        } else {
            format!("Host: {host}\r\n")
        };
        let mut req = format!(
            "{method} {path} HTTP/1.0\r\n{host_line}Content-Length: {}\r\n",
            body.len()
        );
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(body);
        s.write_all(req.as_bytes()).expect("send");
        let mut out = String::new();
        s.read_to_string(&mut out).expect("read");
        let status = out
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        (status, out)
    }
}

/// A GET of the dashboard on `port` (from any thread), the body as bytes:
/// (status, body).
pub fn get_bytes(port: u16, path: &str, headers: &[(&str, &str)]) -> (u16, Vec<u8>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect dashboard");
    s.set_read_timeout(Some(Duration::from_secs(120))).ok();
    let mut req = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).expect("send");
    let mut out = Vec::new();
    s.read_to_end(&mut out).expect("read");
    let end = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response head");
    let head = String::from_utf8_lossy(&out[..end]).into_owned();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, out[end + 4..].to_vec())
}

/// From a raw response (`Dashboard::http`): the CSRF cookie it sets
/// (`name=value`) and the token of its first form.
pub fn csrf_of(response: &str) -> (String, String) {
    let cookie = response
        .lines()
        .filter_map(|l| {
            l.strip_prefix("set-cookie: ")
                .or_else(|| l.strip_prefix("Set-Cookie: "))
        })
        .find(|c| c.starts_with("orca_csrf="))
        .and_then(|c| c.split(';').next())
        .expect("a CSRF cookie")
        .to_string();
    let token = response
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a form with a CSRF token")
        .to_string();
    (cookie, token)
}

/// Form-encode pairs.
pub fn form(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// Headless Chromium through its own chromedriver (own process group, so
/// the browser goes with it).
pub struct Browser {
    pub client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
}

impl Browser {
    pub async fn start() -> Browser {
        let port = free_port();
        let mut driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("chromedriver (apt install chromium chromium-driver, or make test-dashboard)");
        wait_for_port(port, "chromedriver", &mut driver);
        let profile = tempfile::tempdir().expect("profile dir");
        let mut caps = serde_json::Map::new();
        caps.insert("browserName".into(), json!("chrome"));
        caps.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into()),
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage", "--window-size=1400,1100",
                    format!("--user-data-dir={}", profile.path().display()),
                ]
            }),
        );
        let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .expect("WebDriver session with headless Chromium");
        Browser {
            client,
            driver,
            _profile: profile,
        }
    }

    pub async fn goto(&self, url: &str) {
        self.client.goto(url).await.expect("goto");
    }

    pub async fn text(&self, css: &str) -> String {
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("{css}: {e}"))
            .text()
            .await
            .expect("text")
    }

    pub async fn texts(&self, css: &str) -> Vec<String> {
        let mut out = Vec::new();
        for e in self
            .client
            .find_all(Locator::Css(css))
            .await
            .expect("find_all")
        {
            out.push(e.text().await.expect("text"));
        }
        out
    }

    pub async fn attrs(&self, css: &str, attr: &str) -> Vec<String> {
        let mut out = Vec::new();
        for e in self
            .client
            .find_all(Locator::Css(css))
            .await
            .expect("find_all")
        {
            out.push(e.attr(attr).await.expect("attr").unwrap_or_default());
        }
        out
    }

    pub async fn count(&self, css: &str) -> usize {
        self.client
            .find_all(Locator::Css(css))
            .await
            .expect("find_all")
            .len()
    }

    pub async fn click(&self, css: &str) {
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("{css}: {e}"))
            .click()
            .await
            .unwrap_or_else(|e| panic!("click {css}: {e}"));
    }

    /// Wait for an element (after a navigation).
    pub async fn wait_for(&self, css: &str) -> String {
        self.client
            .wait()
            .at_most(Duration::from_secs(10))
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("waiting for {css}: {e}"))
            .text()
            .await
            .expect("text")
    }

    /// Mark the current document, so a wait can tell the next one from it.
    async fn mark(&self) {
        self.client
            .execute("window.__orcaOld = true; return 1;", vec![])
            .await
            .expect("mark page");
    }

    /// Wait until a new document (not the marked one) has `css`.
    pub async fn wait_new_page(&self, css: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let ready = self
                .client
                .execute(
                    "return !window.__orcaOld && document.readyState === 'complete' \
                     && document.querySelector(arguments[0]) !== null;",
                    vec![json!(css)],
                )
                .await;
            if matches!(ready, Ok(serde_json::Value::Bool(true))) {
                return self.text(css).await;
            }
            assert!(
                Instant::now() < deadline,
                "no new page with {css} within 10 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Click (a button or link) and wait for the next page to show `wait_css`.
    pub async fn click_to(&self, css: &str, wait_css: &str) -> String {
        self.mark().await;
        self.click(css).await;
        self.wait_new_page(wait_css).await
    }

    /// Fill a form's fields, submit it, wait for the next page's `wait_css`.
    pub async fn submit_to(
        &self,
        form_css: &str,
        fields: &[(&str, &str)],
        wait_css: &str,
    ) -> String {
        let form = self
            .client
            .form(Locator::Css(form_css))
            .await
            .expect("form");
        for (k, v) in fields {
            form.set_by_name(k, v).await.expect("set field");
        }
        self.mark().await;
        form.submit().await.expect("submit");
        self.wait_new_page(wait_css).await
    }

    /// Log in to `d` (started with `--token TOKEN`) once: the session
    /// cookie then opens every page.
    pub async fn login(&self, d: &Dashboard) {
        self.goto(&d.url("/login")).await;
        self.wait_for("#token").await;
        self.submit_to("form[action='/login']", &[("token", TOKEN)], "main")
            .await;
    }

    /// Run a script that navigates, and wait for the next page's `wait_css`.
    pub async fn script_to(
        &self,
        script: &str,
        args: Vec<serde_json::Value>,
        wait_css: &str,
    ) -> String {
        self.mark().await;
        self.client.execute(script, args).await.expect("script");
        self.wait_new_page(wait_css).await
    }

    /// Replace the CSRF token of every form on the page with a forged one.
    pub async fn forge_csrf(&self) {
        self.client
            .execute(
                "document.querySelectorAll('input[name=csrf]').forEach(i => i.value = 'forged');",
                vec![],
            )
            .await
            .expect("forge the CSRF tokens");
    }

    pub async fn body(&self) -> String {
        self.text("body").await
    }

    pub async fn path(&self) -> String {
        let u = self.client.current_url().await.expect("url");
        match u.query() {
            Some(q) => format!("{}?{q}", u.path()),
            None => u.path().to_string(),
        }
    }

    pub async fn screenshot(&self, name: &str) {
        let png = self.client.screenshot().await.expect("screenshot");
        std::fs::write(screenshot_dir().join(format!("{name}.png")), png)
            .expect("write screenshot");
    }

    pub async fn close(self) {
        let _ = self.client.clone().close().await;
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // the whole group: chromedriver and the Chromium it started
        let _ = Command::new("kill")
            .arg("--")
            .arg(format!("-{}", self.driver.id()))
            .status();
        let _ = self.driver.wait();
    }
}
