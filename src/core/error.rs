//! Errors of queue operations and the codes that start every error reply.
//! An operation that returns an error has changed nothing.
//!
//! On the wire an error is `CODE [field ...] text` (docs/commands.md, "Error
//! codes"): a stable upper-case code, the code's fixed fields, then the
//! human text. Clients switch on the code and read the fields; the text may
//! be reworded at any time. `Display` is the text alone.

use std::fmt;

/// The code that starts an error reply. New codes may be added; a code
/// never changes its meaning or its fields. `ALL` lists every one, and the
/// table in docs/commands.md lists exactly these (a test checks both ways).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// The command is malformed: arity, an unknown option, a value that is
    /// not an integer or out of its range, a misplaced option.
    Err,
    /// Redis's own code: the key holds another type than a queue.
    WrongType,
    /// The job config was refused.
    BadConfig,
    /// No such job (or queue).
    NoJob,
    /// `ORCA.MOVE` of an immediate job.
    Immediate,
    /// The job is running (leased), not in the queue order.
    Leased,
    /// The job waits for its retry, not in the queue order. Field: the retry time.
    Delayed,
    /// The job is a dead letter.
    Dead,
    /// The job is held behind a closed gate. Field: the gate, percent-encoded.
    Held,
    /// The job is not in the queue order (another state).
    NotQueued,
    /// `ORCA.DEAD ... REQUEUE` of a job whose key is queued (or held) again.
    AlreadyQueued,
    /// The lease is not held (expired, already acked or nacked, never issued).
    NoLease,
    /// The lease's job was deleted while it ran.
    Cancelled,
    /// The queue holds as many jobs as it may.
    QueueFull,
    /// An ACK's result is over `orca.max-payload-bytes`.
    TooLarge,
    /// A COUNT or LIMIT over `orca.max-pop-count`. Field: that maximum.
    TooMany,
    /// A time would leave 0..2^53-1.
    TimeRange,
    /// A serialized queue is malformed.
    Corrupt,
    /// `ORCA.CHECK` found a broken invariant.
    Invariant,
    /// A fault inside the module (contained; see the server log).
    Internal,
}

impl ErrorCode {
    /// Every code, in the order of the docs table.
    pub const ALL: [ErrorCode; 20] = [
        ErrorCode::Err,
        ErrorCode::WrongType,
        ErrorCode::BadConfig,
        ErrorCode::NoJob,
        ErrorCode::Immediate,
        ErrorCode::Leased,
        ErrorCode::Delayed,
        ErrorCode::Dead,
        ErrorCode::Held,
        ErrorCode::NotQueued,
        ErrorCode::AlreadyQueued,
        ErrorCode::NoLease,
        ErrorCode::Cancelled,
        ErrorCode::QueueFull,
        ErrorCode::TooLarge,
        ErrorCode::TooMany,
        ErrorCode::TimeRange,
        ErrorCode::Corrupt,
        ErrorCode::Invariant,
        ErrorCode::Internal,
    ];

