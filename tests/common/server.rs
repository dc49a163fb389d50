//! Real `redis-server` processes with the built module loaded: start, stop,
//! restart, replicas, connections and `INFO`.
//!
//! - The server binary is `$REDIS_SERVER` or `redis-server` on the `PATH`
//!   (`redis_server_bin`, the one place that picks it); `redis-cli` likewise
//!   is `$REDIS_CLI` or `redis-cli` (`redis_cli_bin`). Point both at another
//!   build (a Valkey `valkey-server`, a valgrind wrapper) to run the same
//!   suites against it.
//! - The module is `$ORCA_MODULE` or `<CARGO_MANIFEST_DIR>/target/release/liborca.so`
//!   (build it first: `make test` / `cargo build --release`).
//! - Each server gets a free 127.0.0.1 port, its own directory under the system
//!   temp dir (RDB, AOF and `server.log` live there) and runs in the foreground
//!   (`--daemonize no`) as a child of the test process.
//! - `Drop` kills exactly the process it started (by its pid) and removes the
//!   directory; if the test is panicking, the tail of the server log is printed
//!   first. On Linux the child also gets `PR_SET_PDEATHSIG(SIGKILL)`, so a
//!   test process that dies without unwinding (SIGKILL, abort) takes its
//!   servers with it. (The signal fires when the *thread* that spawned the
//!   server exits; every test starts and drops its servers on its own thread.)
//!
//! Self-contained (std and the `redis` crate only): `benches/clientside.rs`
//! includes this file with `#[path]`.

#![allow(dead_code)]

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redis::Value;

/// How long a server may take to answer PING after it is spawned.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a replica may take to be linked and caught up.
const SYNC_TIMEOUT: Duration = Duration::from_secs(10);

pub fn module_path() -> PathBuf {
    let path = match std::env::var_os("ORCA_MODULE") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/liborca.so"),
    };
    if !path.is_file() {
        panic!(
            "orca module not found at {}: run `make test` / cargo build --release first \
             (or point ORCA_MODULE at the built .so)",
            path.display()
        );
    }
    path
}

/// The server binary every test starts: `$REDIS_SERVER`, else `redis-server`
/// on the `PATH`.
pub fn redis_server_bin() -> String {
    std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_string())
}

/// The `redis-cli` that cluster tests run: `$REDIS_CLI`, else `redis-cli`.
pub fn redis_cli_bin() -> String {
    std::env::var("REDIS_CLI").unwrap_or_else(|_| "redis-cli".to_string())
}

/// A port nothing listens on right now.
pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().expect("local_addr").port()
    // The listener is dropped here, releasing the port for redis-server.
}

fn unique_dir() -> PathBuf {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir =
            std::env::temp_dir().join(format!("orca-it-{}-{}-{}", std::process::id(), n, nanos));
        match fs::create_dir(&dir) {
            Ok(()) => return dir,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => panic!("cannot create {}: {e}", dir.display()),
        }
    }
}

#[cfg(target_os = "linux")]
fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    extern "C" {
        fn prctl(option: std::os::raw::c_int, ...) -> std::os::raw::c_int;
    }
    const PR_SET_PDEATHSIG: std::os::raw::c_int = 1;
    const SIGKILL: std::os::raw::c_ulong = 9;
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_cmd: &mut Command) {}

/// A running `redis-server` with the module loaded.
pub struct Server {
    pub port: u16,
    pub dir: PathBuf,
    /// Arguments after the module path on the `--loadmodule` line.
    module_args: Vec<String>,
    /// Extra server arguments (`--name value ...`).
    extra: Vec<String>,
    child: Option<Child>,
}

/// Why a spawn attempt failed.
enum SpawnError {
    /// The process exited before answering PING (e.g. port taken).
    Exited(String),
    /// It never answered within the timeout.
    Timeout(String),
}

impl Server {
    /// Start a server with extra server arguments (`["--appendonly", "yes"]`).
    pub fn start(extra: &[&str]) -> Server {
        Server::start_with(&[], extra)
    }

