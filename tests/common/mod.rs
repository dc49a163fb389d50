//! Test harness for the integration tests: real `redis-server` processes with
//! the built module loaded, plus small helpers to talk to them.
//!
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

#![allow(dead_code)]

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redis::{ConnectionLike, Value};

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

fn redis_server_bin() -> String {
    std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_string())
}

fn free_port() -> u16 {
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
        let client =
            redis::Client::open(format!("redis://127.0.0.1:{}/", self.port)).expect("redis client");
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

impl Drop for Server {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = self.log();
            let lines: Vec<&str> = log.lines().collect();
            let tail = &lines[lines.len().saturating_sub(40)..];
            eprintln!(
                "---- redis-server :{} log tail ({}) ----\n{}\n----",
                self.port,
                self.log_path().display(),
                tail.join("\n")
            );
        }
        self.kill();
        let _ = fs::remove_dir_all(&self.dir);
    }
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

// ---------------------------------------------------------------------------
// Command helpers
// ---------------------------------------------------------------------------

/// Anything usable as a command argument.
pub trait Arg {
    fn bytes(&self) -> Vec<u8>;
}
impl Arg for &str {
    fn bytes(&self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }
}
impl Arg for String {
    fn bytes(&self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }
}
impl Arg for &String {
    fn bytes(&self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }
}
impl Arg for &[u8] {
    fn bytes(&self) -> Vec<u8> {
        self.to_vec()
    }
}
impl Arg for Vec<u8> {
    fn bytes(&self) -> Vec<u8> {
        self.clone()
    }
}
macro_rules! int_arg {
    ($($t:ty),*) => {$(
        impl Arg for $t {
            fn bytes(&self) -> Vec<u8> {
                self.to_string().into_bytes()
            }
        }
    )*};
}
int_arg!(i32, i64, u64, usize);

#[macro_export]
macro_rules! args {
    ($($a:expr),* $(,)?) => {
        Vec::<Vec<u8>>::from([$($crate::common::Arg::bytes(&$a)),*])
    };
}

/// Run a command and return the raw reply; an error reply comes back as
/// `Value::ServerError`, not as `Err`. I/O failures panic.
pub fn raw(con: &mut redis::Connection, args: &[Vec<u8>]) -> Value {
    let mut c = redis::Cmd::new();
    for a in args {
        c.arg(a.as_slice());
    }
    con.req_command(&c).unwrap_or_else(|e| {
        panic!("I/O error running {}: {e}", show_args(args));
    })
}

pub fn show_args(args: &[Vec<u8>]) -> String {
    args.iter()
        .map(|a| {
            let s = String::from_utf8_lossy(a);
            if s.len() > 80 {
                format!(
                    "{:?}...",
                    &s[..s.char_indices().nth(80).map(|x| x.0).unwrap_or(s.len())]
                )
            } else {
                format!("{s:?}")
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The full text of an error reply ("ERR ...", "WRONGTYPE ..."), if it is one.
pub fn error_text(v: &Value) -> Option<String> {
    match v {
        Value::ServerError(e) => Some(match e.details() {
            Some(d) => format!("{} {}", e.code(), d),
            None => e.code().to_string(),
        }),
        _ => None,
    }
}

/// Run a command that must succeed.
pub fn ok(con: &mut redis::Connection, args: &[Vec<u8>]) -> Value {
    let v = raw(con, args);
    if let Some(e) = error_text(&v) {
        panic!("{} failed: {e}", show_args(args));
    }
    v
}

/// Run a command that must fail; returns the error text.
pub fn fails(con: &mut redis::Connection, args: &[Vec<u8>]) -> String {
    let v = raw(con, args);
    error_text(&v).unwrap_or_else(|| panic!("{} should fail, got {v:?}", show_args(args)))
}

pub fn as_int(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        other => panic!("expected an integer, got {other:?}"),
    }
}

pub fn as_string(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).expect("utf-8"),
        Value::SimpleString(s) => s.clone(),
        Value::Okay => "OK".to_string(),
        Value::VerbatimString { text, .. } => text.clone(),
        other => panic!("expected a string, got {other:?}"),
    }
}

pub fn as_bytes(v: &Value) -> Vec<u8> {
    match v {
        Value::BulkString(b) => b.clone(),
        Value::SimpleString(s) => s.as_bytes().to_vec(),
        other => panic!("expected bytes, got {other:?}"),
    }
}

/// A job reply or any other flat field/value reply (RESP2) or map (RESP3).
pub type Fields = HashMap<String, Value>;

pub fn fields(v: Value) -> Fields {
    let pairs: Vec<(Value, Value)> = match v {
        Value::Array(items) => {
            assert!(items.len() % 2 == 0, "odd field/value array: {items:?}");
            let mut it = items.into_iter();
            let mut out = Vec::new();
            while let (Some(k), Some(v)) = (it.next(), it.next()) {
                out.push((k, v));
            }
            out
        }
        Value::Map(m) => m,
        other => panic!("expected a field/value reply, got {other:?}"),
    };
    let mut map = HashMap::new();
    for (k, v) in pairs {
        let k = as_string(&k);
        assert!(map.insert(k.clone(), v).is_none(), "field {k} twice");
    }
    map
}

pub fn get<'a>(f: &'a Fields, name: &str) -> &'a Value {
    f.get(name)
        .unwrap_or_else(|| panic!("reply has no field {name:?}: {f:?}"))
}

