//! Every Redis call the dashboard makes lives in this module (and its
//! `policy` part: gates, settings, listings by state), so a change of the
//! module's commands is a change here only.
//!
//! Each function is one command (or, for the sampler, one pipeline of
//! read-only commands); each action is exactly one module command, so it is
//! atomic on the server.

pub mod job;
mod policy;
pub mod refusal;
pub mod value;

use std::time::{Duration, Instant};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, Cmd, ErrorKind, ProtocolVersion, RedisError};
use tokio::sync::Mutex;

pub use job::{looks_like_orca_key, metadata_matches, orca_key, Job};
pub use policy::JobState;
pub use refusal::Refusal;
pub use value::{Fields, Val};

/// How long connecting to Redis (and its handshake) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long one reply may take (`ORCA.STATS` of a million jobs took up to
/// 3 s on a busy machine).
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);

/// Did a command fail before it was sent? The connection manager fails
/// every command awaiting a connection that could not be made with
/// "Reconnecting failed" (and starts a new attempt).
fn not_sent(e: &RedisError) -> bool {
    e.is_connection_refusal() || e.to_string().contains("Reconnecting failed")
}

/// Is a failed command worth sending once more on a fresh connection?
fn retry(e: &RedisError, read: bool) -> bool {
    not_sent(e) || (read && e.is_connection_dropped())
}

/// How long a learned maximum LIMIT is trusted.
const LIMIT_MEMORY: Duration = Duration::from_secs(600);

/// Payload bytes one listing command is sized to bring back (`run_listing`).
const LISTING_BUDGET: usize = 4 << 20;
/// Jobs the first command of a listing asks for.
const FIRST_CHUNK: u64 = 4;
/// An offset past the end of any queue (the module's times and counts stay
/// under 2^53).
const MAX_OFFSET: u64 = (1 << 53) - 1;

/// The Redis type name the module registers (docs/commands.md, "Key operations").
pub const QUEUE_TYPE: &str = "orcaqueue";

/// Why a call failed, in terms a page can explain.
#[derive(Clone, Debug)]
pub enum OrcaError {
    /// Redis cannot be reached (or timed out).
    Unavailable(String),
    /// The Redis user may not run this command (ACL).
    NoPerm(String),
    /// The module refused the command: bad input, no such job... (its
    /// code decides, docs/commands.md "Error codes").
    Refused(Refusal),
    /// The reply was not what the module documents.
    Protocol(String),
}

impl std::fmt::Display for OrcaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OrcaError::Unavailable(m) => write!(f, "Redis is unavailable: {m}"),
            OrcaError::NoPerm(m) => write!(f, "not permitted for this Redis user: {m}"),
            OrcaError::Refused(m) => write!(f, "{m}"),
            OrcaError::Protocol(m) => write!(f, "unexpected reply from Redis: {m}"),
        }
    }
}

impl From<RedisError> for OrcaError {
    fn from(e: RedisError) -> Self {
        if e.is_io_error()
            || e.is_timeout()
            || e.is_connection_dropped()
            || e.is_connection_refusal()
            || matches!(e.kind(), ErrorKind::AuthenticationFailed)
        {
            return OrcaError::Unavailable(e.to_string());
        }
        match (e.code(), e.detail()) {
            (Some("NOPERM"), d) => OrcaError::NoPerm(format!("NOPERM {}", d.unwrap_or_default())),
            (Some(code), d) => OrcaError::Refused(Refusal::new(code, d.unwrap_or_default())),
            _ => OrcaError::Refused(Refusal::new("ERR", &e.to_string())),
        }
    }
}

pub type OrcaResult<T> = Result<T, OrcaError>;

/// Where a MOVE puts a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MoveTo {
    Front,
    Back,
}

/// A lazily connected, auto-reconnecting connection (RESP3).
pub struct Orca {
    client: Client,
    config: ConnectionManagerConfig,
    conn: Mutex<Option<ConnectionManager>>,
    /// The largest `LIMIT` the server takes (`orca.max-pop-count`), once a
    /// listing was refused for it, and when that was learned.
    max_limit: std::sync::Mutex<Option<(u64, Instant)>>,
    /// A `LIMIT` the server took (so no larger maximum need be learned for
    /// it), and when.
    limit_taken: std::sync::Mutex<Option<(u64, Instant)>>,
    /// The URL without its password, for pages and logs.
    pub display_url: String,
}