    /// The word on the wire.
    pub const fn name(self) -> &'static str {
        match self {
            ErrorCode::Err => "ERR",
            ErrorCode::WrongType => "WRONGTYPE",
            ErrorCode::BadConfig => "BADCONFIG",
            ErrorCode::NoJob => "NOJOB",
            ErrorCode::Immediate => "IMMEDIATE",
            ErrorCode::Leased => "LEASED",
            ErrorCode::Delayed => "DELAYED",
            ErrorCode::Dead => "DEAD",
            ErrorCode::Held => "HELD",
            ErrorCode::NotQueued => "NOTQUEUED",
            ErrorCode::AlreadyQueued => "ALREADYQUEUED",
            ErrorCode::NoLease => "NOLEASE",
            ErrorCode::Cancelled => "CANCELLED",
            ErrorCode::QueueFull => "QUEUEFULL",
            ErrorCode::TooLarge => "TOOLARGE",
            ErrorCode::TooMany => "TOOMANY",
            ErrorCode::TimeRange => "TIMERANGE",
            ErrorCode::Corrupt => "CORRUPT",
            ErrorCode::Invariant => "INVARIANT",
            ErrorCode::Internal => "INTERNAL",
        }
    }

    /// The fixed fields that follow the code, by name (docs/commands.md).
    /// Each is one token without spaces or control characters.
    pub const fn fields(self) -> &'static [&'static str] {
        match self {
            ErrorCode::Delayed => &["retry_at"],
            ErrorCode::Held => &["gate"],
            ErrorCode::TooMany => &["max"],
            _ => &[],
        }
    }

    /// The code named `name`, if it is one.
    pub fn from_name(name: &str) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| c.name() == name)
    }

    /// An error reply: the code, its fields (as `field` encodes them, one
    /// per name in `fields()`), then the text.
    pub fn line(self, fields: &[String], text: &str) -> String {
        let mut s = String::with_capacity(16 + text.len());
        s.push_str(self.name());
        for f in fields {
            s.push(' ');
            s.push_str(f);
        }
        s.push(' ');
        s.push_str(text);
        s
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A field made of client bytes (a gate name), as one token: every byte
/// outside RFC 3986's unreserved set (`A-Z a-z 0-9 - . _ ~`) written `%XX`
/// (upper-case hex), so `img-hw3` stays `img-hw3` and `hw 3` is `hw%203`.
/// Clients decode it with their standard percent-decoding.
pub fn field(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut s = String::with_capacity(bytes.len());
    for &b in bytes {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            s.push(b as char);
        } else {
            s.push('%');
            s.push(HEX[usize::from(b >> 4)] as char);
            s.push(HEX[usize::from(b & 15)] as char);
        }
    }
    s
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueError {
    /// The job config is not acceptable; the text says why.
    BadConfig(String),
    /// No job under that orca key.
    NoSuchJob,
    /// `ORCA.MOVE` of an immediate job.
    ImmediateNotMovable,
    /// A time computation would leave the supported range.
    TimeOverflow,
    /// ACK/NACK/EXTEND of a lease whose job was deleted (cancelled).
    Cancelled,
    /// ACK/NACK/EXTEND with a lease that is not held (expired and handed
    /// out again, already acked or nacked, or never issued).
    LeaseNotHeld,
    /// `ORCA.DEAD ... REQUEUE` of a job whose key is queued again.
    AlreadyQueued,
    /// A serialized queue (RDB, RESTORE, import) is malformed; the text says how.
    Corrupt(String),
    /// The queue holds as many jobs (or collations) as one key can address.
    Full,
    /// A setting's value is not acceptable; the text says why.
    BadSetting(String),
    /// The job is held behind a closed gate (named); it has no place yet.
    Held(String),
    /// The job is running (leased), not waiting in the queue.
    Leased,
    /// The job waits for its retry (at the given time), outside the queue order.
    Delayed(i64),
    /// The job is a dead letter.
    Dead,
    /// The job is not in the queue order (held).
    NotQueued,
}

impl QueueError {
    /// The code its error reply starts with. A setting out of range is an
    /// argument error (`ERR`), as the adapter's own checks of the same
    /// options are.
    pub fn code(&self) -> ErrorCode {
        match self {
            QueueError::BadConfig(_) => ErrorCode::BadConfig,
            QueueError::NoSuchJob => ErrorCode::NoJob,
            QueueError::ImmediateNotMovable => ErrorCode::Immediate,
            QueueError::TimeOverflow => ErrorCode::TimeRange,
            QueueError::Cancelled => ErrorCode::Cancelled,
            QueueError::LeaseNotHeld => ErrorCode::NoLease,
            QueueError::AlreadyQueued => ErrorCode::AlreadyQueued,
            QueueError::Corrupt(_) => ErrorCode::Corrupt,
            QueueError::Full => ErrorCode::QueueFull,
            QueueError::BadSetting(_) => ErrorCode::Err,
            QueueError::Held(_) => ErrorCode::Held,
            QueueError::Leased => ErrorCode::Leased,
            QueueError::Delayed(_) => ErrorCode::Delayed,
            QueueError::Dead => ErrorCode::Dead,
            QueueError::NotQueued => ErrorCode::NotQueued,
        }
    }

    /// The code's fields, in wire form (`ErrorCode::fields`).
    pub fn fields(&self) -> Vec<String> {
        match self {
            QueueError::Delayed(t) => vec![t.to_string()],
            QueueError::Held(g) => vec![field(g.as_bytes())],
            _ => vec![],
        }
    }

    /// The error reply: code, fields, text.
    pub fn line(&self) -> String {
        self.code().line(&self.fields(), &self.to_string())
    }
}

impl fmt::Display for QueueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueueError::BadConfig(s) => write!(f, "{s}"),
            QueueError::NoSuchJob => write!(f, "no such job"),
            QueueError::ImmediateNotMovable => write!(f, "immediate jobs cannot be moved"),
            QueueError::TimeOverflow => write!(f, "time out of range"),
            QueueError::Cancelled => write!(f, "job was cancelled"),
            QueueError::LeaseNotHeld => write!(
                f,
                "lease not held (it expired and the job was handed out again, was already acked or nacked, or never existed)"
            ),
            QueueError::AlreadyQueued => write!(f, "job is already queued"),
            QueueError::Corrupt(s) => write!(f, "corrupt queue data: {s}"),
            QueueError::Full => write!(
                f,
                "queue is full (one key holds at most 2^30 - 1 jobs and reservations)"
            ),
            QueueError::BadSetting(s) => write!(f, "{s}"),
            QueueError::Held(g) => write!(
                f,
                "job is held behind gate '{g}' (ORCA.GATE ... OPEN releases it)"
            ),
            QueueError::Leased => write!(
                f,
                "job is running (leased to a worker); it is not in the queue order"
            ),
            QueueError::Delayed(t) => write!(
                f,
                "job is waiting to be retried (at {t}); it is not in the queue order"
            ),
            QueueError::Dead => write!(
                f,
                "job is a dead letter (ORCA.DEAD ... REQUEUE puts it back)"
            ),
            QueueError::NotQueued => write!(f, "job is not in the queue order"),
        }
    }
}

