//! Replies. Every command returns a `Reply` (or an error) and the command
//! entry point writes it (`write`); nothing replies on its own.
//!
//! A map is a RESP3 map, which Redis turns into a flat field/value array for
//! RESP2 clients. `Reply` borrows where it can (the client's own arguments,
//! static keys) so the hot paths allocate nothing for their reply: a job
//! reply (`Reply::Job`, `Reply::Deliveries`) is written field by field from
//! the job, merged with its extra fields in alphabetical order.

use std::borrow::Cow;
use std::ffi::CStr;

use redis_module::{Context, RedisError};

use super::ffi;
use crate::core::{encode_key, Delivery, JobInfo, JobKey};

/// What a command returns: a reply to send, or an error reply.
pub type CmdResult<'a> = Result<Reply<'a>, RedisError>;

// `Job` is large (a job and its extra fields inline), and kept inline on
// purpose: it is the reply of the hot paths, which must not allocate.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Reply<'a> {
    Int(i64),
    Bulk(Cow<'a, [u8]>),
    /// An orca key, sent in base64.
    Key(JobKey),
    /// A number sent as a bulk string (a lease token).
    Token(u64),
    /// A simple status such as `OK`.
    Status(&'static CStr),
    Null,
    /// Fields in the order to send them (`Fields::build` sorts them
    /// alphabetically).
    Map(Vec<(&'static str, Reply<'a>)>),
    /// A map whose keys are data (gate names, collations).
    Pairs(Vec<(Reply<'a>, Reply<'a>)>),
    Array(Vec<Reply<'a>>),
    /// The job reply of docs/commands.md, with extra fields.
    Job(JobReply<'a>),
    /// The deliveries of a POP: the one delivery's map, or (`array`, POP
    /// with COUNT) an array of them. `queue` adds the queue's name to each.
    Deliveries {
        ds: Vec<Delivery<'a>>,
        array: bool,
        queue: Option<&'a [u8]>,
        format: Format,
    },
    /// Nothing now: the client is blocked and is answered later.
    Blocked,
    /// Already written to the client (a pop's deliveries, written while
    /// the queue they borrow from was open).
    Sent,
}

impl<'a> Reply<'a> {
    pub fn bytes(b: &'a [u8]) -> Self {
        Reply::Bulk(Cow::Borrowed(b))
    }

    pub fn text(s: impl Into<String>) -> Self {
        Reply::Bulk(Cow::Owned(s.into().into_bytes()))
    }
}

/// A field value of a job reply's extra fields.
#[derive(Clone, Debug, PartialEq)]
pub enum Val<'a> {
    Int(i64),
    Bytes(&'a [u8]),
    /// Bytes the reply owns.
    Owned(Vec<u8>),
    /// A number sent as a bulk string (a lease token).
    Token(u64),
    Null,
}

/// Most extra fields a job reply carries.
const MAX_EXTRAS: usize = 8;

/// A job reply: the job's fields (with or without `payload`) and up to
/// `MAX_EXTRAS` extra fields.
#[derive(Clone, Debug, PartialEq)]
pub struct JobReply<'a> {
    pub info: JobInfo<'a>,
    pub payload: bool,
    extras: [(&'static str, Val<'a>); MAX_EXTRAS],
    len: usize,
}

impl<'a> JobReply<'a> {
    /// The job reply of docs/commands.md.
    pub fn full(info: JobInfo<'a>) -> Self {
        JobReply {
            info,
            payload: true,
            extras: std::array::from_fn(|_| ("", Val::Null)),
            len: 0,
        }
    }

    /// The write reply of the commands that put or move a job (ENQUEUE,
    /// IMMEDIATE, REENQUEUE, MOVE): the job reply without `payload`, which
    /// the client sent or already has (docs/commands.md).
    pub fn meta(info: JobInfo<'a>) -> Self {
        JobReply {
            payload: false,
            ..JobReply::full(info)
        }
    }

    /// Add an extra field (at most `MAX_EXTRAS`; more is a bug, caught by
    /// the unit tests, and dropped rather than panicking).
    pub fn with(mut self, name: &'static str, v: Val<'a>) -> Self {
        if let Some(slot) = self.extras.get_mut(self.len) {
            *slot = (name, v);
            self.len += 1;
        }
        self
    }

    pub fn reply(self) -> Reply<'a> {
        Reply::Job(self)
    }
}

/// Where a reply goes: the client (`Client`), or a recorder in tests.
pub trait Sink {
    fn map(&mut self, len: usize);
    fn array(&mut self, len: usize);
    fn bulk(&mut self, b: &[u8]);
    fn int(&mut self, v: i64);
    fn null(&mut self);
    fn status(&mut self, s: &'static CStr);
}

/// How a delivery is written (`FORMAT` of the commands that hand out jobs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// The job reply: a map (RESP3), or a flat name/value array (RESP2).
    #[default]
    Map,
    /// The values only, in the map's order, then `queue` (MPOP): an array
    /// of 11 or 12 items, half the items of the map for a client to parse.
    Values,
}

/// The client of a command context.
pub struct Client<'c>(pub &'c Context);

