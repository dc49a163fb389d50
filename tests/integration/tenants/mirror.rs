//! The module's mirror of Redis's key extraction (`src/redis/keyspec.rs`,
//! what the module touches) agrees with the server's own (`COMMAND
//! GETKEYS`, what ACL and Cluster check) on the built-in commands whose key
//! specs use every form a module command may declare: index and keyword
//! begin searches (GEORADIUS's `STORE`/`STOREDIST`, XREAD's and
//! XREADGROUP's `STREAMS`), range (with `limit`) and keynum key finding
//! (LMPOP, ZUNIONSTORE, SINTERCARD), over random argument lists with the
//! keywords in any case, repeated, at the ends, and followed by a NUL byte.

use orca::redis::keyspec::{positions, Begin, Find, Spec};

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
        out.push(Spec { begin, find });
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
            let mine = positions(&specs, &a);
            let theirs = getkeys(&mut c, &a);
            compared += 1;
            match mine {
                // Redis may then fall back to the command's own key finder:
                // nothing to compare (a module command has none: refused).
                Err(_) => {}
                Ok(p) if p.is_empty() => {
                    assert_eq!(theirs, None, "{}", show_args(&a));
                }
                Ok(p) => {
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
