//! The module's mirror of Redis's key extraction (`src/redis/keyspec.rs`,
//! what the module touches) agrees with the server's own (`COMMAND
//! GETKEYS`, what ACL and Cluster check) on the built-in commands whose key
//! specs use every form a module command may declare: index and keyword
//! begin searches (GEORADIUS's `STORE`/`STOREDIST`, XREAD's and
//! XREADGROUP's `STREAMS`), range (with `limit`) and keynum key finding
//! (LMPOP, ZUNIONSTORE, SINTERCARD), over random argument lists with the
//! keywords in any case, repeated, at the ends, and followed by a NUL byte.

use orca::redis::commands::COMMANDS;
use orca::redis::keyspec::{acl_keys, redis_specs, Begin, Find, Spec};

use super::*;

fn pairs(v: &Value) -> BTreeMap<String, Value> {
    match v {
        Value::Array(items) => items
            .chunks(2)
            .map(|kv| (as_string(&kv[0]), kv[1].clone()))
            .collect(),
        Value::Map(m) => m.iter().map(|(k, v)| (as_string(k), v.clone())).collect(),
        other => panic!("expected pairs, got {other:?}"),
    }
}

/// The key specs `COMMAND INFO` gives, as the module's `Spec`s (keywords
/// leaked: a test's lifetime); `None` if any is of a kind the module does
/// not declare (flags that make Redis use another method).
fn specs_of(c: &mut Con, name: &str) -> (i64, Option<Vec<Spec>>) {
    let v = ok(c, &args!["COMMAND", "INFO", name]);
    let Value::Array(outer) = v else { panic!() };
    let Value::Array(info) = &outer[0] else {
        panic!("{name}")
    };
    let arity = as_int(&info[1]);
    let Value::Array(specs) = &info[8] else {
        panic!("{name}: {:?}", info[8])
    };
    let mut out = Vec::new();
    for s in specs {
        let s = pairs(s);
        let flags: Vec<String> = match &s["flags"] {
            Value::Array(f) | Value::Set(f) => f.iter().map(as_string).collect(),
            other => panic!("{other:?}"),
        };
        if flags.iter().any(|f| {
            ["incomplete", "variable_flags", "not_key"].contains(&f.to_lowercase().as_str())
        }) {
            return (arity, None);
        }
        let begin = pairs(&s["begin_search"]);
        let bspec = pairs(&begin["spec"]);
        let begin = match as_string(&begin["type"]).as_str() {
            "index" => Begin::Index(as_int(&bspec["index"]) as i32),
            "keyword" => Begin::Keyword {
                keyword: Box::leak(as_string(&bspec["keyword"]).into_boxed_str()),
                startfrom: as_int(&bspec["startfrom"]) as i32,
            },
            _ => return (arity, None),
        };
        let find = pairs(&s["find_keys"]);
        let fspec = pairs(&find["spec"]);
        let find = match as_string(&find["type"]).as_str() {
            "range" => Find::Range {
                lastkey: as_int(&fspec["lastkey"]) as i32,
                keystep: as_int(&fspec["keystep"]) as i32,
                limit: as_int(&fspec["limit"]) as i32,
            },
            "keynum" => Find::KeyNum {
                keynumidx: as_int(&fspec["keynumidx"]) as i32,
                firstkey: as_int(&fspec["firstkey"]) as i32,
                keystep: as_int(&fspec["keystep"]) as i32,
                count: "numkeys",
                keys: "keys",
            },
            _ => return (arity, None),
        };
        out.push(Spec {
            begin,
            find,
            incomplete: false,
        });
    }
    (arity, Some(out))
}

#[test]
fn the_mirror_finds_the_keys_redis_finds() {
    let (_s, mut c) = start_server();
    let tokens: &[&[u8]] = &[
        b"STORE",
        b"store",
        b"StoreDist",
        b"STOREDIST",
        b"STREAMS",
        b"streams",
        b"STREAMS\0x",
        b"STORE\0",
        b"k1",
        b"k2",
        b"k3",
        b"1",
        b"2",
        b"3",
        b"02",
        b"0",
        b"-1",
        b" 2",
        b"COUNT",
        b"",
    ];
    let mut rng = Rng::new(0x6e7);
    let mut compared = 0;
    let mut with_keys = 0;
    for name in [
        "georadius",
        "georadiusbymember",
        "xread",
        "xreadgroup",
        "lmpop",
        "zunionstore",
        "sintercard",
    ] {
        let (arity, specs) = specs_of(&mut c, name);
        let specs = specs.unwrap_or_else(|| panic!("{name}: specs of another kind"));
        assert!(!specs.is_empty(), "{name}");
        for _ in 0..600 {
            let n = arity.unsigned_abs() as usize - 1 + rng.below(7) as usize;
            let mut a: Vec<Vec<u8>> = vec![name.as_bytes().to_vec()];
            a.extend((0..n).map(|_| (*rng.pick(tokens)).to_vec()));
            let mine = redis_specs(&specs, &a);
            let theirs = getkeys(&mut c, &a);
            compared += 1;
            match mine {
                // Redis then falls back to the command's own key finder:
                // nothing to compare.
                None => {}
                Some(p) if p.is_empty() => {
                    assert_eq!(theirs, None, "{}", show_args(&a));
                }
                Some(p) => {
                    with_keys += 1;
                    let want: Vec<String> = p
                        .iter()
                        .map(|&i| String::from_utf8_lossy(&a[i]).into_owned())
                        .collect();
                    assert_eq!(theirs, Some(want), "{}", show_args(&a));
                }
            }
        }
    }
    assert!(
        compared == 4200 && with_keys > 1000,
        "{compared} {with_keys}"
    );
}