impl Orca {
    pub fn new(url: &str) -> Result<Orca, String> {
        let mut info: redis::ConnectionInfo = url
            .parse()
            .map_err(|e: RedisError| format!("bad --redis URL: {e}"))?;
        info.redis.protocol = ProtocolVersion::RESP3;
        let display_url = redact_url(url);
        let client = Client::open(info).map_err(|e| format!("bad --redis URL: {e}"))?;
        // Fail fast: a page waits at most a few seconds for a Redis that is
        // down or frozen (pages stop at the first failure). No reconnection
        // retries with back-off (up to seconds) inside the manager: `query`
        // retries once itself.
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(CONNECT_TIMEOUT)
            .set_response_timeout(RESPONSE_TIMEOUT)
            .set_number_of_retries(0);
        Ok(Orca {
            client,
            config,
            conn: Mutex::new(None),
            max_limit: std::sync::Mutex::new(None),
            limit_taken: std::sync::Mutex::new(None),
            display_url,
        })
    }

    async fn conn(&self) -> OrcaResult<ConnectionManager> {
        let mut slot = self.conn.lock().await;
        if let Some(c) = slot.as_ref() {
            return Ok(c.clone());
        }
        let c = ConnectionManager::new_with_config(self.client.clone(), self.config.clone())
            .await
            .map_err(|e| OrcaError::Unavailable(e.to_string()))?;
        *slot = Some(c.clone());
        Ok(c)
    }

    /// Send a command. A connection lost since the last call (Redis
    /// restarted, say) fails the first command sent on it without sending
    /// it: that is retried once, on the fresh connection the manager then
    /// makes. So is a read whose connection dropped while it was under way
    /// (reads may run twice; actions never are).
    async fn query<T: redis::FromRedisValue>(&self, cmd: &Cmd, read: bool) -> OrcaResult<T> {
        let mut c = self.conn().await?;
        match cmd.query_async(&mut c).await {
            Err(e) if retry(&e, read) => {
                tracing::debug!("retrying on a fresh connection after: {e}");
                let mut c = self.conn().await?;
                Ok(cmd.query_async(&mut c).await?)
            }
            other => Ok(other?),
        }
    }

    /// A pipeline of reads, as `query`.
    async fn query_pipe<T: redis::FromRedisValue>(&self, pipe: &redis::Pipeline) -> OrcaResult<T> {
        let mut c = self.conn().await?;
        match pipe.query_async(&mut c).await {
            Err(e) if retry(&e, true) => {
                tracing::debug!("retrying on a fresh connection after: {e}");
                let mut c = self.conn().await?;
                Ok(pipe.query_async(&mut c).await?)
            }
            other => Ok(other?),
        }
    }

    /// A read command (may be sent twice, see `query`).
    async fn run(&self, cmd: &Cmd) -> OrcaResult<Val> {
        let v: redis::Value = self.query(cmd, true).await?;
        Ok(Val::from_redis(v))
    }

    /// An action: sent twice only if the first was never sent.
    async fn act(&self, cmd: &Cmd) -> OrcaResult<Val> {
        let v: redis::Value = self.query(cmd, false).await?;
        Ok(Val::from_redis(v))
    }

    /// The largest `LIMIT` of a listing the server takes, if known: learned
    /// from its refusal (`LIMIT must be between 0 and N`), since the
    /// dashboard's Redis user may not read `CONFIG`. Forgotten after
    /// `LIMIT_MEMORY`, so a raised `orca.max-pop-count` is noticed.
    pub fn max_limit(&self) -> Option<u64> {
        let g = self.max_limit.lock().unwrap_or_else(|e| e.into_inner());
        g.filter(|(_, at)| at.elapsed() < LIMIT_MEMORY)
            .map(|(n, _)| n)
    }

