//! `ORCA.IMPORT`, the form an AOF rewrite without preamble stores queues
//! in: the blobs rebuild a queue exactly on another server, importing one
//! twice is refused, garbage and corrupted blobs are refused or give a
//! queue that passes `ORCA.CHECK` and works.

use crate::common::*;

#[test]
fn import_rejects_garbage() {
    let (_s, mut c) = start_server();
    let q = populated(&mut c);
    let mut blobs: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"garbage".to_vec(),
        vec![0u8; 64],
        vec![0xffu8; 64],
    ];
    for n in 1..40u8 {
        blobs.push((0..n).map(|i| i.wrapping_mul(37).wrapping_add(n)).collect());
    }
    // Header-like prefixes: version byte 1 followed by junk.
    for n in 0..40u8 {
        let mut b = vec![1u8];
        b.extend((0..n).map(|i| if i % 3 == 0 { 0 } else { 0xff }));
        blobs.push(b);
    }
    for b in &blobs {
        assert_rejected(&mut c, q, &args!["ORCA.IMPORT", q, b.as_slice()], CORRUPT);
        assert_rejected(
            &mut c,
            "fresh",
            &args!["ORCA.IMPORT", "fresh", b.as_slice()],
            CORRUPT,
        );
    }
    assert!(!exists(&mut c, "fresh"));
}

/// How an import of a damaged blob may be refused.
const CORRUPT: &[&str] = &["CORRUPT "];

fn refusal(e: &str) -> bool {
    e.starts_with("CORRUPT ") || e.starts_with("QUEUEFULL ")
}

fn mutate(rng: &mut Rng, blob: &[u8]) -> Vec<u8> {
    let mut b = blob.to_vec();
    let at = |rng: &mut Rng, b: &Vec<u8>| rng.below(b.len().max(1) as u64) as usize;
    for _ in 0..1 + rng.below(3) {
        if b.is_empty() {
            b.push(1);
        }
        match rng.below(7) {
            0 => {
                let i = at(rng, &b);
                b[i] ^= 1 << rng.below(8);
            }
            1 => {
                let i = at(rng, &b);
                b[i] = *rng.pick(&[0u8, 1, 2, 0x7f, 0x80, 0xff]);
            }
            2 => {
                let i = at(rng, &b);
                b.truncate(i);
            }
            3 => {
                let i = at(rng, &b);
                let extra: Vec<u8> = (0..rng.below(40)).map(|_| rng.below(256) as u8).collect();
                b.splice(i..i, extra);
            }
            4 => {
                // An 8-byte little-endian field set to an extreme value.
                if b.len() >= 8 {
                    let i = rng.below((b.len() - 7) as u64) as usize;
                    let v: u64 = *rng.pick(&[
                        0,
                        1,
                        u64::MAX,
                        i64::MAX as u64,
                        i64::MIN as u64,
                        1 << 53,
                        (1 << 53) - 1,
                        u32::MAX as u64 + 1,
                    ]);
                    b[i..i + 8].copy_from_slice(&v.to_le_bytes());
                }
            }
            5 => {
                // Duplicate a segment (repeated units, keys, reservations).
                let i = at(rng, &b);
                let j = (i + 1 + rng.below(200) as usize).min(b.len());
                let seg = b[i..j].to_vec();
                b.splice(j..j, seg);
            }
            _ => {
                let i = at(rng, &b);
                let j = (i + 1 + rng.below(64) as usize).min(b.len());
                b.drain(i..j);
            }
        }
    }
    b
}

