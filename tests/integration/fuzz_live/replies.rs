//! Commands in flight and what the fuzzer checks of their replies: no
//! internal errors, only clean lines with a documented code, no broken
//! invariant; keys and leases harvested for later commands.

use crate::common::*;

use super::wire::*;
use super::*;

/// A wrapped command (inside MULTI/EXEC or EVAL) and the queue it names.
pub type Inner = (Vec<Vec<u8>>, Option<Vec<u8>>);

/// One command on the wire, with what is needed to read its reply.
pub struct Sent {
    pub args: Vec<Vec<u8>>,
    /// The queue an `ORCA.*` command names (for harvesting leases).
    pub queue: Option<Vec<u8>>,
    /// For `EXEC`: the queued commands (their replies are its array); for
    /// `EVAL`: the wrapped command.
    pub inner: Vec<Inner>,
}

impl Sent {
    pub fn new(args: Vec<Vec<u8>>) -> Sent {
        let queue = (args.len() >= 2 && is_orca(&args[0])).then(|| args[1].clone());
        Sent {
            args,
            queue,
            inner: Vec::new(),
        }
    }
}

pub fn is_orca(name: &[u8]) -> bool {
    name.len() > 5 && name[..5].eq_ignore_ascii_case(b"orca.")
}

pub fn val_str(v: &R) -> Option<String> {
    match v {
        R::Bulk(b) | R::Status(b) => Some(String::from_utf8_lossy(b).into_owned()),
        R::Int(i) => Some(i.to_string()),
        _ => None,
    }
}

/// Field/value pairs of a flat RESP2 array or a RESP3 map.
pub fn pairs(v: &R) -> Option<Vec<(String, &R)>> {
    match v {
        R::Array(items) if items.len() >= 2 && items.len() % 2 == 0 => {
            let mut out = Vec::new();
            for p in items.chunks(2) {
                match &p[0] {
                    R::Bulk(_) | R::Status(_) => out.push((val_str(&p[0])?, &p[1])),
                    _ => return None,
                }
            }
            Some(out)
        }
        R::Map(m) => m.iter().map(|(k, v)| Some((val_str(k)?, v))).collect(),
        _ => None,
    }
}

#[derive(Default)]
pub struct Counts {
    pub commands: u64,
    pub orca_commands: u64,
    pub errors: u64,
    pub batches: u64,
    pub resp3_batches: u64,
    pub multi: u64,
    pub eval: u64,
    pub imports: u64,
    pub imports_ok: u64,
    pub restores: u64,
    pub restores_ok: u64,
    pub leases_used: u64,
    pub acks_ok: u64,
    /// Leases `ORCA.MACK` acked (its `1` outcomes).
    pub mack_acks_ok: usize,
    pub reloads: u64,
    pub rewrites: u64,
    pub aof_blobs: u64,
    pub checks: u64,
    pub blocker_pops: u64,
    pub replica_queues: u64,
    /// Error reply kinds and counts, with `ORCA_FUZZ_ERRORS=1`.
    pub error_texts: Option<HashMap<String, u64>>,
    /// Per command name (upper case): (ok replies, error replies).
    pub per_command: std::collections::BTreeMap<String, (u64, u64)>,
}

impl Fuzz {
    // -- replies ------------------------------------------------------------