    /// A listing of `limit` jobs from `offset` (`build(offset, limit)` is
    /// one command), each job handed to `each` as soon as its command's
    /// reply is read, so only one command's jobs are held at a time.
    ///
    /// Payloads can be up to `orca.max-payload-bytes` each (4 MiB by
    /// default), so a page is read in commands sized to hold about
    /// `LISTING_BUDGET` of payload: the first asks for `FIRST_CHUNK` jobs,
    /// each next one for as many as the largest payload seen so far lets
    /// fit (a page of small jobs: two commands). A page read in several
    /// commands is not one atomic snapshot: a job that moves in between
    /// may show twice or not at all.
    ///
    /// Each command's LIMIT is kept within the server's: clamped to the
    /// known maximum, and, refused for it, learned and sent once more; a
    /// listing never returns more than that maximum, so it may return
    /// fewer than `limit` jobs even where more exist (callers compare with
    /// `max_limit()`). Returns how many jobs were listed.
    async fn run_listing<F>(
        &self,
        queue: &str,
        offset: u64,
        limit: u64,
        build: impl Fn(u64, u64) -> Cmd,
        what: &str,
        mut each: F,
    ) -> OrcaResult<u64>
    where
        F: FnMut(Job),
    {
        if limit > FIRST_CHUNK {
            self.learn_limit(queue, limit).await?;
        }
        let mut listed = 0u64;
        let mut chunk = FIRST_CHUNK;
        let mut largest = 0usize;
        loop {
            let max = self.max_limit().unwrap_or(u64::MAX);
            let want = limit.min(max).saturating_sub(listed);
            if want == 0 {
                break;
            }
            let asked = chunk.min(want);
            let jobs = match self.run_jobs(&build(offset + listed, asked), what).await {
                Err(OrcaError::Refused(m)) => match m.max_limit() {
                    Some(n) => {
                        *self.max_limit.lock().unwrap_or_else(|e| e.into_inner()) =
                            Some((n, Instant::now()));
                        if n == 0 || asked <= n {
                            return Err(OrcaError::Refused(m));
                        }
                        continue;
                    }
                    None => return Err(OrcaError::Refused(m)),
                },
                other => other?,
            };
            let got = jobs.len() as u64;
            for j in jobs {
                largest = largest.max(j.payload_len);
                each(j);
            }
            listed += got;
            if got < asked {
                break;
            }
            chunk = (LISTING_BUDGET / largest.max(1)).max(1) as u64;
        }
        Ok(listed)
    }

    /// Whether the server takes `LIMIT limit`, learned (once per
    /// `LIMIT_MEMORY`) from one command that lists nothing: the queued
    /// listing from past its end (O(log n)). A page's first command asks
    /// for only a few jobs, so it would not tell; the page must know its
    /// size before it is drawn.
    async fn learn_limit(&self, queue: &str, limit: u64) -> OrcaResult<()> {
        let fresh = |m: &std::sync::Mutex<Option<(u64, Instant)>>| {
            let g = m.lock().unwrap_or_else(|e| e.into_inner());
            g.filter(|(_, at)| at.elapsed() < LIMIT_MEMORY)
                .map(|(n, _)| n)
        };
        if fresh(&self.max_limit).is_some() || fresh(&self.limit_taken).is_some_and(|n| n >= limit)
        {
            return Ok(());
        }
        let past_end = list_cmd(queue, None)(MAX_OFFSET, limit);
        match self.run(&past_end).await {
            Ok(_) => {
                *self.limit_taken.lock().unwrap_or_else(|e| e.into_inner()) =
                    Some((limit, Instant::now()));
                Ok(())
            }
            Err(OrcaError::Refused(m)) => match m.max_limit() {
                Some(n) => {
                    *self.max_limit.lock().unwrap_or_else(|e| e.into_inner()) =
                        Some((n, Instant::now()));
                    Ok(())
                }
                None => Err(OrcaError::Refused(m)),
            },
            Err(e) => Err(e),
        }
    }

    /// `run_listing`, collecting the jobs without their payloads.
    async fn listing(
        &self,
        queue: &str,
        offset: u64,
        limit: u64,
        build: impl Fn(u64, u64) -> Cmd,
        what: &str,
    ) -> OrcaResult<Vec<Job>> {
        let mut out = Vec::new();
        self.run_listing(queue, offset, limit, build, what, |j| {
            out.push(j.drop_payload())
        })
        .await?;
        Ok(out)
    }

    async fn run_fields(&self, cmd: &Cmd, what: &str) -> OrcaResult<Fields> {
        match self.run(cmd).await? {
            Val::Map(f) => Ok(f),
            other => Err(OrcaError::Protocol(format!("{what}: {other:?}"))),
        }
    }

    async fn run_jobs(&self, cmd: &Cmd, what: &str) -> OrcaResult<Vec<Job>> {
        let arr = self
            .run(cmd)
            .await?
            .into_array()
            .ok_or_else(|| OrcaError::Protocol(format!("{what}: not an array")))?;
        arr.into_iter()
            .map(|v| Job::from_val(v).ok_or_else(|| OrcaError::Protocol(format!("{what}: job"))))
            .collect()
    }