impl Sink for Client<'_> {
    fn map(&mut self, len: usize) {
        ffi::reply::map(self.0, len);
    }
    fn array(&mut self, len: usize) {
        ffi::reply::array(self.0, len);
    }
    fn bulk(&mut self, b: &[u8]) {
        ffi::reply::bulk(self.0, b);
    }
    fn int(&mut self, v: i64) {
        ffi::reply::int(self.0, v);
    }
    fn null(&mut self) {
        ffi::reply::null(self.0);
    }
    fn status(&mut self, s: &'static CStr) {
        ffi::reply::status(self.0, s);
    }
}

/// Write a reply to the client of `ctx`.
pub fn send(ctx: &Context, r: &Reply) {
    write(&mut Client(ctx), r);
}

/// The reply of a pop without `COUNT`: the one delivery's map (no list
/// of deliveries built for it), or nil.
pub fn send_delivery(ctx: &Context, d: Option<&Delivery>, queue: Option<&[u8]>, format: Format) {
    let s = &mut Client(ctx);
    match d {
        Some(d) => write_delivery(s, d, queue, format),
        None => s.null(),
    }
}

pub fn write<S: Sink>(s: &mut S, r: &Reply) {
    match r {
        Reply::Int(v) => s.int(*v),
        Reply::Bulk(b) => s.bulk(b),
        Reply::Key(k) => write_key(s, k),
        Reply::Token(n) => write_token(s, *n),
        Reply::Status(t) => s.status(t),
        Reply::Null => s.null(),
        Reply::Map(fields) => {
            s.map(fields.len());
            for (k, v) in fields {
                s.bulk(k.as_bytes());
                write(s, v);
            }
        }
        Reply::Pairs(pairs) => {
            s.map(pairs.len());
            for (k, v) in pairs {
                write(s, k);
                write(s, v);
            }
        }
        Reply::Array(items) => {
            s.array(items.len());
            for v in items {
                write(s, v);
            }
        }
        Reply::Job(j) => write_job(s, j),
        Reply::Deliveries {
            ds,
            array: true,
            queue,
            format,
        } => {
            s.array(ds.len());
            for d in ds {
                write_delivery(s, d, *queue, *format);
            }
        }
        Reply::Deliveries {
            ds,
            array: false,
            queue,
            format,
        } => match ds.first() {
            Some(d) => write_delivery(s, d, *queue, *format),
            None => s.null(),
        },
        Reply::Blocked | Reply::Sent => {}
    }
}

/// A map built field by field, sent in alphabetical order.
#[derive(Default)]
pub struct Fields<'a>(Vec<(&'static str, Reply<'a>)>);

impl<'a> Fields<'a> {
    pub fn new() -> Self {
        Fields(Vec::with_capacity(12))
    }

    pub fn value(mut self, k: &'static str, v: Reply<'a>) -> Self {
        self.0.push((k, v));
        self
    }

