//! Replies, written straight to the client (`ffi::Client`): a map under
//! RESP3, a flat field/value array under RESP2 (Redis converts
//! `RedisModule_ReplyWithMap` for RESP2 clients). A light tree of borrowed
//! keys instead of the wrapper crate's `RedisValue` (a `BTreeMap` with an
//! allocated `String` per key); the job replies of the hot paths (ENQUEUE,
//! IMMEDIATE, POP) skip the tree and are written field by field from the
//! job, in the same order.

use std::ffi::CStr;

use redis_module::Context;

use crate::core::{encode_key, Delivery, JobInfo, JobKey};

#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    Int(i64),
    Bulk(Vec<u8>),
    /// A simple status such as `OK`.
    Status(&'static CStr),
    Null,
    /// Fields in alphabetical order.
    Map(Vec<(&'static str, Reply)>),
    Array(Vec<Reply>),
    /// The deliveries of a POP: the one delivery's map, or (`array`, POP
    /// with COUNT) an array of them.
    Deliveries {
        ds: Vec<Delivery>,
        array: bool,
    },
    /// Nothing now: the client is blocked and is answered later.
    Blocked,
    /// Nothing more: the command has written its reply itself.
    Sent,
}

/// Where a reply goes: the client (`ffi::Client`), or a recorder in tests.
pub trait Sink {
    fn map(&mut self, len: usize);
    fn array(&mut self, len: usize);
    fn bulk(&mut self, b: &[u8]);
    fn int(&mut self, v: i64);
    fn null(&mut self);
    fn status(&mut self, s: &'static CStr);
}

/// Write a reply to the client of `ctx`.
pub fn send(ctx: &Context, r: &Reply) {
    write(&mut super::ffi::Client::new(ctx), r);
}

pub fn write<S: Sink>(s: &mut S, r: &Reply) {
    match r {
        Reply::Int(v) => s.int(*v),
        Reply::Bulk(b) => s.bulk(b),
        Reply::Status(t) => s.status(t),
        Reply::Null => s.null(),
        Reply::Map(fields) => {
            s.map(fields.len());
            for (k, v) in fields {
                s.bulk(k.as_bytes());
                write(s, v);
            }
        }
        Reply::Array(items) => {
            s.array(items.len());
            for v in items {
                write(s, v);
            }
        }
        Reply::Deliveries { ds, array: true } => {
            s.array(ds.len());
            for d in ds {
                write_delivery(s, d);
            }
        }
        Reply::Deliveries { ds, array: false } => match ds.first() {
            Some(d) => write_delivery(s, d),
            None => s.null(),
        },
        Reply::Blocked | Reply::Sent => {}
    }
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

    pub fn build(mut self) -> Reply {
        self.0.sort_unstable_by_key(|(k, _)| *k);
        Reply::Map(self.0)
    }
}

/// A field value of a job reply, borrowed from the job.
#[derive(Clone, Copy, Debug)]
pub enum Val<'a> {
    Int(i64),
    Bytes(&'a [u8]),
    /// An orca key, in base64.
    Key(&'a JobKey),
    /// A number sent as a bulk string (a lease token).
    Text(u64),
    Null,
}

impl Val<'_> {
    fn owned(self) -> Reply {
        match self {
            Val::Int(v) => Reply::Int(v),
            Val::Bytes(b) => Reply::Bulk(b.to_vec()),
            Val::Key(k) => Reply::Bulk(encode_key(k).into_bytes()),
            Val::Text(n) => Reply::Bulk(n.to_string().into_bytes()),
            Val::Null => Reply::Null,
        }
    }

    fn write<S: Sink>(self, s: &mut S) {
        match self {
            Val::Int(v) => s.int(v),
            Val::Bytes(b) => s.bulk(b),
            Val::Key(k) => {
                let mut buf = [0u8; KEY_TEXT_LEN];
                s.bulk(key_text(k, &mut buf));
            }
            Val::Text(n) => {
                let mut buf = [0u8; 20];
                s.bulk(decimal(n, &mut buf));
            }
            Val::Null => s.null(),
        }
    }
}

/// Length of an orca key in base64.
const KEY_TEXT_LEN: usize = 44;

/// `encode_key` without allocating.
fn key_text<'b>(key: &JobKey, buf: &'b mut [u8; KEY_TEXT_LEN]) -> &'b [u8] {
    use base64::Engine;
    match base64::engine::general_purpose::STANDARD.encode_slice(key, buf) {
        Ok(n) => buf.get(..n).unwrap_or_default(),
        Err(_) => &[],
    }
}

/// `n` in decimal, without allocating.
fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        if let Some(d) = buf.get_mut(i) {
            *d = b'0' + (n % 10) as u8;
        }
        n /= 10;
        if n == 0 || i == 0 {
            break;
        }
    }
    buf.get(i..).unwrap_or_default()
}