    /// The server's clock (ms): waits are measured against it, as the module does.
    pub async fn time_ms(&self) -> OrcaResult<i64> {
        match self.run(&redis::cmd("TIME")).await? {
            Val::Array(a) if a.len() == 2 => {
                let s = a[0].as_int().unwrap_or(0);
                let us = a[1].as_int().unwrap_or(0);
                Ok(s * 1000 + us / 1000)
            }
            other => Err(OrcaError::Protocol(format!("TIME: {other:?}"))),
        }
    }

    /// Every queue in the database: `SCAN ... TYPE orcaqueue`, incrementally
    /// (COUNT 1000 per call), stopping at `max` names. Names that are not
    /// UTF-8 are counted but not returned (they cannot be linked).
    pub async fn scan_queues(&self, max: usize) -> OrcaResult<(Vec<String>, usize)> {
        let mut cursor: u64 = 0;
        let mut names = Vec::new();
        let mut skipped = 0;
        loop {
            let mut cmd = redis::cmd("SCAN");
            cmd.arg(cursor)
                .arg("COUNT")
                .arg(1000)
                .arg("TYPE")
                .arg(QUEUE_TYPE);
            let (next, batch): (u64, Vec<Vec<u8>>) = self.query(&cmd, true).await?;
            for b in batch {
                match String::from_utf8(b) {
                    Ok(s) => names.push(s),
                    Err(_) => skipped += 1,
                }
            }
            cursor = next;
            if cursor == 0 || names.len() >= max {
                break;
            }
        }
        names.sort();
        names.dedup();
        names.truncate(max);
        Ok((names, skipped))
    }

    /// `TYPE <key>`: "orcaqueue", "none" or another type.
    pub async fn key_type(&self, queue: &str) -> OrcaResult<String> {
        Ok(self.run(redis::cmd("TYPE").arg(queue)).await?.to_text())
    }

    /// `ORCA.STATS` (O(n): callers go through the stats cache).
    pub async fn stats(&self, queue: &str) -> OrcaResult<Fields> {
        self.run_fields(redis::cmd("ORCA.STATS").arg(queue), "ORCA.STATS")
            .await
    }

    pub async fn len(&self, queue: &str) -> OrcaResult<i64> {
        self.run(redis::cmd("ORCA.LEN").arg(queue))
            .await?
            .as_int()
            .ok_or_else(|| OrcaError::Protocol("ORCA.LEN".into()))
    }

    /// `ORCA.LIST <q> OFFSET o LIMIT l [FILTER field value]`: the jobs,
    /// without their payloads (`run_listing`).
    pub async fn list(
        &self,
        queue: &str,
        offset: u64,
        limit: u64,
        filter: Option<(&str, &str)>,
    ) -> OrcaResult<Vec<Job>> {
        self.listing(queue, offset, limit, list_cmd(queue, filter), "ORCA.LIST")
            .await
    }

    /// `ORCA.LIST <q> OFFSET o LIMIT l`, each job (payload included) handed
    /// to `each` as it arrives; how many were listed.
    pub async fn list_each(
        &self,
        queue: &str,
        offset: u64,
        limit: u64,
        each: impl FnMut(Job),
    ) -> OrcaResult<u64> {
        self.run_listing(
            queue,
            offset,
            limit,
            list_cmd(queue, None),
            "ORCA.LIST",
            each,
        )
        .await
    }

    /// `ORCA.STATUS <q> <key>`: None if the key is in no state.
    pub async fn status(&self, queue: &str, key: &str) -> OrcaResult<Option<Job>> {
        match self
            .run(redis::cmd("ORCA.STATUS").arg(queue).arg(key))
            .await?
        {
            Val::Nil => Ok(None),
            v => Job::from_val(v)
                .map(Some)
                .ok_or_else(|| OrcaError::Protocol("ORCA.STATUS".into())),
        }
    }

    /// The payload of `ORCA.STATUS <q> <key>` as its bytes, exactly as
    /// stored (a config may hold invalid UTF-8 in fields the queue does not
    /// read): for the download.
    pub async fn payload(&self, queue: &str, key: &str) -> OrcaResult<Option<Vec<u8>>> {
        let v: redis::Value = self
            .query(redis::cmd("ORCA.STATUS").arg(queue).arg(key), true)
            .await?;
        let redis::Value::Map(fields) = v else {
            return Ok(None);
        };
        let is_payload = |k: &redis::Value| match k {
            redis::Value::BulkString(b) => b == b"payload",
            redis::Value::SimpleString(s) => s == "payload",
            _ => false,
        };
        Ok(fields
            .into_iter()
            .find(|(k, _)| is_payload(k))
            .and_then(|(_, v)| match v {
                redis::Value::BulkString(b) => Some(b),
                _ => None,
            }))
    }