/// The blobs an AOF rewrite emits rebuild the queue exactly on another
/// server; importing one twice is refused; corrupted blobs are refused or
/// give a queue that passes ORCA.CHECK and works; nothing panics.
#[test]
fn import_roundtrip_and_fuzz() {
    let src = Server::start(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "no",
        "--aof-use-rdb-preamble",
        "no",
    ]);
    let mut s = src.conn();
    wait_aof_rewrite_idle(&mut s);
    setup_orders(&mut s);
    let mut w = Workload::new(71, true, &WORKLOAD_QUEUES);
    w.run(&mut s, 400);
    ok(&mut s, &args!["BGREWRITEAOF"]);
    wait_aof_rewrite_idle(&mut s);
    let (_, base) = aof_base(&src.dir).expect("a base AOF file");
    let (commands, rest) = parse_resp_commands(&base);
    assert!(rest.is_empty(), "the base AOF is not a RESP command stream");
    let imports: Vec<(String, Vec<u8>)> = commands
        .into_iter()
        .filter(|c| c[0].eq_ignore_ascii_case(b"ORCA.IMPORT"))
        .map(|c| (String::from_utf8(c[1].clone()).unwrap(), c[2].clone()))
        .collect();
    let queues = orca_queues(&mut s);
    assert!(!imports.is_empty());

    let dst = Server::start(&[]);
    let mut d = dst.conn();
    for (key, blob) in &imports {
        let n = as_int(&ok(&mut d, &args!["ORCA.IMPORT", key, blob.as_slice()]));
        assert!(n >= 0);
    }
    for q in &queues {
        assert_eq!(digest(&mut d, q), digest(&mut s, q), "imported {q}");
        assert_check(&mut d, q);
    }
    // The same units again collide with what is there: refused whole.
    for (key, blob) in &imports {
        if qlen(&mut d, key) > 0 {
            let before = digest(&mut d, key);
            let e = fails(&mut d, &args!["ORCA.IMPORT", key, blob.as_slice()]);
            assert!(e.starts_with("CORRUPT "), "{e}");
            assert_eq!(digest(&mut d, key), before);
        }
    }

    let mut rng = Rng::new(72);
    let mut accepted = Vec::new();
    for i in 0..600 {
        let (_, blob) = rng.pick(&imports);
        let bad = mutate(&mut rng, blob);
        let fresh = format!("fz{i}");
        let v = raw(&mut d, &args!["ORCA.IMPORT", &fresh, bad.as_slice()]);
        match error_text(&v) {
            Some(e) => {
                // Malformed, or more than one key holds; never a fault.
                assert!(refusal(&e), "{e}");
                assert_eq!(as_int(&ok(&mut d, &args!["EXISTS", &fresh])), 0);
            }
            None => {
                assert_check(&mut d, &fresh);
                accepted.push(fresh);
            }
        }
        // Into an existing queue: refused with nothing changed, or merged
        // into a queue that still passes the check.
        let target = rng.pick(&queues).clone();
        let before = digest(&mut d, &target);
        let v = raw(&mut d, &args!["ORCA.IMPORT", &target, bad.as_slice()]);
        match error_text(&v) {
            Some(e) => {
                assert!(refusal(&e), "{e}");
                assert_eq!(digest(&mut d, &target), before);
            }
            None => assert_check(&mut d, &target),
        }
    }
    eprintln!(
        "import fuzz: {} of 600 corrupted blobs accepted",
        accepted.len()
    );
    // Whatever was accepted is a working queue, also after a reload: every
    // job pops but those held behind closed gates, those a forged running
    // cap keeps waiting (STATUS says `capped`) and those a forged lifetime
    // expires on the way, unless a forged counter left the queue's sequence
    // numbers exhausted (accepted so that any saved queue reloads;
    // operations then refuse with a clear error, nothing changes).
    ok(&mut d, &args!["DEBUG", "RELOAD"]);
    for q in accepted.iter().chain(&queues) {
        assert_check(&mut d, q);
        let n = qlen(&mut d, q);
        let mut popped = 0;
        loop {
            let v = raw(&mut d, &args!["ORCA.POP", q, "LEASE", "0"]);
            match error_text(&v) {
                Some(e) if accepted.contains(q) && e.contains("sequence numbers exhausted") => {
                    break
                }
                Some(e) => panic!("POP of {q}: {e}"),
                None if matches!(v, redis::Value::Nil) => {
                    let st = stats(&mut d, q);
                    let (held, dead) = (int(&st, "held"), int(&st, "dead"));
                    let waiting = list_all(&mut d, q);
                    for f in &waiting {
                        let s = must_status(&mut d, q, &text(f, "key"));
                        assert_eq!(
                            s.get("capped").cloned(),
                            Some(redis::Value::Int(1)),
                            "{q}: POP gave nil, yet this job waits uncapped: {s:?}"
                        );
                    }
                    let capped = waiting.len() as i64;
                    assert!(
                        popped <= n && popped + held + dead + capped >= n,
                        "pops of {q}: {popped} of {n}, {held} held, {dead} dead, {capped} capped"
                    );
                    break;
                }
                None => popped += 1,
            }
        }
        assert_check(&mut d, q);
    }
    let log = dst.log();
    assert!(
        !log.contains("contained a panic"),
        "a command panicked:\n{log}"
    );
}
