//! Where a command's keys are, said once: the key specs declared to Redis
//! (`COMMAND INFO`), the module's own locator (the keys its handler
//! touches, answered to Redis through `getkeys-api`), and the extraction
//! the servers run, mirrored here so that tests can check the one rule of
//! docs/security.md ("Keys named among options"): wherever the locator
//! names keys, ACL, `COMMAND GETKEYS` and Cluster check exactly those, and
//! wherever it cannot, the command is refused before its handler runs.
//!
//! What Redis 7.0 and Valkey 8 consult (db.c, acl.c, cluster.c):
//!
//! - ACL (`~`, `%R~`, `%W~`) and `COMMAND GETKEYS`
//!   (`getKeysFromCommandWithSpecs`): the key specs first; only when their
//!   extraction fails (a count it cannot read, keys past the arguments) or
//!   reaches an INCOMPLETE spec that found its keyword, the command's
//!   `getkeys-api` (or, without one, no key at all: ACL lets it through).
//! - Cluster (`CROSSSLOT`, `MOVED`, `getNodeByQuery` via
//!   `getKeysFromCommand`): the `getkeys-api` if declared, else the legacy
//!   (first, last, step) triple; never the key specs. redis-py's cluster
//!   client asks `COMMAND GETKEYS` for a `movablekeys` command, and the
//!   legacy triple otherwise.
//!
//! So (`Keys`): a command whose keys are not all at fixed positions
//! declares `getkeys-api`, answered by `Keys::locate`, the function the
//! handler takes its keys from; each of its key specs is either exact
//! (Redis reads it as the locator does: fixed positions, a key count read
//! as `string2ll` reads it) or INCOMPLETE with a keyword search that finds
//! its keyword wherever the locator names a key there, so that ACL falls
//! back to the locator. `dispatch` (hooks.rs) refuses every command whose
//! arguments the locator cannot read.
//!
//! The mirror (`redis_specs`, `acl_keys`, `cluster_keys`) follows db.c step
//! by step: `Index` and `Keyword` begin searches (the keyword compared as
//! `strcasecmp` does: ASCII case folded, up to a NUL byte; the search never
//! looks at its end index), `Range` and `KeyNum` key finding (the count read
//! by `string2ll`, `args::redis_int`, cast to 32 bits), INCOMPLETE, and "any
//! spec invalid: no keys at all". The locator reads counts strictly: one
//! beyond the arguments is refused, where Redis casts it to 32 bits first
//! (`4294967298` extracts 2 keys there); refusing such a command touches
//! nothing, so nothing unchecked is touched.

use redis_module::commands::{BeginSearch, FindKeys, KeySpec, KeySpecFlags};
use redis_module::RedisError;

pub use super::args::ArgBytes;
use super::args::{redis_int, strict_count};
use super::finish::{self, Grammar};

/// Where Redis starts looking for a spec's keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Begin {
    /// At this argument (1 = the first after the command name).
    Index(i32),
    /// Right after the first argument equal to `keyword`, searching from
    /// `startfrom` (negative: from the end, backwards); no keys from this
    /// spec when the keyword is absent.
    Keyword {
        keyword: &'static str,
        startfrom: i32,
    },
}

/// Which arguments from there are keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Find {
    /// `lastkey` (>= 0: that many after the first; < 0: counted from the
    /// end), every `keystep`-th; `limit` as in Redis.
    Range {
        lastkey: i32,
        keystep: i32,
        limit: i32,
    },
    /// The argument at `keynumidx` (from the begin) counts the keys, which
    /// start `firstkey` after the begin. `count` and `keys` name them in
    /// errors (`numkeys`, `queues`).
    KeyNum {
        keynumidx: i32,
        firstkey: i32,
        keystep: i32,
        count: &'static str,
        keys: &'static str,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spec {
    pub begin: Begin,
    pub find: Find,
    /// May not point out every key (`INCOMPLETE`): Redis then asks the
    /// command's `getkeys-api` whenever this spec finds anything.
    pub incomplete: bool,
}

/// One key at a fixed range (`lastkey` after `begin`).
const fn one(begin: Begin) -> Spec {
    Spec {
        begin,
        find: Find::Range {
            lastkey: 0,
            keystep: 1,
            limit: 0,
        },
        incomplete: false,
    }
}