impl std::error::Error for QueueError {}

#[cfg(test)]
mod tests {
    use super::*;

    /// One value of every variant. The match below has no wildcard: a new
    /// variant does not compile until it is added here, and so checked.
    fn every_variant() -> Vec<QueueError> {
        let all = vec![
            QueueError::BadConfig("config must be a JSON object".into()),
            QueueError::NoSuchJob,
            QueueError::ImmediateNotMovable,
            QueueError::TimeOverflow,
            QueueError::Cancelled,
            QueueError::LeaseNotHeld,
            QueueError::AlreadyQueued,
            QueueError::Corrupt("truncated".into()),
            QueueError::Full,
            QueueError::BadSetting("counts must be between 0 and 1".into()),
            QueueError::Held("img hw3/é".into()),
            QueueError::Leased,
            QueueError::Delayed(1_795_278_726_350),
            QueueError::Dead,
            QueueError::NotQueued,
        ];
        let mut seen = [false; 15];
        for e in &all {
            let i = match e {
                QueueError::BadConfig(_) => 0,
                QueueError::NoSuchJob => 1,
                QueueError::ImmediateNotMovable => 2,
                QueueError::TimeOverflow => 3,
                QueueError::Cancelled => 4,
                QueueError::LeaseNotHeld => 5,
                QueueError::AlreadyQueued => 6,
                QueueError::Corrupt(_) => 7,
                QueueError::Full => 8,
                QueueError::BadSetting(_) => 9,
                QueueError::Held(_) => 10,
                QueueError::Leased => 11,
                QueueError::Delayed(_) => 12,
                QueueError::Dead => 13,
                QueueError::NotQueued => 14,
            };
            seen[i] = true;
        }
        assert!(seen.iter().all(|s| *s), "a variant has no sample");
        all
    }

