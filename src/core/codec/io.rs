//! The bytes of the encoding: little-endian integers, length-prefixed
//! byte strings, and the fields every unit kind shares (a job, a
//! reservation, a parked job, names), read back with every length bounded
//! by what is left and every value checked against its range.

use super::{corrupt, ENCODING_V3, MAX_GATE_NAME};
use crate::core::config::{valid_collation_name, JobKey};
use crate::core::error::QueueError;
use crate::core::limits::{valid_time, SEQ_LOAD_LIMIT};
use crate::core::reservation::ResKey;
use crate::core::work::Parked;

pub(super) struct Writer(pub Vec<u8>);

impl Writer {
    pub fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    pub fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    pub fn optional_name(&mut self, name: Option<&str>) {
        match name {
            Some(c) => {
                self.u8(1);
                self.bytes(c.as_bytes());
            }
            None => self.u8(0),
        }
    }
    pub fn optional_bytes(&mut self, b: Option<&[u8]>) {
        match b {
            Some(b) => {
                self.u8(1);
                self.bytes(b);
            }
            None => self.u8(0),
        }
    }
    pub fn parked(&mut self, p: &Parked, collation: Option<&str>) {
        self.i64(p.created_at);
        self.u32(p.attempts);
        self.u8(p.immediate as u8);
        self.optional_name(collation);
        self.bytes(&p.payload);
    }
    pub fn job(&mut self, key: &JobKey, created_at: i64, attempts: u32, payload: &[u8]) {
        self.0.extend_from_slice(key);
        self.i64(created_at);
        self.u32(attempts);
        self.bytes(payload);
    }
}

/// A parked job as read: created_at, attempts, immediate, collation, payload.
pub(super) type RawParked<'a> = (i64, u32, bool, Option<&'a str>, &'a [u8]);

pub(super) struct Reader<'a> {
    pub buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], QueueError> {
        if n > self.buf.len() {
            return Err(corrupt("truncated"));
        }
        let (a, b) = self.buf.split_at(n);
        self.buf = b;
        Ok(a)
    }
    pub fn u8(&mut self) -> Result<u8, QueueError> {
        Ok(self.take(1)?[0])
    }
    pub fn u32(&mut self) -> Result<u32, QueueError> {
        let mut a = [0u8; 4];
        a.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(a))
    }
    pub fn i64(&mut self) -> Result<i64, QueueError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(i64::from_le_bytes(a))
    }
    pub fn u64(&mut self) -> Result<u64, QueueError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
    pub fn bytes(&mut self) -> Result<&'a [u8], QueueError> {
        let n = self.u64()?;
        let n = usize::try_from(n).map_err(|_| corrupt("length too large"))?;
        self.take(n)
    }
    pub fn flag(&mut self, what: &str) -> Result<bool, QueueError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(QueueError::Corrupt(format!("bad {what} flag"))),
        }
    }
    pub fn key(&mut self) -> Result<JobKey, QueueError> {
        let mut k = [0u8; 32];
        k.copy_from_slice(self.take(32)?);
        Ok(k)
    }
    pub fn res(&mut self) -> Result<(ResKey, u64), QueueError> {
        let score = self.i64()?;
        let tie = self.i64()?;
        let nonce = self.u64()?;
        if !valid_time(score) {
            return Err(corrupt("reservation score out of range"));
        }
        if tie == 0
            || nonce == 0
            || nonce >= SEQ_LOAD_LIMIT as u64
            || !(-SEQ_LOAD_LIMIT..SEQ_LOAD_LIMIT).contains(&tie)
        {
            return Err(corrupt("reservation tie or nonce out of range"));
        }
        Ok((ResKey { score, tie }, nonce))
    }
    pub fn job(&mut self) -> Result<(JobKey, i64, u32, &'a [u8]), QueueError> {
        let key = self.key()?;
        let created_at = self.i64()?;
        if !valid_time(created_at) {
            return Err(corrupt("created_at out of range"));
        }
        let attempts = self.u32()?;
        let payload = self.bytes()?;
        Ok((key, created_at, attempts, payload))
    }
    pub fn time(&mut self) -> Result<i64, QueueError> {
        let t = self.i64()?;
        if !valid_time(t) {
            return Err(corrupt("time out of range"));
        }
        Ok(t)
    }
    pub fn token(&mut self) -> Result<u64, QueueError> {
        let t = self.u64()?;
        if t == 0 || t >= SEQ_LOAD_LIMIT as u64 {
            return Err(corrupt("lease token out of range"));
        }
        Ok(t)
    }
    pub fn skey(&mut self) -> Result<i64, QueueError> {
        let skey = self.i64()?;
        if !(-SEQ_LOAD_LIMIT + 1..SEQ_LOAD_LIMIT).contains(&skey) {
            return Err(corrupt("stack key out of range"));
        }
        Ok(skey)
    }
    pub fn parked(&mut self) -> Result<RawParked<'a>, QueueError> {
        let created_at = self.time()?;
        let attempts = self.u32()?;
        let immediate = self.flag("immediate")?;
        let collation = self.optional_collation()?;
        let payload = self.bytes()?;
        Ok((created_at, attempts, immediate, collation, payload))
    }
    /// Optional bytes: a flag, then the bytes if set.
    pub fn optional_bytes(&mut self, what: &str) -> Result<Option<&'a [u8]>, QueueError> {
        Ok(if self.flag(what)? {
            Some(self.bytes()?)
        } else {
            None
        })
    }
    /// A failure's text (`ORCA.NACK ... ERROR`), from version 3 on.
    pub fn error_text(&mut self, version: u8) -> Result<Option<&'a [u8]>, QueueError> {
        if version >= ENCODING_V3 {
            self.optional_bytes("error")
        } else {
            Ok(None)
        }
    }
    /// A collation name: UTF-8 and valid.
    pub fn collation_name(&mut self) -> Result<&'a str, QueueError> {
        let name =
            std::str::from_utf8(self.bytes()?).map_err(|_| corrupt("collation name not UTF-8"))?;
        if !valid_collation_name(name) {
            return Err(corrupt("invalid collation name"));
        }
        Ok(name)
    }
    /// A flag byte, then the collation name if the flag is 1.
    pub fn optional_collation(&mut self) -> Result<Option<&'a str>, QueueError> {
        match self.u8()? {
            0 => Ok(None),
            1 => Ok(Some(self.collation_name()?)),
            _ => Err(corrupt("bad collation flag")),
        }
    }
    pub fn gate_name(&mut self) -> Result<&'a [u8], QueueError> {
        let g = self.bytes()?;
        if g.is_empty() || g.len() > MAX_GATE_NAME {
            return Err(corrupt("gate name empty or too long"));
        }
        Ok(g)
    }
    pub fn done(&self) -> Result<(), QueueError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(corrupt("trailing bytes"))
        }
    }
}