pub fn int(f: &Fields, name: &str) -> i64 {
    as_int(get(f, name))
}

pub fn text(f: &Fields, name: &str) -> String {
    as_string(get(f, name))
}

/// A field that is a string or nil.
pub fn opt_text(f: &Fields, name: &str) -> Option<String> {
    match get(f, name) {
        Value::Nil => None,
        v => Some(as_string(v)),
    }
}

/// `DEBUG DIGEST-VALUE <key>` as hex text.
pub fn digest(con: &mut redis::Connection, key: &str) -> String {
    match ok(con, &args!["DEBUG", "DIGEST-VALUE", key]) {
        Value::Array(items) if items.len() == 1 => as_string(&items[0]),
        other => panic!("unexpected DIGEST-VALUE reply {other:?}"),
    }
}

/// `ORCA.LEN <key>`.
pub fn qlen(con: &mut redis::Connection, key: &str) -> i64 {
    as_int(&ok(con, &args!["ORCA.LEN", key]))
}

/// `ORCA.CHECK <key>` must answer OK.
pub fn assert_check(con: &mut redis::Connection, key: &str) {
    let v = raw(con, &args!["ORCA.CHECK", key]);
    assert!(
        matches!(&v, Value::Okay) || matches!(&v, Value::SimpleString(s) if s == "OK"),
        "ORCA.CHECK {key}: {v:?}"
    );
}

/// `ORCA.POP ... LEASE 0` (seed 000's pop: the job leaves) until nil; the
/// replies in order.
pub fn pop_all(con: &mut redis::Connection, key: &str) -> Vec<Fields> {
    let mut out = Vec::new();
    loop {
        match ok(con, &args!["ORCA.POP", key, "LEASE", "0"]) {
            Value::Nil => return out,
            v => out.push(fields(v)),
        }
        assert!(out.len() < 1_000_000, "ORCA.POP never returns nil");
    }
}

// ---------------------------------------------------------------------------
// Job configs and keys
// ---------------------------------------------------------------------------

/// The orca key of a config: base64(sha256(key + response_url)).
pub fn orca_key(key: &str, response_url: &str) -> String {
    use base64::Engine;
    use sha2::Digest;
    let mut h = sha2::Sha256::new();
    h.update(key.as_bytes());
    h.update(response_url.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(h.finalize())
}

/// A job config: `key`, `response_url` = "http://cb/<key>", optional
/// collation (`"user.7"` -> `{"type":"user","id":"7"}`), priority (ms).
pub fn config(key: &str, collation: Option<&str>, priority: i64) -> String {
    let coll = match collation {
        None => String::new(),
        Some(c) => {
            let (t, id) = c.split_once('.').expect("collation as type.id");
            format!(r#","collation":{{"type":"{t}","id":"{id}"}}"#)
        }
    };
    format!(
        r#"{{"key":"{key}","response_url":"http://cb/{key}"{coll},"priority":{priority},"script":["make","test"]}}"#
    )
}

/// The orca key of a `config(key, ..)`.
pub fn key_of(key: &str) -> String {
    orca_key(key, &format!("http://cb/{key}"))
}

// ---------------------------------------------------------------------------
// Deterministic PRNG
// ---------------------------------------------------------------------------

/// xorshift64*, seeded through splitmix64.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        Rng(if z == 0 { 1 } else { z })
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in 0..n (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}