/// One queue, the first argument.
pub const QUEUE: &[Spec] = &[one(Begin::Index(1))];

/// `<numkeys> <queue> [<queue> ...]`: the count first, the queues after it.
pub const COUNTED_QUEUES: &[Spec] = &[Spec {
    begin: Begin::Index(1),
    find: Find::KeyNum {
        keynumidx: 0,
        firstkey: 1,
        keystep: 1,
        count: "numkeys",
        keys: "queues",
    },
    incomplete: false,
}];

/// A finish (`ORCA.ACK`, `ORCA.NACK`): the queue, and the argument after a
/// `FORWARD` among the options, searched from the first option on. A
/// keyword search cannot tell the option from a value that reads
/// `FORWARD` (`RESULT FORWARD`), so the spec is INCOMPLETE: wherever it
/// finds the word, Redis asks the module (`finish::forward_key`). The
/// search covers every place the option can stand (from the first option
/// to the third argument from the end: it needs two values).
pub const FINISH: &[Spec] = &[
    one(Begin::Index(1)),
    Spec {
        incomplete: true,
        ..one(Begin::Keyword {
            keyword: "FORWARD",
            startfrom: finish::FIRST as i32,
        })
    },
];

/// Where a command's keys are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keys {
    /// Exactly where these specs say (none of them incomplete): Redis and
    /// the module read them alike, the module's counts strictly.
    Specs(&'static [Spec]),
    /// A finish of this grammar: the queue, and `<queue2>` where the
    /// command's own walk of its options finds `FORWARD` (`FINISH`).
    Finish(Grammar),
}

impl Keys {
    /// The specs declared to Redis.
    pub fn specs(self) -> &'static [Spec] {
        match self {
            Keys::Specs(s) => s,
            Keys::Finish(_) => FINISH,
        }
    }

    /// The legacy (first key, last key, step) Redis derives from the specs
    /// (`populateCommandLegacyRangeSpec`): the consecutive fixed ranges of
    /// step 1, else none. Cluster uses it for a command without
    /// `getkeys-api`.
    pub fn legacy(self) -> (i32, i32, i32) {
        let (mut first, mut last) = (i32::MAX, 0);
        for s in self.specs() {
            if let Spec {
                begin: Begin::Index(pos),
                find:
                    Find::Range {
                        lastkey,
                        keystep: 1,
                        ..
                    },
                ..
            } = *s
            {
                if last != 0 && last != pos - 1 {
                    continue;
                }
                first = first.min(pos);
                last = last.max(if lastkey >= 0 { pos + lastkey } else { lastkey });
            }
        }
        if first == i32::MAX {
            (0, 0, 0)
        } else {
            (first, last, 1)
        }
    }

    /// Whether some key is not at the legacy positions: the command then
    /// declares `getkeys-api` (Cluster consults nothing else), and Redis
    /// shows it as `movablekeys` (redis-py's cluster client then asks
    /// `COMMAND GETKEYS`).
    pub fn getkeys_api(self) -> bool {
        let fixed = |s: &Spec| {
            !s.incomplete
                && matches!(
                    (s.begin, s.find),
                    (
                        Begin::Index(_),
                        Find::Range {
                            lastkey: 0..,
                            keystep: 1,
                            ..
                        }
                    )
                )
        };
        !self.specs().iter().all(fixed)
    }

    /// The locator: visit the position of every key the command touches,
    /// in order, or refuse the arguments (the command then touches
    /// nothing). The handler takes its keys from here (MPOP through
    /// `positions`) or from the same walk (`finish::parse`).
    pub fn locate<A: ArgBytes>(
        self,
        args: &[A],
        visit: impl FnMut(usize),
    ) -> Result<(), RedisError> {
        match self {
            Keys::Specs(specs) => walk(specs, args, Reader::Module, visit),
            Keys::Finish(g) => {
                let mut visit = visit;
                if args.len() < 2 {
                    return Err(RedisError::WrongArity);
                }
                visit(1);
                finish::forward_key(g, args).into_iter().for_each(visit);
                Ok(())
            }
        }
    }

    /// Refuse arguments the locator cannot read (before every handler).
    pub fn check<A: ArgBytes>(self, args: &[A]) -> Result<(), RedisError> {
        match self {
            // Never fails past the arity: no walk needed.
            Keys::Finish(_) if args.len() >= 2 => Ok(()),
            _ => self.locate(args, |_| ()),
        }
    }

    /// The positions of the keys, in order.
    pub fn positions<A: ArgBytes>(self, args: &[A]) -> Result<Vec<usize>, RedisError> {
        let mut out = Vec::new();
        self.locate(args, |i| out.push(i))?;
        Ok(out)
    }
}