    /// `ORCA.RESULT <q> <key>`: the kept result, if any, as its bytes (a
    /// result is any string a worker sent, binary too).
    pub async fn result(&self, queue: &str, key: &str) -> OrcaResult<Option<Vec<u8>>> {
        let v: redis::Value = self
            .query(redis::cmd("ORCA.RESULT").arg(queue).arg(key), true)
            .await?;
        match v {
            redis::Value::Nil => Ok(None),
            redis::Value::BulkString(b) => Ok(Some(b)),
            redis::Value::SimpleString(s) => Ok(Some(s.into_bytes())),
            redis::Value::VerbatimString { text, .. } => Ok(Some(text.into_bytes())),
            other => Err(OrcaError::Protocol(format!("ORCA.RESULT: {other:?}"))),
        }
    }

    /// The queue's settings, fresh: `ORCA.SETTINGS <q>` (O(1), but a write
    /// command: refused on replicas and to read-only users, who read the
    /// `settings` map of `ORCA.STATS` instead).
    pub async fn settings(&self, queue: &str) -> OrcaResult<Fields> {
        self.run_fields(redis::cmd("ORCA.SETTINGS").arg(queue), "ORCA.SETTINGS")
            .await
    }

    /// The module's server-wide settings: `CONFIG GET orca.*` (needs the
    /// CONFIG command; pages show why when it is refused).
    pub async fn module_config(&self) -> OrcaResult<Fields> {
        let v = self
            .run(redis::cmd("CONFIG").arg("GET").arg("orca.*"))
            .await?;
        let mut f = match v {
            Val::Map(f) => f,
            Val::Array(a) => {
                let mut f = Fields::default();
                let mut it = a.into_iter();
                while let (Some(k), Some(v)) = (it.next(), it.next()) {
                    f.0.push((k.to_text(), v));
                }
                f
            }
            other => return Err(OrcaError::Protocol(format!("CONFIG GET: {other:?}"))),
        };
        f.0.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(f)
    }

    // ---- actions: each exactly one module command ----

    /// `ORCA.MOVE <q> <key> RELEASE|DELAY`.
    pub async fn move_job(&self, queue: &str, key: &str, to: MoveTo) -> OrcaResult<Fields> {
        let how = match to {
            MoveTo::Front => "RELEASE",
            MoveTo::Back => "DELAY",
        };
        match self
            .act(redis::cmd("ORCA.MOVE").arg(queue).arg(key).arg(how))
            .await?
        {
            Val::Map(f) => Ok(f),
            other => Err(OrcaError::Protocol(format!("ORCA.MOVE: {other:?}"))),
        }
    }

    /// `ORCA.DELETE <q> <key>`: true if anything was removed.
    pub async fn delete(&self, queue: &str, key: &str) -> OrcaResult<bool> {
        Ok(self
            .act(redis::cmd("ORCA.DELETE").arg(queue).arg(key))
            .await?
            .as_int()
            == Some(1))
    }

    /// `ORCA.DEAD <q> REQUEUE <key>`.
    pub async fn dead_requeue(&self, queue: &str, key: &str) -> OrcaResult<()> {
        self.act(redis::cmd("ORCA.DEAD").arg(queue).arg("REQUEUE").arg(key))
            .await
            .map(|_| ())
    }

    /// `ORCA.DEAD <q> PURGE`: how many dead letters were forgotten.
    pub async fn dead_purge(&self, queue: &str) -> OrcaResult<i64> {
        self.act(redis::cmd("ORCA.DEAD").arg(queue).arg("PURGE"))
            .await?
            .as_int()
            .ok_or_else(|| OrcaError::Protocol("ORCA.DEAD PURGE".into()))
    }