    /// Start a server with module arguments (`["move-to-back-buffer", "5000"]`)
    /// and extra server arguments.
    pub fn start_with(module_args: &[&str], extra: &[&str]) -> Server {
        let mut s = Server {
            port: 0,
            dir: unique_dir(),
            module_args: module_args.iter().map(|s| s.to_string()).collect(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            child: None,
        };
        let mut last = String::new();
        for _attempt in 0..5 {
            s.port = free_port();
            match s.spawn() {
                Ok(()) => return s,
                Err(SpawnError::Exited(log)) => last = log,
                Err(SpawnError::Timeout(log)) => {
                    panic!("redis-server did not answer PING in time; log:\n{log}")
                }
            }
        }
        panic!("redis-server failed to start 5 times; last log:\n{last}");
    }

    /// Start a replica of this server, with its own module and server
    /// arguments, and wait until it is linked and caught up.
    pub fn start_replica(&self, module_args: &[&str], extra: &[&str]) -> Server {
        let port = self.port.to_string();
        let mut args: Vec<&str> = vec!["--replicaof", "127.0.0.1", &port];
        args.extend_from_slice(extra);
        let replica = Server::start_with(module_args, &args);
        replica.wait_link_up();
        sync_replica(self, &replica);
        replica
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    pub fn log(&self) -> String {
        fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    fn args(&self) -> Vec<String> {
        let mut a: Vec<String> = vec![
            "--port".into(),
            self.port.to_string(),
            "--bind".into(),
            "127.0.0.1".into(),
            "--dir".into(),
            self.dir.display().to_string(),
            "--save".into(),
            "".into(),
            "--appendonly".into(),
            "no".into(),
            "--enable-debug-command".into(),
            "local".into(),
            "--daemonize".into(),
            "no".into(),
            // Full syncs start at once instead of waiting for more replicas.
            "--repl-diskless-sync-delay".into(),
            "0".into(),
            "--loadmodule".into(),
            module_path().display().to_string(),
        ];
        a.extend(self.module_args.iter().cloned());
        // Most tests pin the clock on worker commands (NOW, MAXATTEMPTS),
        // which servers accept from clients only when told to; a test that
        // checks the default passes `--orca.trust-client-clock no` itself.
        if !self.extra.iter().any(|e| e == "--orca.trust-client-clock") {
            a.push("--orca.trust-client-clock".into());
            a.push("yes".into());
        }
        // Later options override earlier ones (e.g. `--appendonly yes`).
        a.extend(self.extra.iter().cloned());
        a
    }

    fn spawn(&mut self) -> Result<(), SpawnError> {
        let log = File::create(self.log_path()).expect("create server.log");
        let log2 = log.try_clone().expect("clone log handle");
        let mut cmd = Command::new(redis_server_bin());
        cmd.args(self.args())
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log2));
        die_with_parent(&mut cmd);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", redis_server_bin()));
        self.child = Some(child);
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            // PONG from *our* process: another server could hold the port
            // if ours failed to bind it.
            if ping(self.port) && server_pid(self.port) == self.pid() {
                return Ok(());
            }
            let child = self.child.as_mut().expect("child");
            if let Ok(Some(_status)) = child.try_wait() {
                self.child = None;
                return Err(SpawnError::Exited(self.log()));
            }
            if Instant::now() > deadline {
                self.kill();
                return Err(SpawnError::Timeout(self.log()));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// A new client connection (RESP2).
    pub fn conn(&self) -> redis::Connection {
        self.conn_db(0)
    }

    /// A new client connection (RESP2) with database `db` selected.
    pub fn conn_db(&self, db: i64) -> redis::Connection {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/{db}", self.port))
            .expect("redis client");
        client
            .get_connection_with_timeout(Duration::from_secs(10))
            .expect("connect to redis-server")
    }

    /// A new client connection speaking RESP3 (`HELLO 3`).
    pub fn conn_resp3(&self) -> redis::Connection {
        let client =
            redis::Client::open(format!("redis://127.0.0.1:{}/?protocol=resp3", self.port))
                .expect("redis client");
        client
            .get_connection_with_timeout(Duration::from_secs(10))
            .expect("connect to redis-server")
    }

    /// Kill the server with SIGKILL (its own pid only) and reap it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Start the server again on the same port and directory (after `kill`
    /// or `shutdown`): it reloads its RDB / AOF from the directory.
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "server still running");
        let mut last = String::new();
        for _attempt in 0..20 {
            match self.spawn() {
                Ok(()) => return,
                Err(SpawnError::Exited(log)) => {
                    last = log;
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(SpawnError::Timeout(log)) => {
                    panic!("redis-server did not answer PING after restart; log:\n{log}")
                }
            }
        }
        panic!("redis-server failed to restart; last log:\n{last}");
    }

    /// `SHUTDOWN SAVE` and wait for the process to exit.
    pub fn shutdown_save(&mut self) {
        let mut con = self.conn();
        // The server closes the connection instead of replying.
        let _ = redis::cmd("SHUTDOWN").arg("SAVE").query::<Value>(&mut con);
        let mut child = self.child.take().expect("server not running");
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("redis-server did not exit after SHUTDOWN SAVE");
                }
            }
        }
    }

    /// `SHUTDOWN SAVE`, then start again with the same directory and port,
    /// so the RDB is reloaded.
    pub fn restart(&mut self) {
        self.shutdown_save();
        self.start_again();
    }

    /// Wait until this replica reports `master_link_status:up`.
    pub fn wait_link_up(&self) {
        let mut con = self.conn();
        let deadline = Instant::now() + SYNC_TIMEOUT;
        loop {
            let info = info(&mut con, "replication");
            if info.get("master_link_status").map(String::as_str) == Some("up") {
                return;
            }
            if Instant::now() > deadline {
                panic!("replica link not up: {info:?}\nlog:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The last `n` lines of `log`.
pub fn tail(log: &str, n: usize) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

impl Drop for Server {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "---- redis-server :{} log tail ({}) ----\n{}\n----",
                self.port,
                self.log_path().display(),
                tail(&self.log(), 40)
            );
        }
        self.kill();
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// A server with the module and default settings, and a connection to it.
pub fn start_server() -> (Server, redis::Connection) {
    let s = Server::start(&[]);
    let c = s.conn();
    (s, c)
}

/// PING over a raw socket: true once the server answers +PONG (not -LOADING).
fn ping(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    if s.write_all(b"*1\r\n$4\r\nPING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 64];
    match s.read(&mut buf) {
        Ok(n) => buf[..n].starts_with(b"+PONG"),
        Err(_) => false,
    }
}

/// `process_id` from `INFO server` of whatever answers on `port`.
fn server_pid(port: u16) -> Option<u32> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).ok()?;
    let mut con = client
        .get_connection_with_timeout(Duration::from_secs(2))
        .ok()?;
    let text: String = redis::cmd("INFO").arg("server").query(&mut con).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Wait until `replica` has applied everything `master` has sent.
pub fn sync_replica(master: &Server, replica: &Server) {
    let mut m = master.conn();
    let mut r = replica.conn();
    let deadline = Instant::now() + SYNC_TIMEOUT;
    loop {
        let acked: i64 = redis::cmd("WAIT")
            .arg(1)
            .arg(5000)
            .query(&mut m)
            .expect("WAIT");
        let mo = info(&mut m, "replication");
        let ro = info(&mut r, "replication");
        let master_off = mo.get("master_repl_offset").cloned();
        let replica_off = ro.get("slave_repl_offset").cloned();
        if acked >= 1
            && ro.get("master_link_status").map(String::as_str) == Some("up")
            && master_off.is_some()
            && master_off == replica_off
        {
            return;
        }
        if Instant::now() > deadline {
            panic!("replica did not catch up: master {mo:?} replica {ro:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `INFO <section>` as a map.
pub fn info(con: &mut redis::Connection, section: &str) -> HashMap<String, String> {
    let text: String = redis::cmd("INFO").arg(section).query(con).expect("INFO");
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// An integer field of `INFO <section>`.
pub fn info_int(c: &mut redis::Connection, section: &str, field: &str) -> i64 {
    info(c, section)
        .get(field)
        .unwrap_or_else(|| panic!("INFO {section} has no {field}"))
        .parse()
        .unwrap_or_else(|_| panic!("INFO {field} not an integer"))
}

/// A new connection to the server on `port` (for threads that only have
/// the port).
pub fn connect(port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .expect("redis client")
        .get_connection_with_timeout(Duration::from_secs(10))
        .expect("connect to redis-server")
}