/// The key specs as Redis takes them, all with the same access flags.
pub fn declare(specs: &[Spec], flags: KeySpecFlags) -> Vec<KeySpec> {
    specs
        .iter()
        .map(|s| {
            let begin = match s.begin {
                Begin::Index(i) => BeginSearch::new_index(i),
                Begin::Keyword { keyword, startfrom } => {
                    BeginSearch::new_keyword(keyword.to_string(), startfrom)
                }
            };
            let find = match s.find {
                Find::Range {
                    lastkey,
                    keystep,
                    limit,
                } => FindKeys::new_range(lastkey, keystep, limit),
                Find::KeyNum {
                    keynumidx,
                    firstkey,
                    keystep,
                    ..
                } => FindKeys::new_keys_num(keynumidx, firstkey, keystep),
            };
            let mut f = KeySpecFlags::from_bits_truncate(flags.bits());
            if s.incomplete {
                f |= KeySpecFlags::INCOMPLETE;
            }
            KeySpec::new(None, f, begin, find)
        })
        .collect()
}

/// Who reads the specs: Redis (its extraction, mirrored), or the module
/// (counts read strictly, with the module's errors).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reader {
    Redis,
    Module,
}

/// `strcasecmp(arg, keyword) == 0`: the argument up to its first NUL byte
/// (where C stops reading), ASCII case folded.
fn keyword_eq(arg: &[u8], keyword: &str) -> bool {
    let end = arg.iter().position(|b| *b == 0).unwrap_or(arg.len());
    arg.get(..end)
        .is_some_and(|a| a.eq_ignore_ascii_case(keyword.as_bytes()))
}

/// Visit the key positions `specs` give in `args` (the command name at 0),
/// spec by spec, in Redis's order (`getKeysUsingKeySpecs`). An error where
/// the extraction fails: for Redis, it then asks the command's
/// `getkeys-api` (or checks no key); for the module, the command is refused.
fn walk<A: ArgBytes>(
    specs: &[Spec],
    args: &[A],
    reader: Reader,
    mut visit: impl FnMut(usize),
) -> Result<(), RedisError> {
    let argc = args.len() as i64;
    let arg = |i: i64| {
        usize::try_from(i)
            .ok()
            .and_then(|i| args.get(i))
            .map(|a| a.arg_bytes())
    };
    for spec in specs {
        let mut first: i64 = match spec.begin {
            Begin::Index(i) => i64::from(i),
            Begin::Keyword { keyword, startfrom } => {
                let startfrom = i64::from(startfrom);
                let (start, end) = if startfrom > 0 {
                    (startfrom, argc - 1)
                } else {
                    (argc + startfrom, 1)
                };
                let mut found = None;
                let mut i = start;
                while i != end {
                    if i >= argc || i < 1 {
                        break;
                    }
                    if arg(i).is_some_and(|a| keyword_eq(a, keyword)) {
                        found = Some(i + 1);
                        break;
                    }
                    i = if start <= end { i + 1 } else { i - 1 };
                }
                match found {
                    Some(f) => f,
                    // No such keyword: no keys from this spec.
                    None => continue,
                }
            }
        };
        let (last, step) = match spec.find {
            Find::Range {
                lastkey,
                keystep,
                limit,
            } => {
                let (lastkey, limit) = (i64::from(lastkey), i64::from(limit));
                let last = if lastkey >= 0 {
                    first + lastkey
                } else if limit == 0 {
                    argc + lastkey
                } else {
                    first + ((argc - first) / limit + lastkey)
                };
                (last, i64::from(keystep))
            }
            Find::KeyNum {
                keynumidx,
                firstkey,
                keystep,
                count,
                keys,
            } => {
                let (keynumidx, firstkey) = (i64::from(keynumidx), i64::from(firstkey));
                if keynumidx >= argc {
                    return Err(RedisError::WrongArity);
                }
                let Some(n) = arg(first + keynumidx) else {
                    return Err(RedisError::WrongArity);
                };
                first += firstkey;
                // The count spans that many arguments (keys every
                // `keystep`-th of them): last = first + numkeys - 1.
                let n = match reader {
                    Reader::Module => {
                        let room = usize::try_from((argc - first).max(0)).unwrap_or(0);
                        strict_count(n, count, room, keys)? as i64
                    }
                    // `(int)numkeys`: a count past 2^31 wraps.
                    Reader::Redis => match redis_int(n) {
                        Some(n) if n >= 0 => i64::from(n as i32),
                        _ => return Err(RedisError::Str("ERR key count Redis cannot read")),
                    },
                };
                (first + n - 1, i64::from(keystep))
            }
        };
        // Out of bounds: a syntax error for Redis, which then checks none.
        if last >= argc || last < first || first >= argc {
            return Err(RedisError::WrongArity);
        }
        if step < 1 {
            return Err(RedisError::Str("ERR key spec with a step below 1"));
        }
        let mut i = first;
        while i <= last {
            visit(i as usize);
            i += step;
        }
        if spec.incomplete {
            // Redis gives up on the specs (after this one found its keys);
            // the module never locates keys with an incomplete spec.
            return Err(RedisError::Str("ERR incomplete key spec"));
        }
    }
    Ok(())
}

