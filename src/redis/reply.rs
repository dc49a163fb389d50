//! Job replies: a map under RESP3, a flat field/value array under RESP2
//! (Redis converts `RedisModule_ReplyWithMap` for RESP2 clients).

use std::collections::BTreeMap;

use redis_module::redisvalue::RedisValueKey;
use redis_module::RedisValue;

use crate::core::{encode_key, JobInfo};

#[derive(Default)]
pub struct Fields(BTreeMap<RedisValueKey, RedisValue>);

impl Fields {
    pub fn new() -> Self {
        Fields(BTreeMap::new())
    }

    pub fn int(mut self, k: &str, v: i64) -> Self {
        self.0
            .insert(RedisValueKey::String(k.into()), RedisValue::Integer(v));
        self
    }

    pub fn str(mut self, k: &str, v: impl Into<String>) -> Self {
        self.0.insert(
            RedisValueKey::String(k.into()),
            RedisValue::BulkString(v.into()),
        );
        self
    }

    pub fn opt_str(mut self, k: &str, v: Option<&str>) -> Self {
        let v = match v {
            Some(s) => RedisValue::BulkString(s.to_string()),
            None => RedisValue::Null,
        };
        self.0.insert(RedisValueKey::String(k.into()), v);
        self
    }

    pub fn bytes(mut self, k: &str, v: Vec<u8>) -> Self {
        self.0
            .insert(RedisValueKey::String(k.into()), RedisValue::StringBuffer(v));
        self
    }

    pub fn value(mut self, k: &str, v: RedisValue) -> Self {
        self.0.insert(RedisValueKey::String(k.into()), v);
        self
    }

    pub fn build(self) -> RedisValue {
        RedisValue::OrderedMap(self.0)
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
