//! Replies, written straight to the client by `ffi::send`: a map under RESP3,
//! a flat field/value array under RESP2 (Redis converts
//! `RedisModule_ReplyWithMap` for RESP2 clients). A light tree of borrowed
//! keys instead of the wrapper crate's `RedisValue` (a `BTreeMap` with an
//! allocated `String` per key): replies are on every hot path.

use crate::core::{encode_key, JobInfo};

#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    Int(i64),
    Bulk(Vec<u8>),
    /// A simple status such as `OK`.
    Status(&'static str),
    Null,
    /// Fields in alphabetical order.
    Map(Vec<(&'static str, Reply)>),
    Array(Vec<Reply>),
    /// Nothing now: the client is blocked and is answered later.
    Blocked,
}

#[derive(Default)]
pub struct Fields(Vec<(&'static str, Reply)>);

impl Fields {
    pub fn new() -> Self {
        Fields(Vec::with_capacity(12))
    }

    pub fn value(mut self, k: &'static str, v: Reply) -> Self {
        self.0.push((k, v));
        self
    }

    pub fn int(self, k: &'static str, v: i64) -> Self {
        self.value(k, Reply::Int(v))
    }

    pub fn str(self, k: &'static str, v: impl Into<String>) -> Self {
        self.value(k, Reply::Bulk(v.into().into_bytes()))
    }

    pub fn opt_str(self, k: &'static str, v: Option<&str>) -> Self {
        let v = match v {
            Some(s) => Reply::Bulk(s.as_bytes().to_vec()),
            None => Reply::Null,
        };
        self.value(k, v)
    }

    pub fn bytes(self, k: &'static str, v: Vec<u8>) -> Self {
        self.value(k, Reply::Bulk(v))
    }

    pub fn build(mut self) -> Reply {
        self.0.sort_unstable_by_key(|(k, _)| *k);
        Reply::Map(self.0)
    }
}

/// The job reply of docs/commands.md.
pub fn job(info: &JobInfo<'_>) -> Fields {
    Fields::new()
        .str("key", encode_key(&info.key))
        .opt_str("collation", info.collation.as_deref())
        .int("immediate", info.immediate as i64)
        .int("nonce", info.nonce as i64)
        .int("created_at", info.created_at)
        .int("release_at", info.release_at)
        .int("attempts", info.attempts as i64)
        .bytes("payload", info.payload.to_vec())
}