/// The fields of the job reply of docs/commands.md, in alphabetical order.
fn job_fields<'a>(info: &'a JobInfo<'_>) -> [(&'static str, Val<'a>); 8] {
    [
        ("attempts", Val::Int(info.attempts as i64)),
        (
            "collation",
            match &info.collation {
                Some(c) => Val::Bytes(c.as_bytes()),
                None => Val::Null,
            },
        ),
        ("created_at", Val::Int(info.created_at)),
        ("immediate", Val::Int(info.immediate as i64)),
        ("key", Val::Key(&info.key)),
        ("nonce", Val::Int(info.nonce as i64)),
        ("payload", Val::Bytes(&info.payload)),
        ("release_at", Val::Int(info.release_at)),
    ]
}

/// The job reply of docs/commands.md as a tree, for more fields.
pub fn job(info: &JobInfo<'_>) -> Fields {
    job_fields(info)
        .into_iter()
        .fold(Fields::new(), |f, (k, v)| f.value(k, v.owned()))
}

/// The reply of the commands that write a job (ENQUEUE, IMMEDIATE,
/// REENQUEUE, MOVE): the job reply without `payload`, which the client
/// sent or already has (docs/commands.md).
pub fn job_meta(info: &JobInfo<'_>) -> Fields {
    job_fields(info)
        .into_iter()
        .filter(|(k, _)| *k != "payload")
        .fold(Fields::new(), |f, (k, v)| f.value(k, v.owned()))
}

/// The job reply with `extra` fields, written without building a tree:
/// the same map, in the same (alphabetical) order, as `job(info)` with the
/// extra fields added and built.
/// Without `payload` when `payload` is false (as `job_meta`).
pub fn write_job<S: Sink>(
    s: &mut S,
    info: &JobInfo<'_>,
    payload: bool,
    extra: &mut [(&'static str, Val<'_>)],
) {
    extra.sort_unstable_by_key(|(k, _)| *k);
    let fields = job_fields(info);
    s.map(fields.len() - !payload as usize + extra.len());
    let mut extra = extra.iter().peekable();
    for (k, v) in fields {
        if !payload && k == "payload" {
            continue;
        }
        while let Some((ek, ev)) = extra.next_if(|(ek, _)| *ek < k) {
            s.bulk(ek.as_bytes());
            ev.write(s);
        }
        s.bulk(k.as_bytes());
        v.write(s);
    }
    for (ek, ev) in extra {
        s.bulk(ek.as_bytes());
        ev.write(s);
    }
}