    pub(super) fn inspect(&mut self, s: &Sent, v: &R) {
        self.counts.commands += 1;
        if is_orca(&s.args[0]) {
            self.counts.orca_commands += 1;
        }
        if let Some(q) = &s.queue {
            let q = q.clone();
            self.record(&q, &s.args);
        } else if s.args.len() >= 2 && !eq_ci(&s.args[0], "EVAL") {
            let k = s.args[1].clone();
            self.record(&k, &s.args);
        }
        let name = s.args[0].to_ascii_uppercase();
        {
            let e = self
                .counts
                .per_command
                .entry(String::from_utf8_lossy(&name).into_owned())
                .or_default();
            if matches!(v, R::Err(_)) {
                e.1 += 1;
            } else {
                e.0 += 1;
            }
        }
        match v {
            R::Err(e) => {
                self.counts.errors += 1;
                if self.counts.error_texts.is_some() {
                    // Error kinds for tuning (ORCA_FUZZ_ERRORS=1): the text up
                    // to its first quote or digit.
                    let t = String::from_utf8_lossy(e);
                    let cut = t
                        .find(|c: char| c == '\'' || c.is_ascii_digit())
                        .unwrap_or(t.len());
                    let k = format!("{} {}", String::from_utf8_lossy(&name), &t[..cut.min(70)]);
                    if let Some(m) = self.counts.error_texts.as_mut() {
                        *m.entry(k).or_insert(0) += 1;
                    }
                }
                self.check_error(&s.args, e);
                if name == b"RESTORE" {
                    return;
                }
            }
            R::Array(items) if name == b"EXEC" => {
                for (i, item) in items.iter().enumerate() {
                    if let Some((a, q)) = s.inner.get(i) {
                        let inner = Sent {
                            args: a.clone(),
                            queue: q.clone(),
                            inner: Vec::new(),
                        };
                        self.inspect_inner(&inner, item);
                    }
                }
            }
            _ => {}
        }
        if name == b"EVAL" {
            if let Some((a, _)) = s.inner.first() {
                let inner = Sent {
                    args: a.clone(),
                    queue: s.queue.clone(),
                    inner: Vec::new(),
                };
                if !matches!(v, R::Err(_)) {
                    self.inspect_inner(&inner, v);
                }
            }
            return;
        }
        if name == b"DUMP" {
            if let R::Bulk(b) = v {
                if self.dump_format.is_none() {
                    self.dump_format = DumpFormat::learn(b);
                }
                if b.first() == Some(&7) {
                    let b = b.clone();
                    push_bounded(&mut self.dumps, b, 32, &mut self.rng);
                }
            }
            return;
        }
        if name == b"RESTORE" && v.is_ok() {
            self.counts.restores_ok += 1;
        }
        if name == b"ORCA.IMPORT" && matches!(v, R::Int(_)) {
            self.counts.imports_ok += 1;
        }
        if name == b"ORCA.ACK" && matches!(v, R::Int(1)) {
            self.counts.acks_ok += 1;
        }
        // A hand-off: [the ACK's reply, the successor's write reply].
        if name == b"ORCA.ACK"
            && matches!(v, R::Array(a) if a.len() == 2 && matches!(a[1], R::Map(_) | R::Array(_)))
        {
            self.counts.acks_ok += 1;
        }
        if name == b"ORCA.MACK" {
            // [outcomes] or, with NEXT, [[outcomes], [jobs]].
            let outcomes = match v {
                R::Array(a) if matches!(a.first(), Some(R::Array(_))) => a.first(),
                _ => Some(v),
            };
            if let Some(R::Array(os)) = outcomes {
                self.counts.mack_acks_ok += os.iter().filter(|o| matches!(o, R::Int(1))).count();
            }
        }
        if let Some(q) = s.queue.clone() {
            self.harvest(v, &q, None);
        }
    }

    pub(super) fn inspect_inner(&mut self, s: &Sent, v: &R) {
        if let R::Err(e) = v {
            self.check_error(&s.args, e);
            return;
        }
        if let Some(q) = s.queue.clone() {
            if is_orca(&s.args[0]) {
                self.harvest(v, &q, None);
            }
        }
    }

