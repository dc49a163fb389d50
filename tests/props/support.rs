//! What both property suites share: job names behind their keys (for
//! readable failures), configs, owned views of what the core reports, and
//! `ensure!` (a check that returns the failure instead of panicking, so the
//! harness can print the seed and the operations that led to it).

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;

use orca::core::config::orca_key;
use orca::core::{encode_key, JobConfig, JobInfo, JobKey, Queue};

thread_local! {
    static NAMES: RefCell<HashMap<JobKey, String>> = RefCell::new(HashMap::new());
}

/// The job key of `name` (response_url ""), remembered for messages.
pub fn k(name: &str) -> JobKey {
    key_with_url(name, "")
}

pub fn key_with_url(name: &str, url: &str) -> JobKey {
    let key = orca_key(name, url);
    NAMES.with(|n| n.borrow_mut().insert(key, name.to_string()));
    key
}

pub fn kname(key: &JobKey) -> String {
    NAMES
        .with(|n| n.borrow().get(key).cloned())
        .unwrap_or_else(|| encode_key(key))
}

pub fn names(keys: &[JobKey]) -> Vec<String> {
    keys.iter().map(kname).collect()
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub fn cfg(name: &str, coll: Option<&str>, priority: i64) -> JobConfig {
    JobConfig {
        job_key: k(name),
        collation: coll.map(str::to_string),
        priority,
        gate: None,
    }
}

#[derive(Clone, PartialEq, Eq)]
pub struct Info {
    pub key: JobKey,
    pub collation: Option<String>,
    pub immediate: bool,
    pub nonce: u64,
    pub created_at: i64,
    pub release_at: i64,
    pub attempts: u32,
    pub payload: Vec<u8>,
}

impl fmt::Debug for Info {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{{{} coll={:?} imm={} nonce={} created={} release={} attempts={} payload={:?}}}",
            kname(&self.key),
            self.collation,
            self.immediate,
            self.nonce,
            self.created_at,
            self.release_at,
            self.attempts,
            String::from_utf8_lossy(&self.payload)
        )
    }
}

pub fn conv(j: &JobInfo<'_>) -> Info {
    Info {
        key: j.key,
        collation: j.collation.as_deref().map(str::to_string),
        immediate: j.immediate,
        nonce: j.nonce,
        created_at: j.created_at,
        release_at: j.release_at,
        attempts: j.attempts,
        payload: j.payload.to_vec(),
    }
}

pub fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

pub fn order_of(q: &Queue) -> Vec<String> {
    names(&q.pop_order())
}

pub fn err<T>(msg: String) -> Result<T, String> {
    Err(msg)
}

macro_rules! ensure {
    ($cond:expr, $($arg:tt)*) => {
        if !$cond {
            return err(format!($($arg)*));
        }
    };
}

pub(crate) use ensure;

/// The message of a caught panic (`catch_unwind`'s payload).
pub fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// The seeds every random test runs by default (`ORCA_PROP_SEED` runs one).
pub const SEEDS: [u64; 20] = [
    1,
    2,
    3,
    4,
    5,
    6,
    7,
    8,
    42,
    1337,
    0xDEAD_BEEF,
    0xC0FF_EE00,
    123_456_789,
    987_654_321,
    31_337,
    2024,
    77,
    0x5EED_0000_0001,
    0xFFFF_FFFF_FFFF_FFFF,
    0x0123_4567_89AB_CDEF,
];