/// The mirror of what ACL and `COMMAND GETKEYS` check for the module's own
/// commands (`keyspec::acl_keys`: the specs, and where they give up, an
/// incomplete `FORWARD` spec included, the module's locator through
/// `getkeys-api`) is what the server answers, for every command of the
/// table over random argument lists: counts in every spelling, `FORWARD` as
/// an option and as a value, in any case, twice, after `NEXT`, before a NUL.
#[test]
fn the_mirror_finds_the_keys_the_server_finds_for_every_orca_command() {
    let (_s, mut c) = start_server();
    let mut rng = Rng::new(0x28f);
    let (compared, second, word_only) = compare_orca_keys(&mut c, &mut rng, 400);
    assert_eq!(compared, 400 * COMMANDS.len());
    // Lists where ACK/NACK name a second queue, and where a FORWARD word
    // stands but names none.
    assert!(second > 20 && word_only > 20, "{second} {word_only}");
}

/// Tokens of the module's argument lists, hostile spellings included.
pub const ORCA_TOKENS: &[&[u8]] = &[
    b"q",
    b"q2",
    b"k",
    b"1",
    b"2",
    b"02",
    b"0",
    b"-1",
    b"+1",
    b"4294967298",
    b"FORWARD",
    b"forward",
    b"FoRwArD",
    b"FORWARD\0",
    b"FORWARD\0x",
    b"{}",
    b"RESULT",
    b"TTL",
    b"STOP",
    b"NEXT",
    b"DELAY",
    b"LEASE",
    b"COUNT",
    b"FORMAT",
    b"VALUES",
    b"RESULTS",
    b"",
];

/// A random argument list of command `i` of the table, at least its arity.
pub fn orca_args(rng: &mut Rng, i: usize) -> Vec<Vec<u8>> {
    let cmd = &COMMANDS[i];
    let min = cmd.arity.unsigned_abs() as usize - 1;
    let n = if cmd.arity > 0 {
        min
    } else {
        min + rng.below(8) as usize
    };
    let mut a = vec![cmd.name.to_bytes().to_vec()];
    // Half of the finishes are shaped as a finish is (`q k 1`, then
    // options, whole or not), the others are any tokens.
    let finish = matches!(cmd.keys, orca::redis::keyspec::Keys::Finish(_));
    if finish && rng.below(2) == 0 {
        a.extend([b"q".to_vec(), b"k".to_vec(), b"1".to_vec()]);
        let segments: &[&[&[u8]]] = &[
            &[b"FORWARD", b"q2", b"{}"],
            &[b"forward", b"q2", b"{}"],
            &[b"RESULT", b"FORWARD"],
            &[b"TTL", b"5"],
            &[b"DELAY", b"5"],
            &[b"STOP"],
            &[b"NEXT", b"LEASE", b"0"],
        ];
        for _ in 0..rng.below(4) {
            if rng.below(3) == 0 {
                a.push(rng.pick(ORCA_TOKENS).to_vec());
            } else {
                a.extend(rng.pick(segments).iter().map(|t| t.to_vec()));
            }
        }
        return a;
    }
    while a.len() < n + 1 {
        a.push(rng.pick(ORCA_TOKENS).to_vec());
    }
    a
}

/// Compare `acl_keys` with the server's GETKEYS over `per` lists of each
/// command: (lists compared, lists naming a second queue, lists with a
/// `FORWARD` word naming none).
fn compare_orca_keys(c: &mut Con, rng: &mut Rng, per: usize) -> (usize, usize, usize) {
    let (mut compared, mut second, mut word_only) = (0, 0, 0);
    for (i, cmd) in COMMANDS.iter().enumerate() {
        for _ in 0..per {
            let a = orca_args(rng, i);
            let mine = acl_keys(cmd.keys, &a);
            let want = (!mine.is_empty()).then(|| {
                mine.iter()
                    .map(|&p| String::from_utf8_lossy(&a[p]).into_owned())
                    .collect::<Vec<_>>()
            });
            assert_eq!(getkeys(c, &a), want, "{}", show_args(&a));
            compared += 1;
            let forward_word = a[1..]
                .iter()
                .any(|t| t.len() >= 7 && t[..7].eq_ignore_ascii_case(b"FORWARD"));
            match mine.len() {
                2 if matches!(cmd.keys, orca::redis::keyspec::Keys::Finish(_)) => second += 1,
                1 if forward_word => word_only += 1,
                _ => {}
            }
        }
    }
    (compared, second, word_only)
}