    pub(super) fn check_error(&mut self, args: &[Vec<u8>], raw_text: &[u8]) {
        let shown = show_args(args);
        let text = &*String::from_utf8_lossy(raw_text);
        if text.starts_with("INTERNAL ") || text.contains("internal error") {
            let hist = args.get(1).map(|k| self.history_of(k)).unwrap_or_default();
            self.fail(
                "internal-error",
                format!(
                    "internal error reply to {shown}: {text}\n  history of the key:\n    {hist}"
                ),
            );
        }
        if text.starts_with("INVARIANT ") || text.contains("invariant broken") {
            let hist = args.get(1).map(|k| self.history_of(k)).unwrap_or_default();
            self.fail(
                "check",
                format!("ORCA.CHECK failed: {text}\n  last commands on the key:\n    {hist}"),
            );
        }
        if is_orca(&args[0]) || eq_ci(&args[0], "EVAL") {
            // A code of docs/commands.md's table (ERR_CODES) or Redis's
            // own from a transaction, a script or CLIENT UNBLOCK.
            let ok_prefix = ERR_CODES
                .iter()
                .chain(&["WRONGTYPE ", "EXECABORT ", "UNBLOCKED ", "NOSCRIPT "])
                .any(|p| text.starts_with(p));
            let clean = std::str::from_utf8(raw_text).is_ok()
                && text.chars().all(|c| !c.is_control())
                && text.len() <= 1200;
            if !ok_prefix || !clean {
                self.fail(
                    "unclean-error",
                    format!(
                        "unclean error reply (not one printable UTF-8 line) to {shown}: {:?}",
                        String::from_utf8_lossy(raw_text)
                    ),
                );
            }
        }
    }

    /// Collect orca keys and lease tokens from a reply.
    pub(super) fn harvest(&mut self, v: &R, queue: &[u8], outer_key: Option<&[u8]>) {
        if let Some(ps) = pairs(v) {
            let mut key: Option<Vec<u8>> = None;
            let mut lease: Option<Vec<u8>> = None;
            // An MPOP reply names the queue its job came from.
            let mut from: Option<Vec<u8>> = None;
            for (f, val) in &ps {
                match f.as_str() {
                    "key" => key = val_str(val).map(String::into_bytes),
                    "lease" => lease = val_str(val).map(String::into_bytes),
                    "queue" => {
                        if let R::Bulk(b) = val {
                            from = Some(b.clone());
                        }
                    }
                    _ => {}
                }
            }
            let queue = from.as_deref().unwrap_or(queue);
            let key = key.or_else(|| outer_key.map(<[u8]>::to_vec));
            if let Some(k) = &key {
                if k.len() == 44 && self.pct(50) {
                    push_bounded(&mut self.keys, k.clone(), 512, &mut self.rng);
                }
                if let Some(l) = lease {
                    push_bounded(
                        &mut self.leases,
                        (queue.to_vec(), k.clone(), l),
                        256,
                        &mut self.rng,
                    );
                }
            }
            for (f, val) in ps {
                if f == "leases" {
                    if let R::Array(items) = val {
                        for it in items {
                            self.harvest(it, queue, key.as_deref());
                        }
                    }
                }
            }
            return;
        }
        if let Some((k, l, from)) = values_delivery(v) {
            let queue = from.unwrap_or(queue).to_vec();
            if self.pct(50) {
                push_bounded(&mut self.keys, k.to_vec(), 512, &mut self.rng);
            }
            if let Some(l) = l {
                let lease = (queue, k.to_vec(), l.to_vec());
                push_bounded(&mut self.leases, lease, 256, &mut self.rng);
            }
            return;
        }
        if let R::Array(items) = v {
            for it in items {
                self.harvest(it, queue, None);
            }
        }
    }
}

/// The key, lease and queue (MPOP) of a delivery.
type KeyLeaseQueue<'a> = (&'a [u8], Option<&'a [u8]>, Option<&'a [u8]>);

/// A `FORMAT VALUES` delivery (11 values, 12 with MPOP's queue; `key` 7th,
/// `lease` 8th): its key, lease and queue.
fn values_delivery(v: &R) -> Option<KeyLeaseQueue<'_>> {
    let R::Array(items) = v else { return None };
    if !(items.len() == 11 || items.len() == 12) || !matches!(items.first(), Some(R::Int(_))) {
        return None;
    }
    let R::Bulk(key) = items.get(6)? else {
        return None;
    };
    if key.len() != 44 {
        return None;
    }
    let lease = match items.get(7)? {
        R::Bulk(l) => Some(&l[..]),
        _ => None,
    };
    let queue = match items.get(11) {
        Some(R::Bulk(q)) => Some(&q[..]),
        _ => None,
    };
    Some((key, lease, queue))
}