    pub fn int(self, k: &'static str, v: i64) -> Self {
        self.value(k, Reply::Int(v))
    }

    pub fn str(self, k: &'static str, v: impl Into<String>) -> Self {
        self.value(k, Reply::text(v))
    }

    pub fn build(mut self) -> Reply<'a> {
        self.0.sort_unstable_by_key(|(k, _)| *k);
        Reply::Map(self.0)
    }
}

/// The fields of the job reply of docs/commands.md as a `Fields` map, for
/// replies that add non-scalar fields (`ORCA.STATUS`'s `leases`). The
/// payload is copied.
pub fn job_fields<'a>(info: &JobInfo<'_>) -> Fields<'a> {
    Fields::new()
        .int("attempts", info.attempts as i64)
        .value(
            "collation",
            match &info.collation {
                Some(c) => Reply::text(c.as_ref()),
                None => Reply::Null,
            },
        )
        .int("created_at", info.created_at)
        .int("immediate", info.immediate as i64)
        .value("key", Reply::Key(info.key))
        .int("nonce", info.nonce as i64)
        .value("payload", Reply::Bulk(Cow::Owned(info.payload.to_vec())))
        .int("release_at", info.release_at)
}

/// A job's reply view that owns its data, for replies built from a queue
/// that is closed before the reply is written (the payload is copied).
pub fn owned(info: JobInfo<'_>) -> JobInfo<'static> {
    JobInfo {
        key: info.key,
        collation: info.collation.map(|c| Cow::Owned(c.into_owned())),
        immediate: info.immediate,
        nonce: info.nonce,
        created_at: info.created_at,
        release_at: info.release_at,
        attempts: info.attempts,
        payload: Cow::Owned(info.payload.into_owned()),
    }
}

/// Length of an orca key in base64.
const KEY_TEXT_LEN: usize = 44;

fn write_key<S: Sink>(s: &mut S, key: &JobKey) {
    use base64::Engine;
    let mut buf = [0u8; KEY_TEXT_LEN];
    match base64::engine::general_purpose::STANDARD.encode_slice(key, &mut buf) {
        Ok(n) => s.bulk(buf.get(..n).unwrap_or_default()),
        Err(_) => s.bulk(encode_key(key).as_bytes()),
    }
}

/// `n` in decimal as a bulk string, without allocating.
fn write_token<S: Sink>(s: &mut S, mut n: u64) {
    let mut buf = [0u8; 20];
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
    s.bulk(buf.get(i..).unwrap_or_default());
}

fn write_val<S: Sink>(s: &mut S, v: &Val) {
    match v {
        Val::Int(v) => s.int(*v),
        Val::Bytes(b) => s.bulk(b),
        Val::Owned(b) => s.bulk(b),
        Val::Token(n) => write_token(s, *n),
        Val::Null => s.null(),
    }
}

/// The job's own fields, in alphabetical order.
const JOB_FIELDS: [&str; 8] = [
    "attempts",
    "collation",
    "created_at",
    "immediate",
    "key",
    "nonce",
    "payload",
    "release_at",
];

fn write_job_field<S: Sink>(s: &mut S, info: &JobInfo, field: &str) {
    match field {
        "attempts" => s.int(info.attempts as i64),
        "collation" => match &info.collation {
            Some(c) => s.bulk(c.as_bytes()),
            None => s.null(),
        },
        "created_at" => s.int(info.created_at),
        "immediate" => s.int(info.immediate as i64),
        "key" => write_key(s, &info.key),
        "nonce" => s.int(info.nonce as i64),
        "payload" => s.bulk(&info.payload),
        _ => s.int(info.release_at),
    }
}

/// A job reply: the job's fields merged with the extra fields, all in
/// alphabetical order.
fn write_job<S: Sink>(s: &mut S, j: &JobReply) {
    let mut extra: [Option<&(&'static str, Val)>; MAX_EXTRAS] = [None; MAX_EXTRAS];
    for (slot, e) in extra.iter_mut().zip(j.extras.iter().take(j.len)) {
        *slot = Some(e);
    }
    let extra = extra.get_mut(..j.len).unwrap_or_default();
    extra.sort_unstable_by_key(|e| e.map(|(k, _)| *k));
    let own = JOB_FIELDS.len() - !j.payload as usize;
    s.map(own + extra.len());
    let mut extra = extra.iter().flatten().copied().peekable();
    for field in JOB_FIELDS {
        if !j.payload && field == "payload" {
            continue;
        }
        while let Some((ek, ev)) = extra.next_if(|(ek, _)| *ek < field) {
            s.bulk(ek.as_bytes());
            write_val(s, ev);
        }
        s.bulk(field.as_bytes());
        write_job_field(s, &j.info, field);
    }
    for (ek, ev) in extra {
        s.bulk(ek.as_bytes());
        write_val(s, ev);
    }
}

/// A popped job: the job reply with `attempt`, `lease` (the token, as a
/// string) and `deadline`, both nil for `LEASE 0`, and `queue` when asked;
/// or (`Format::Values`) the same values without their names.
fn write_delivery<S: Sink>(s: &mut S, d: &Delivery, queue: Option<&[u8]>, format: Format) {
    if format == Format::Values {
        return write_delivery_values(s, d, queue);
    }
    let info = JobInfo {
        key: d.job.key,
        collation: d.job.collation.as_deref().map(Cow::Borrowed),
        immediate: d.job.immediate,
        nonce: d.job.nonce,
        created_at: d.job.created_at,
        release_at: d.job.release_at,
        attempts: d.job.attempts,
        payload: Cow::Borrowed(&d.job.payload),
    };
    let mut j = JobReply::full(info).with("attempt", Val::Int(d.job.attempts as i64));
    j = match d.lease {
        Some((token, deadline)) => j
            .with("lease", Val::Token(token))
            .with("deadline", Val::Int(deadline)),
        None => j.with("lease", Val::Null).with("deadline", Val::Null),
    };
    if let Some(q) = queue {
        j = j.with("queue", Val::Bytes(q));
    }
    write_job(s, &j);
}

/// `FORMAT VALUES`: the delivery map's values in its (alphabetical) order,
/// then `queue` last, so that every other value has the same place for
/// POP and MPOP (docs/commands.md lists them).
fn write_delivery_values<S: Sink>(s: &mut S, d: &Delivery, queue: Option<&[u8]>) {
    let j = &d.job;
    s.array(11 + queue.is_some() as usize);
    s.int(j.attempts as i64); // attempt
    s.int(j.attempts as i64);
    match j.collation.as_deref() {
        Some(c) => s.bulk(c.as_bytes()),
        None => s.null(),
    }
    s.int(j.created_at);
    match d.lease {
        Some((_, deadline)) => s.int(deadline),
        None => s.null(),
    }
    s.int(j.immediate as i64);
    write_key(s, &j.key);
    match d.lease {
        Some((token, _)) => write_token(s, token),
        None => s.null(),
    }
    s.int(j.nonce as i64);
    s.bulk(&j.payload);
    s.int(j.release_at);
    if let Some(q) = queue {
        s.bulk(q);
    }
}

#[cfg(test)]
mod tests {
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

    /// The delivery reply as a map built field by field.
    fn delivery_tree(d: &Delivery, queue: Option<&[u8]>) -> Reply<'static> {
        let mut f = job_fields(&d.job).int("attempt", d.job.attempts as i64);
        f = match d.lease {
            Some((token, deadline)) => f
                .value("lease", Reply::Token(token))
                .int("deadline", deadline),
            None => f.value("lease", Reply::Null).value("deadline", Reply::Null),
        };
        if let Some(q) = queue {
            f = f.value("queue", Reply::Bulk(Cow::Owned(q.to_vec())));
        }
        f.build()
    }

    #[test]
    fn job_replies_match_the_field_map() {
        for seed in 0..6u8 {
            for coll in [None, Some("user.42"), Some("team.x")] {
                let i = info(seed, coll);
                for created in [0, 1] {
                    let tree = job_fields(&i).int("created", created).build();
                    let direct = JobReply::full(i.clone())
                        .with("created", Val::Int(created))
                        .reply();
                    assert_eq!(rec(&direct), rec(&tree));
                    let Reply::Map(mut fields) = job_fields(&i).int("created", created).build()
                    else {
                        unreachable!()
                    };
                    fields.retain(|(k, _)| *k != "payload");
                    let meta = JobReply::meta(i.clone())
                        .with("created", Val::Int(created))
                        .reply();
                    assert_eq!(rec(&meta), rec(&Reply::Map(fields)));
                }
                // Extras given out of order, before, between and after the
                // job's own fields.
                let tree = job_fields(&i)
                    .str("state", "x")
                    .int("zz", 1)
                    .int("a", 2)
                    .value("died_at", Reply::Null)
                    .build();
                let direct = JobReply::full(i.clone())
                    .with("state", Val::Bytes(b"x"))
                    .with("zz", Val::Int(1))
                    .with("a", Val::Int(2))
                    .with("died_at", Val::Null)
                    .reply();
                assert_eq!(rec(&direct), rec(&tree));
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
                    for queue in [None, Some(&b"grading"[..])] {
                        let one = Reply::Deliveries {
                            ds: vec![d.clone()],
                            array: false,
                            queue,
                            format: Format::Map,
                        };
                        assert_eq!(rec(&one), rec(&delivery_tree(&d, queue)));
                        let values = Reply::Deliveries {
                            ds: vec![d.clone()],
                            array: false,
                            queue,
                            format: Format::Values,
                        };
                        assert_eq!(rec(&values), values_of(rec(&one)));
                        let many = Reply::Deliveries {
                            ds: vec![d.clone(), d.clone()],
                            array: true,
                            queue,
                            format: Format::Map,
                        };
                        let tree =
                            Reply::Array(vec![delivery_tree(&d, queue), delivery_tree(&d, queue)]);
                        assert_eq!(rec(&many), rec(&tree));
                    }
                }
            }
        }
        for format in [Format::Map, Format::Values] {
            let none = Reply::Deliveries {
                ds: vec![],
                array: false,
                queue: None,
                format,
            };
            assert_eq!(rec(&none), vec![Ev::Null]);
        }
    }

    /// A delivery map's events as `FORMAT VALUES` writes them: an array of
    /// the values in the map's order, `queue` moved last.
    fn values_of(map: Vec<Ev>) -> Vec<Ev> {
        let mut it = map.into_iter();
        let Some(Ev::Map(n)) = it.next() else {
            panic!("not a map")
        };
        let (mut out, mut queue) = (vec![Ev::Array(n)], None);
        while let (Some(Ev::Bulk(name)), Some(v)) = (it.next(), it.next()) {
            if name == b"queue" {
                queue = Some(v);
            } else {
                out.push(v);
            }
        }
        out.extend(queue);
        out
    }

    #[test]
    fn extras_beyond_the_limit_are_dropped_not_panicking() {
        let mut j = JobReply::full(info(1, None));
        for _ in 0..MAX_EXTRAS + 3 {
            j = j.with("x", Val::Int(1));
        }
        assert_eq!(rec(&j.reply()).first(), Some(&Ev::Map(8 + MAX_EXTRAS)));
    }

    #[test]
    fn keys_and_tokens_match_the_allocating_forms() {
        for seed in 0..=255u8 {
            let k: JobKey = std::array::from_fn(|i| (i as u8).wrapping_mul(seed) ^ seed);
            assert_eq!(
                rec(&Reply::Key(k)),
                vec![Ev::Bulk(encode_key(&k).into_bytes())]
            );
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
            assert_eq!(
                rec(&Reply::Token(n)),
                vec![Ev::Bulk(n.to_string().into_bytes())]
            );
        }
    }
}