    /// For the sampler: `ORCA.LEN` and the front job (`ORCA.LIST LIMIT 1`) of
    /// each queue, in one pipeline. O(log n) per queue.
    pub async fn fronts(&self, queues: &[String]) -> OrcaResult<Vec<(i64, Option<Job>)>> {
        if queues.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for q in queues {
            pipe.cmd("ORCA.LEN").arg(q);
            pipe.cmd("ORCA.LIST").arg(q).arg("LIMIT").arg(1);
        }
        let replies: Vec<redis::Value> = self.query_pipe(&pipe).await?;
        let mut out = Vec::with_capacity(queues.len());
        let mut it = replies.into_iter().map(Val::from_redis);
        while let (Some(len), Some(list)) = (it.next(), it.next()) {
            let front = list
                .into_array()
                .and_then(|a| a.into_iter().next())
                .and_then(Job::from_val)
                .map(Job::drop_payload);
            out.push((len.as_int().unwrap_or(0), front));
        }
        Ok(out)
    }
}

/// `ORCA.LIST <q> OFFSET o LIMIT l [FILTER field value]`.
fn list_cmd<'a>(
    queue: &'a str,
    filter: Option<(&'a str, &'a str)>,
) -> impl Fn(u64, u64) -> Cmd + 'a {
    move |offset, limit| {
        let mut cmd = redis::cmd("ORCA.LIST");
        cmd.arg(queue)
            .arg("OFFSET")
            .arg(offset)
            .arg("LIMIT")
            .arg(limit);
        if let Some((f, v)) = filter {
            cmd.arg("FILTER").arg(f).arg(v);
        }
        cmd
    }
}

/// The `--redis` URL for pages and logs: every password the redis crate
/// would read replaced by `***` (the user info's password, and the `pass`
/// and `password` query parameters, however their names are
/// percent-encoded). A URL that does not parse is not shown at all.
fn redact_url(raw: &str) -> String {
    const HIDDEN: &str = "***";
    let Ok(mut u) = url::Url::parse(raw) else {
        return "(the --redis URL, which does not parse)".to_string();
    };
    if u.password().is_some() {
        // cannot fail: the URL has a password, so it has user info
        let _ = u.set_password(Some(HIDDEN));
    }
    if u.query().is_some() {
        let pairs: Vec<(String, String)> = u
            .query_pairs()
            .map(|(k, v)| {
                let secret = matches!(k.to_ascii_lowercase().as_str(), "pass" | "password");
                (
                    k.into_owned(),
                    if secret {
                        HIDDEN.to_string()
                    } else {
                        v.into_owned()
                    },
                )
            })
            .collect();
        u.query_pairs_mut().clear().extend_pairs(pairs);
    }
    // nothing the redis crate reads as a password is left
    debug_assert!(u
        .query_pairs()
        .all(|(k, v)| !matches!(&*k, "pass" | "password") || v == HIDDEN));
    u.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact_url("redis://viewer:pw@127.0.0.1:6379/0"),
            "redis://viewer:***@127.0.0.1:6379/0"
        );
        assert_eq!(
            redact_url("redis://:pw@127.0.0.1:6379"),
            "redis://:***@127.0.0.1:6379"
        );
        assert_eq!(
            redact_url("redis://127.0.0.1:6379"),
            "redis://127.0.0.1:6379"
        );
        // every form the redis crate reads a password from
        for (url, shown) in [
            (
                "redis+unix:///tmp/s.sock?pass=SECRET&user=bob",
                "redis+unix:///tmp/s.sock?pass=***&user=bob",
            ),
            (
                "unix:///tmp/s.sock?user=bob&p%61ss=SECRET&db=2",
                "unix:///tmp/s.sock?user=bob&pass=***&db=2",
            ),
            (
                "redis://127.0.0.1:6379/?password=SECRET&protocol=resp3",
                "redis://127.0.0.1:6379/?password=***&protocol=resp3",
            ),
            (
                "redis://bob:SECRET@127.0.0.1/?pass=SECRET&pass=SECRET2",
                "redis://bob:***@127.0.0.1/?pass=***&pass=***",
            ),
            (
                "redis://:S%40CRET@127.0.0.1:6379",
                "redis://:***@127.0.0.1:6379",
            ),
            ("redis://b%40b:SECRET@host", "redis://b%40b:***@host"),
        ] {
            assert_eq!(redact_url(url), shown, "{url}");
            // and the redis crate reads the same password from it
            if let Ok(info) = url.parse::<redis::ConnectionInfo>() {
                if let Some(pw) = info.redis.password {
                    assert!(!redact_url(url).contains(&pw), "{url}");
                }
            }
        }
        let hidden = redact_url("not a url SECRET");
        assert!(!hidden.contains("SECRET"), "{hidden}");
    }
}
