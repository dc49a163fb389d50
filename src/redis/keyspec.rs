//! Where a command's keys are, said once: the key specs declared to Redis
//! (`COMMAND INFO`, and what ACL and Cluster check) and the extraction Redis
//! runs on them, mirrored here so that the module finds its keys exactly
//! where Redis found them.
//!
//! ACL (`~pattern`, `%R~`, `%W~`) and Cluster (`CROSSSLOT`, `MOVED`) check
//! the keys Redis extracts from the arguments with the command's key specs
//! (`getKeysUsingKeySpecs`, db.c, the same in Redis 7.0 and Valkey 8).
//! When that extraction fails (a key count Redis cannot read, a count past
//! the arguments), Redis checks NO key at all and runs the command anyway:
//! ACL lets it through, Cluster neither redirects it nor checks slots. So:
//!
//! - every command is refused before its handler runs when Redis's
//!   extraction fails for it (`check`, called by the command dispatch for
//!   every entry of the table);
//! - a handler whose keys are not just the first argument takes their
//!   positions from `positions` (the mirror), never from a parse of its
//!   own, so the keys it touches are the keys Redis checked.
//!
//! The mirror follows db.c step by step: `Index` and `Keyword` begin
//! searches (the keyword compared as `strcasecmp` does: ASCII case folded,
//! up to a NUL byte; the search never looks at its end index), `Range` and
//! `KeyNum` key finding (the count read by `string2ll`, `args::redis_int`),
//! and "any spec invalid: no keys at all". It is stricter in one place
//! only: a count beyond the arguments is refused, where Redis 7.0/Valkey
//! cast it to 32 bits first (`4294967298` extracts 2 keys there); refusing
//! such a command touches nothing, so nothing unchecked is touched.
//!
//! docs/security.md ("Keys, ACL and Cluster") says what a future command
//! that names a key among its options must declare and check.

use redis_module::commands::{BeginSearch, FindKeys, KeySpec, KeySpecFlags};
use redis_module::{RedisError, RedisString};

use super::args::strict_count;

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
}

/// One queue, the first argument.
pub const QUEUE: &[Spec] = &[Spec {
    begin: Begin::Index(1),
    find: Find::Range {
        lastkey: 0,
        keystep: 1,
        limit: 0,
    },
}];

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
}];

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
            KeySpec::new(
                None,
                KeySpecFlags::from_bits_truncate(flags.bits()),
                begin,
                find,
            )
        })
        .collect()
}

/// The legacy (first key, last key, step) Redis shows in `COMMAND INFO`:
/// that of a first spec at a fixed index with a fixed range, else none
/// (Redis then finds the keys through the specs: `movablekeys`).
pub fn legacy(specs: &[Spec]) -> (i32, i32, i32) {
    match specs.first() {
        Some(Spec {
            begin: Begin::Index(first),
            find:
                Find::Range {
                    lastkey,
                    keystep,
                    limit: 0,
                },
        }) if *lastkey >= 0 && specs.len() == 1 => (*first, first + lastkey, *keystep),
        _ => (0, 0, 0),
    }
}

/// An argument's bytes (client strings in the module, byte strings in tests).
pub trait ArgBytes {
    fn arg_bytes(&self) -> &[u8];
}

impl ArgBytes for RedisString {
    fn arg_bytes(&self) -> &[u8] {
        self.as_slice()
    }
}

impl ArgBytes for &[u8] {
    fn arg_bytes(&self) -> &[u8] {
        self
    }
}

impl ArgBytes for Vec<u8> {
    fn arg_bytes(&self) -> &[u8] {
        self
    }
}

/// `strcasecmp(arg, keyword) == 0`: the argument up to its first NUL byte
/// (where C stops reading), ASCII case folded.
fn keyword_eq(arg: &[u8], keyword: &str) -> bool {
    let end = arg.iter().position(|b| *b == 0).unwrap_or(arg.len());
    arg.get(..end)
        .is_some_and(|a| a.eq_ignore_ascii_case(keyword.as_bytes()))
}

/// Visit the key positions Redis extracts from `args` (the command name
/// at 0), spec by spec, in its order. An error when Redis's extraction
/// fails (it would check no key): the command must then be refused.
pub fn for_each<A: ArgBytes>(
    specs: &[Spec],
    args: &[A],
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
                if last >= argc || last < first || first >= argc {
                    return Err(RedisError::WrongArity);
                }
                (last, i64::from(keystep))
            }
            Find::KeyNum {
                keynumidx,
                firstkey,
                keystep,
                count,
                keys,
            } => {
                let Some(n) = arg(first + i64::from(keynumidx)) else {
                    return Err(RedisError::WrongArity);
                };
                first += i64::from(firstkey);
                // Redis: last = first + numkeys - 1 (the count spans that
                // many arguments, keys every `keystep`-th of them), refused
                // past the end, at 0 and below.
                let room = usize::try_from((argc - first).max(0)).unwrap_or(0);
                let n = strict_count(n, count, room, keys)? as i64;
                (first + n - 1, i64::from(keystep))
            }
        };
        if step < 1 {
            return Err(RedisError::Str("ERR key spec with a step below 1"));
        }
        let mut i = first;
        while i <= last {
            visit(i as usize);
            i += step;
        }
    }
    Ok(())
}