/// Redis's extraction from `specs` (`getKeysUsingKeySpecs`): the positions,
/// or `None` where it gives up on them (an invalid spec, or an incomplete
/// one that found its keyword).
pub fn redis_specs<A: ArgBytes>(specs: &[Spec], args: &[A]) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    walk(specs, args, Reader::Redis, |i| out.push(i)).ok()?;
    Some(out)
}

/// What ACL and `COMMAND GETKEYS` check (`getKeysFromCommandWithSpecs`):
/// the specs' keys, else the `getkeys-api`'s (the locator's, none where it
/// refuses the arguments), else none.
pub fn acl_keys<A: ArgBytes>(keys: Keys, args: &[A]) -> Vec<usize> {
    match redis_specs(keys.specs(), args) {
        Some(k) => k,
        None if keys.getkeys_api() => keys.positions(args).unwrap_or_default(),
        None => Vec::new(),
    }
}

/// What Cluster checks (`getKeysFromCommand`): the `getkeys-api`'s keys,
/// else the legacy range (none where it passes the arguments).
pub fn cluster_keys<A: ArgBytes>(keys: Keys, args: &[A]) -> Vec<usize> {
    if keys.getkeys_api() {
        return keys.positions(args).unwrap_or_default();
    }
    let (first, last, step) = keys.legacy();
    if first <= 0 || step < 1 {
        return Vec::new();
    }
    let argc = args.len() as i64;
    let (first, last) = (i64::from(first), i64::from(last));
    let last = if last < 0 { argc + last } else { last };
    let mut out = Vec::new();
    let mut j = first;
    while j <= last {
        if j >= argc {
            return Vec::new();
        }
        out.push(j as usize);
        j += i64::from(step);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(items: &[&str]) -> Vec<Vec<u8>> {
        items.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    fn msg(e: RedisError) -> String {
        match e {
            RedisError::String(m) => m,
            RedisError::Str(m) => m.to_string(),
            RedisError::WrongArity => "arity".into(),
            other => format!("{other:?}"),
        }
    }

    /// The module's reading of exact specs.
    fn keys(specs: &'static [Spec], items: &[&str]) -> Result<Vec<usize>, String> {
        Keys::Specs(specs).positions(&a(items)).map_err(msg)
    }

    /// Redis's reading of any specs.
    fn redis(specs: &[Spec], items: &[&str]) -> Option<Vec<usize>> {
        redis_specs(specs, &a(items))
    }

    #[test]
    fn one_queue() {
        assert_eq!(keys(QUEUE, &["orca.len", "q"]), Ok(vec![1]));
        assert_eq!(keys(QUEUE, &["orca.ack", "q", "k", "1"]), Ok(vec![1]));
        assert_eq!(keys(QUEUE, &["orca.len"]), Err("arity".into()));
        assert_eq!(Keys::Specs(QUEUE).legacy(), (1, 1, 1));
        assert!(!Keys::Specs(QUEUE).getkeys_api());
        assert_eq!(cluster_keys(Keys::Specs(QUEUE), &a(&["c", "q"])), vec![1]);
        assert_eq!(
            cluster_keys(Keys::Specs(QUEUE), &a(&["c"])),
            Vec::<usize>::new()
        );
    }

    #[test]
    fn counted_queues_as_redis_reads_the_count() {
        let mpop = |n: &str| keys(COUNTED_QUEUES, &["orca.mpop", n, "a", "b", "LEASE", "0"]);
        assert_eq!(mpop("1"), Ok(vec![2]));
        assert_eq!(mpop("2"), Ok(vec![2, 3]));
        assert_eq!(mpop("4"), Ok(vec![2, 3, 4, 5]));
        for bad in ["02", "002", "-0", "-02"] {
            assert!(mpop(bad).unwrap_err().contains("leading zeros"), "{bad}");
        }
        for bad in ["+2", " 2", "2 ", "2.0", "0x2", "two", ""] {
            assert_eq!(
                mpop(bad),
                Err("ERR numkeys must be an integer".into()),
                "{bad}"
            );
        }
        for bad in [
            "0",
            "-1",
            "5",
            "4294967298",
            "2147483649",
            "9223372036854775807",
            "-9223372036854775808",
        ] {
            assert_eq!(
                mpop(bad),
                Err("ERR numkeys must be between 1 and the number of queues given".into()),
                "{bad}"
            );
        }
        assert_eq!(
            keys(COUNTED_QUEUES, &["orca.mpop", "1"]),
            Err("ERR numkeys must be between 1 and the number of queues given".into())
        );
        assert_eq!(keys(COUNTED_QUEUES, &["orca.mpop"]), Err("arity".into()));
        assert_eq!(Keys::Specs(COUNTED_QUEUES).legacy(), (0, 0, 0));
        assert!(Keys::Specs(COUNTED_QUEUES).getkeys_api());
        // Redis reads the canonical counts alike, gives up on the others,
        // and wraps a count past 2^32 (which the module refuses).
        let r = |n: &str| redis(COUNTED_QUEUES, &["orca.mpop", n, "a", "b", "LEASE", "0"]);
        assert_eq!(r("2"), Some(vec![2, 3]));
        assert_eq!(r("4"), Some(vec![2, 3, 4, 5]));
        for bad in ["02", "+2", " 2", "-0", "0", "-1", "5", "2147483650"] {
            assert_eq!(r(bad), None, "{bad}");
        }
        assert_eq!(r("4294967298"), Some(vec![2, 3]));
    }

    /// The finish's specs: the queue, and the key after a `FORWARD` found
    /// from the first option on, incomplete: Redis gives up on the specs
    /// wherever the word stands there (and asks the module), and never
    /// looks at the last argument.
    #[test]
    fn the_finish_spec_gives_up_wherever_forward_stands() {
        let r = |items: &[&str]| redis(FINISH, items);
        assert_eq!(r(&["c", "q", "k", "1"]), Some(vec![1]));
        assert_eq!(r(&["c", "q", "k", "1", "RESULT", "x"]), Some(vec![1]));
        assert_eq!(r(&["c", "q", "k", "1", "FORWARD", "q2", "{}"]), None);
        assert_eq!(r(&["c", "q", "k", "1", "RESULT", "forward"]), Some(vec![1]));
        assert_eq!(r(&["c", "q", "k", "1", "RESULT", "forward", "x"]), None);
        assert_eq!(r(&["c", "q", "FORWARD", "1", "x", "y"]), Some(vec![1]));
        assert_eq!(r(&["c", "q", "k", "1", "FORWARD\0x", "q2", "{}"]), None);
        let k = Keys::Finish(finish::ACK);
        assert_eq!(k.legacy(), (1, 1, 1));
        assert!(k.getkeys_api());
        let fwd = a(&[
            "c", "q", "k", "1", "RESULT", "FORWARD", "FORWARD", "q2", "{}",
        ]);
        assert_eq!(k.positions(&fwd).ok(), Some(vec![1, 7]));
        assert_eq!(acl_keys(k, &fwd), vec![1, 7]);
        assert_eq!(cluster_keys(k, &fwd), vec![1, 7]);
        let value = a(&["c", "q", "k", "1", "RESULT", "FORWARD", "TTL", "5"]);
        assert_eq!(acl_keys(k, &value), vec![1]);
        assert_eq!(cluster_keys(k, &value), vec![1]);
    }

    /// Keyword searches as Redis runs them: from the end backwards, case
    /// folded, up to a NUL byte, never at the search's end index.
    #[test]
    fn keyword_specs_search_as_redis_does() {
        const FWD: &[Spec] = &[
            QUEUE[0],
            one(Begin::Keyword {
                keyword: "FORWARD",
                startfrom: -2,
            }),
        ];
        let fwd = FWD;
        let k = |items: &[&str]| redis(fwd, items);
        assert_eq!(k(&["c", "q", "k", "1"]), Some(vec![1]));
        assert_eq!(k(&["c", "q", "k", "1", "FORWARD", "q2"]), Some(vec![1, 5]));
        assert_eq!(k(&["c", "q", "k", "1", "forward", "q2"]), Some(vec![1, 5]));
        // The last FORWARD before the end wins: the search runs backwards.
        assert_eq!(
            k(&["c", "q", "FORWARD", "x", "FORWARD", "q2"]),
            Some(vec![1, 5])
        );
        // strcasecmp stops at a NUL byte.
        assert_eq!(
            redis_specs(
                fwd,
                &[
                    b"c".to_vec(),
                    b"q".to_vec(),
                    b"FORWARD\0x".to_vec(),
                    b"q2".to_vec()
                ]
            ),
            Some(vec![1, 3])
        );
        // The end index (1) is never looked at.
        assert_eq!(k(&["c", "FORWARD", "q2"]), Some(vec![1]));
        // Forwards from 2, the last argument is never looked at.
        const FWD2: &[Spec] = &[one(Begin::Keyword {
            keyword: "TO",
            startfrom: 2,
        })];
        let fwd2 = FWD2;
        assert_eq!(
            redis(fwd2, &["c", "TO", "x", "TO", "y", "TO"]),
            Some(vec![4])
        );
        assert_eq!(redis(fwd2, &["c", "a", "b", "TO"]), Some(vec![]));
        assert_eq!(Keys::Specs(fwd).legacy(), (1, 1, 1));
    }

    #[test]
    fn ranges_and_steps() {
        const REST: &[Spec] = &[Spec {
            begin: Begin::Index(2),
            find: Find::Range {
                lastkey: -1,
                keystep: 2,
                limit: 0,
            },
            incomplete: false,
        }];
        let rest = REST;
        assert_eq!(
            redis(rest, &["c", "x", "k1", "v1", "k2", "v2"]),
            Some(vec![2, 4])
        );
        assert_eq!(redis(rest, &["c", "x"]), None);
        const STEPPED: &[Spec] = &[Spec {
            begin: Begin::Index(1),
            find: Find::KeyNum {
                keynumidx: 0,
                firstkey: 1,
                keystep: 2,
                count: "numkeys",
                keys: "keys",
            },
            incomplete: false,
        }];
        let stepped = STEPPED;
        // As in db.c, the count spans arguments: keys every step within it.
        assert_eq!(
            keys(stepped, &["c", "2", "k1", "v1", "k2", "v2"]),
            Ok(vec![2])
        );
        assert_eq!(
            keys(stepped, &["c", "4", "k1", "v1", "k2", "v2"]),
            Ok(vec![2, 4])
        );
        assert_eq!(keys(stepped, &["c", "3", "k1", "v1", "k2"]), Ok(vec![2, 4]));
        assert!(keys(stepped, &["c", "5", "k1", "v1", "k2", "v2"]).is_err());
        assert_eq!(redis(stepped, &["c", "5", "k1", "v1", "k2", "v2"]), None);
    }

    #[test]
    fn declared_flags_mark_the_incomplete_spec() {
        let f = KeySpecFlags::READ_WRITE | KeySpecFlags::ACCESS;
        let d = declare(FINISH, f);
        assert_eq!(d.len(), 2);
        let flags = |k: &KeySpec| raw_flags(k);
        assert_eq!(flags(&d[0]) & u64::from(KeySpecFlags::INCOMPLETE.bits()), 0);
        assert_ne!(flags(&d[1]) & u64::from(KeySpecFlags::INCOMPLETE.bits()), 0);
    }

    fn raw_flags(k: &KeySpec) -> u64 {
        redis_module::raw::RedisModuleCommandKeySpec::from(k).flags
    }
}