/// A popped job: the job reply with `attempt`, `lease` (the token, as a
/// string) and `deadline`, both nil for `LEASE 0`.
fn write_delivery<S: Sink>(s: &mut S, d: &Delivery) {
    let attempt = ("attempt", Val::Int(d.job.attempts as i64));
    let mut extra = match d.lease {
        Some((token, deadline)) => [
            attempt,
            ("lease", Val::Text(token)),
            ("deadline", Val::Int(deadline)),
        ],
        None => [attempt, ("lease", Val::Null), ("deadline", Val::Null)],
    };
    write_job(s, &d.job, true, &mut extra);
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::*;

    #[derive(Debug, PartialEq)]
    enum Ev {
        Map(usize),
        Array(usize),
        Bulk(Vec<u8>),
        Int(i64),
        Null,
        Status(&'static CStr),
    }

    #[derive(Default)]
    struct Rec(Vec<Ev>);

    impl Sink for Rec {
        fn map(&mut self, len: usize) {
            self.0.push(Ev::Map(len));
        }
        fn array(&mut self, len: usize) {
            self.0.push(Ev::Array(len));
        }
        fn bulk(&mut self, b: &[u8]) {
            self.0.push(Ev::Bulk(b.to_vec()));
        }
        fn int(&mut self, v: i64) {
            self.0.push(Ev::Int(v));
        }
        fn null(&mut self) {
            self.0.push(Ev::Null);
        }
        fn status(&mut self, s: &'static CStr) {
            self.0.push(Ev::Status(s));
        }
    }

    fn rec(r: &Reply) -> Vec<Ev> {
        let mut s = Rec::default();
        write(&mut s, r);
        s.0
    }

    fn info(seed: u8, collation: Option<&str>) -> JobInfo<'static> {
        JobInfo {
            key: [seed.wrapping_mul(37); 32].map(|b| b ^ seed),
            collation: collation.map(|c| Cow::Owned(c.to_string())),
            immediate: seed & 1 == 0,
            nonce: u64::MAX - seed as u64,
            created_at: 1_700_000_000_000 + seed as i64,
            release_at: -(seed as i64),
            attempts: u32::MAX - seed as u32,
            payload: Cow::Owned(vec![seed, 0, 255, b'{']),
        }
    }

    /// The old delivery reply, built as a tree.
    fn delivery_tree(d: &Delivery) -> Reply {
        let f = job(&d.job).int("attempt", d.job.attempts as i64);
        match d.lease {
            Some((token, deadline)) => f.str("lease", token.to_string()).int("deadline", deadline),
            None => f.value("lease", Reply::Null).value("deadline", Reply::Null),
        }
        .build()
    }

    #[test]
    fn direct_job_replies_match_the_tree() {
        for seed in 0..6u8 {
            for coll in [None, Some("user.42"), Some("team.x")] {
                let i = info(seed, coll);
                for created in [0, 1] {
                    let tree = job(&i).int("created", created).build();
                    let mut s = Rec::default();
                    write_job(&mut s, &i, true, &mut [("created", Val::Int(created))]);
                    assert_eq!(s.0, rec(&tree));
                    let tree = job_meta(&i).int("created", created).build();
                    let mut s = Rec::default();
                    write_job(&mut s, &i, false, &mut [("created", Val::Int(created))]);
                    assert_eq!(s.0, rec(&tree));
                }
                // Extras given out of order, before, between and after the
                // job's own fields.
                let tree = job(&i)
                    .str("state", "x")
                    .int("zz", 1)
                    .int("a", 2)
                    .value("died_at", Reply::Null)
                    .build();
                let mut s = Rec::default();
                write_job(
                    &mut s,
                    &i,
                    true,
                    &mut [
                        ("state", Val::Bytes(b"x")),
                        ("zz", Val::Int(1)),
                        ("a", Val::Int(2)),
                        ("died_at", Val::Null),
                    ],
                );
                assert_eq!(s.0, rec(&tree));
                for lease in [
                    None,
                    Some((0, 0)),
                    Some((987_654_321, 5)),
                    Some((u64::MAX, -1)),
                ] {
                    let d = Delivery {
                        job: i.clone(),
                        lease,
                    };
                    let one = Reply::Deliveries {
                        ds: vec![d.clone()],
                        array: false,
                    };
                    assert_eq!(rec(&one), rec(&delivery_tree(&d)));
                    let many = Reply::Deliveries {
                        ds: vec![d.clone(), d.clone()],
                        array: true,
                    };
                    let tree = Reply::Array(vec![delivery_tree(&d), delivery_tree(&d)]);
                    assert_eq!(rec(&many), rec(&tree));
                }
            }
        }
        let none = Reply::Deliveries {
            ds: vec![],
            array: false,
        };
        assert_eq!(rec(&none), vec![Ev::Null]);
    }

    #[test]
    fn key_text_and_decimal_match_the_allocating_forms() {
        for seed in 0..=255u8 {
            let k: JobKey = std::array::from_fn(|i| (i as u8).wrapping_mul(seed) ^ seed);
            let mut buf = [0u8; KEY_TEXT_LEN];
            assert_eq!(key_text(&k, &mut buf), encode_key(&k).as_bytes());
        }
        for n in [
            0,
            1,
            9,
            10,
            99,
            100,
            12345,
            u32::MAX as u64,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut buf = [0u8; 20];
            assert_eq!(decimal(n, &mut buf), n.to_string().as_bytes());
        }
    }
}