/// Refuse a command whose keys Redis could not extract.
pub fn check<A: ArgBytes>(specs: &[Spec], args: &[A]) -> Result<(), RedisError> {
    for_each(specs, args, |_| ())
}

/// The positions of the keys Redis checked, in its order.
pub fn positions<A: ArgBytes>(specs: &[Spec], args: &[A]) -> Result<Vec<usize>, RedisError> {
    let mut out = Vec::new();
    for_each(specs, args, |i| out.push(i))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(items: &[&str]) -> Vec<Vec<u8>> {
        items.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    fn keys(specs: &[Spec], items: &[&str]) -> Result<Vec<usize>, String> {
        positions(specs, &a(items)).map_err(|e| match e {
            RedisError::String(m) => m,
            RedisError::Str(m) => m.to_string(),
            RedisError::WrongArity => "arity".into(),
            other => format!("{other:?}"),
        })
    }

    #[test]
    fn one_queue() {
        assert_eq!(keys(QUEUE, &["orca.len", "q"]), Ok(vec![1]));
        assert_eq!(keys(QUEUE, &["orca.ack", "q", "k", "1"]), Ok(vec![1]));
        assert_eq!(keys(QUEUE, &["orca.len"]), Err("arity".into()));
        assert_eq!(legacy(QUEUE), (1, 1, 1));
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
        assert_eq!(legacy(COUNTED_QUEUES), (0, 0, 0));
    }

    /// A queue first and a second key after an option keyword (the form
    /// a `FORWARD <queue>` option would declare), searched the way Redis
    /// searches: from the end backwards, case folded, up to a NUL byte,
    /// never at the search's end index.
    #[test]
    fn keyword_specs_search_as_redis_does() {
        let fwd: &[Spec] = &[
            QUEUE[0],
            Spec {
                begin: Begin::Keyword {
                    keyword: "FORWARD",
                    startfrom: -2,
                },
                find: Find::Range {
                    lastkey: 0,
                    keystep: 1,
                    limit: 0,
                },
            },
        ];
        let k = |items: &[&str]| keys(fwd, items);
        assert_eq!(k(&["c", "q", "k", "1"]), Ok(vec![1]));
        assert_eq!(k(&["c", "q", "k", "1", "FORWARD", "q2"]), Ok(vec![1, 5]));
        assert_eq!(k(&["c", "q", "k", "1", "forward", "q2"]), Ok(vec![1, 5]));
        // The last FORWARD before the end wins: the search runs backwards.
        assert_eq!(
            k(&["c", "q", "FORWARD", "x", "FORWARD", "q2"]),
            Ok(vec![1, 5])
        );
        // strcasecmp stops at a NUL byte.
        assert_eq!(
            positions(
                fwd,
                &[
                    b"c".to_vec(),
                    b"q".to_vec(),
                    b"FORWARD\0x".to_vec(),
                    b"q2".to_vec()
                ]
            )
            .ok(),
            Some(vec![1, 3])
        );
        // The end index (1) is never looked at.
        assert_eq!(k(&["c", "FORWARD", "q2"]), Ok(vec![1]));
        // Forwards from 2, the last argument is never looked at.
        let fwd2: &[Spec] = &[Spec {
            begin: Begin::Keyword {
                keyword: "TO",
                startfrom: 2,
            },
            find: Find::Range {
                lastkey: 0,
                keystep: 1,
                limit: 0,
            },
        }];
        assert_eq!(keys(fwd2, &["c", "TO", "x", "TO", "y", "TO"]), Ok(vec![4]));
        assert_eq!(keys(fwd2, &["c", "a", "b", "TO"]), Ok(vec![]));
        assert_eq!(legacy(fwd), (0, 0, 0));
    }

    #[test]
    fn ranges_and_steps() {
        let rest: &[Spec] = &[Spec {
            begin: Begin::Index(2),
            find: Find::Range {
                lastkey: -1,
                keystep: 2,
                limit: 0,
            },
        }];
        assert_eq!(
            keys(rest, &["c", "x", "k1", "v1", "k2", "v2"]),
            Ok(vec![2, 4])
        );
        assert_eq!(keys(rest, &["c", "x"]), Err("arity".into()));
        let stepped: &[Spec] = &[Spec {
            begin: Begin::Index(1),
            find: Find::KeyNum {
                keynumidx: 0,
                firstkey: 1,
                keystep: 2,
                count: "numkeys",
                keys: "keys",
            },
        }];
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
    }

    /// The table's commands use these specs, and MPOP's handler finds its
    /// queues with the one the table declares.
    #[test]
    fn the_table_declares_these_specs() {
        use super::super::commands::COMMANDS;
        for c in COMMANDS {
            let name = c.name.to_str().unwrap();
            let want = if name == "orca.mpop" {
                COUNTED_QUEUES
            } else {
                QUEUE
            };
            assert_eq!(c.keys, want, "{name}");
        }
    }
}