    /// The rows of the error code table in docs/commands.md: (code, fields).
    fn documented() -> Vec<(String, Vec<String>)> {
        let doc = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/commands.md"));
        let start = doc
            .find("\n## Error codes\n")
            .expect("docs/commands.md has ## Error codes");
        let section = &doc[start + 1..];
        let end = section[3..].find("\n## ").map_or(section.len(), |i| i + 3);
        section[..end]
            .lines()
            .filter(|l| l.starts_with("| `"))
            .map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                let code = cells[1].trim_matches('`').to_string();
                let fields = cells[2]
                    .split_whitespace()
                    .filter(|f| *f != "-")
                    .map(|f| f.trim_matches('`').to_string())
                    .collect();
                (code, fields)
            })
            .collect()
    }

    #[test]
    fn every_variant_maps_to_a_documented_code() {
        let doc = documented();
        for e in every_variant() {
            let code = e.code();
            assert!(ErrorCode::ALL.contains(&code), "{e:?}");
            assert!(
                doc.iter().any(|(c, _)| c == code.name()),
                "{e:?}: {code} is not in docs/commands.md's table"
            );
            let fields = e.fields();
            assert_eq!(fields.len(), code.fields().len(), "{e:?}");
            let line = e.line();
            assert!(line.starts_with(&format!("{code} ")), "{line}");
            // Fields are single tokens; the text follows them unchanged.
            let mut words = line.splitn(2 + fields.len(), ' ');
            assert_eq!(words.next(), Some(code.name()));
            for f in &fields {
                assert_eq!(words.next(), Some(f.as_str()), "{line}");
                assert!(
                    !f.is_empty() && f.bytes().all(|b| b.is_ascii_graphic()),
                    "{f}"
                );
            }
            assert_eq!(words.next(), Some(e.to_string().as_str()), "{line}");
        }
    }

    #[test]
    fn the_docs_table_lists_exactly_the_codes() {
        let doc = documented();
        let names: Vec<&str> = doc.iter().map(|(c, _)| c.as_str()).collect();
        let ours: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.name()).collect();
        assert_eq!(
            names, ours,
            "docs/commands.md's table, in the order of ErrorCode::ALL"
        );
        for (name, fields) in &doc {
            let code = ErrorCode::from_name(name).expect("a code");
            assert_eq!(fields, &code.fields().to_vec(), "{name}'s fields");
        }
    }

    #[test]
    fn codes_are_distinct_upper_case_words_no_client_maps() {
        // Codes redis-py (_parsers/base.py EXCEPTION_CLASSES), redis-rs and
        // ioredis's cluster give a meaning of their own; ERR and WRONGTYPE
        // are Redis's own and ours too.
        const TAKEN: &[&str] = &[
            "OOM",
            "WRONGPASS",
            "EXECABORT",
            "LOADING",
            "NOSCRIPT",
            "READONLY",
            "NOAUTH",
            "NOPERM",
            "ASK",
            "TRYAGAIN",
            "MOVED",
            "CLUSTERDOWN",
            "CROSSSLOT",
            "MASTERDOWN",
            "NOTBUSY",
            "NOSUB",
            "BUSY",
            "BUSYKEY",
            "BUSYGROUP",
            "NOGROUP",
            "NOPROTO",
            "NOREPLICAS",
            "MISCONF",
            "UNBLOCKED",
            "UNKILLABLE",
        ];
        for (i, c) in ErrorCode::ALL.iter().enumerate() {
            let n = c.name();
            assert!(
                !n.is_empty() && n.bytes().all(|b| b.is_ascii_uppercase()),
                "{n}"
            );
            assert!(!TAKEN.contains(&n), "{n} is taken");
            assert_eq!(ErrorCode::from_name(n), Some(*c));
            assert!(
                ErrorCode::ALL[..i].iter().all(|o| o.name() != n),
                "{n} twice"
            );
        }
    }

    #[test]
    fn fields_are_percent_encoded_tokens() {
        assert_eq!(field(b"img-hw3"), "img-hw3");
        assert_eq!(field(b"a.b_c~D9"), "a.b_c~D9");
        assert_eq!(field(b"hw 3"), "hw%203");
        assert_eq!(field("é%\n'".as_bytes()), "%C3%A9%25%0A%27");
        // Every byte round-trips through a standard decoder.
        let all: Vec<u8> = (0..=255).collect();
        let enc = field(&all);
        assert!(enc.bytes().all(|b| b.is_ascii_graphic()));
        let mut dec = vec![];
        let mut i = 0;
        let b = enc.as_bytes();
        while i < b.len() {
            if b[i] == b'%' {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap();
                dec.push(u8::from_str_radix(hex, 16).unwrap());
                i += 3;
            } else {
                dec.push(b[i]);
                i += 1;
            }
        }
        assert_eq!(dec, all);
        assert_eq!(
            QueueError::Held("hw 3".into()).line(),
            "HELD hw%203 job is held behind gate 'hw 3' (ORCA.GATE ... OPEN releases it)"
        );
        assert_eq!(
            QueueError::Delayed(42).line(),
            "DELAYED 42 job is waiting to be retried (at 42); it is not in the queue order"
        );
    }
}
