//! `RESTORE` of hostile `DUMP` payloads, re-signed so they reach the
//! module's loader: every forged or mutated payload is refused (nothing
//! left behind, a key restored over with REPLACE untouched) or gives a
//! valid queue; never anything in between.

use std::collections::BTreeSet;

use crate::common::*;

/// RESTORE must refuse `payload` with an error, survive, leave no key and
/// leave `keep` (an existing queue restored over with REPLACE) untouched.
fn refused(c: &mut redis::Connection, what: &str, payload: &[u8], keep: (&str, &str)) {
    let v = raw(c, &args!["RESTORE", "forged", 0, payload.to_vec()]);
    let e = error_text(&v).unwrap_or_else(|| panic!("RESTORE of {what} accepted: {v:?}"));
    assert!(
        e.contains("Bad data format"),
        "RESTORE of {what}: {e} (a checksum error means our re-signing is wrong)"
    );
    assert_eq!(as_string(&ok(c, &args!["PING"])), "PONG");
    assert!(!exists(c, "forged"), "{what}: a key was left behind");
    let v = raw(c, &args!["RESTORE", keep.0, 0, payload.to_vec(), "REPLACE"]);
    assert!(
        error_text(&v).is_some(),
        "RESTORE REPLACE of {what} accepted"
    );
    assert_eq!(digest(c, keep.0), keep.1, "{what}: REPLACE damaged the key");
}

/// RESTORE of a mutated payload may be accepted (a different but valid
/// queue) or refused; never anything in between.
fn valid_or_refused(c: &mut redis::Connection, what: &str, payload: &[u8]) -> bool {
    let v = raw(c, &args!["RESTORE", "fuzzed", 0, payload.to_vec()]);
    if let Some(e) = error_text(&v) {
        assert!(e.contains("Bad data format"), "{what}: {e}");
        assert!(!exists(c, "fuzzed"), "{what}: a key was left behind");
        false
    } else {
        assert_check(c, "fuzzed");
        ok(c, &args!["ORCA.LIST", "fuzzed", "LIMIT", 1000]);
        ok(c, &args!["ORCA.STATS", "fuzzed"]);
        ok(c, &args!["DEL", "fuzzed"]);
        true
    }
}

#[test]
fn restore_refuses_forged_payloads() {
    assert_eq!(crc64(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    let (_s, mut c) = start_server();
    rich_queue(&mut c, "q");
    let dq = digest(&mut c, "q");
    let payload = as_bytes(&ok(&mut c, &args!["DUMP", "q"]));
    let dump = ModuleDump::parse(&payload);
    let header = dump.header();
    let units = dump.units();
    let fields: Vec<Vec<Fld>> = units.iter().map(|u| unit_fields(u)).collect();
    let types: BTreeSet<u64> = fields.iter().map(|f| f[0].value).collect();
    assert_eq!(
        types,
        (1..=7).collect(),
        "the queue must have every unit type"
    );

    // Sanity: our re-encoding (plain strings) and CRC are accepted and give
    // the same queue.
    let same = dump.payload_with(&dump.items);
    ok(&mut c, &args!["RESTORE", "copy", 0, same]);
    assert_eq!(digest(&mut c, "copy"), dq);
    assert_check(&mut c, "copy");
    ok(&mut c, &args!["DEL", "copy"]);
    let queues_before = info_int(&mut c, "orca", "orca_queues");
    let keep = ("q", dq.as_str());

    let with_units = |us: &[Vec<u8>]| dump.payload_with(&ModuleDump::items_for(&header, us));
    let with_unit = |i: usize, u: Vec<u8>| {
        let mut us = units.clone();
        us[i] = u;
        with_units(&us)
    };
    let mut cases: Vec<(String, Vec<u8>)> = Vec::new();

    // --- Newer (or impossible) encoding versions.
    let bump = |id: u64, v: u64| (id & !1023) | v;
    for v in [0u64, 4, 1023] {
        cases.push((
            format!("module encver {v}"),
            dump.sign(&ModuleDump::body_with(bump(dump.module_id, v), &dump.items)),
        ));
    }
    for v in [0u8, 4, 0xff] {
        let mut h = header.clone();
        h[0] = v;
        cases.push((
            format!("header version {v}"),
            dump.payload_with(&ModuleDump::items_for(&h, &units)),
        ));
    }
    // Another (unknown) module type name.
    cases.push((
        "unknown module type".into(),
        dump.sign(&ModuleDump::body_with(
            dump.module_id ^ (1 << 40),
            &dump.items,
        )),
    ));

    // --- Header forgeries.
    let header_variants: Vec<(&str, Vec<u8>)> = vec![
        ("empty header", vec![]),
        ("header of 1 byte", header[..1].to_vec()),
        ("header cut by 1", header[..header.len() - 1].to_vec()),
        (
            "header with a trailing byte",
            [header.clone(), vec![0]].concat(),
        ),
        ("unknown order", {
            let mut h = header.clone();
            h[1] = 2;
            h
        }),
        (
            "next_seq 0",
            [
                header[..2].to_vec(),
                0i64.to_le_bytes().to_vec(),
                header[10..].to_vec(),
            ]
            .concat(),
        ),
        (
            "next_seq -1",
            [
                header[..2].to_vec(),
                (-1i64).to_le_bytes().to_vec(),
                header[10..].to_vec(),
            ]
            .concat(),
        ),
        (
            "next_seq i64::MAX",
            [
                header[..2].to_vec(),
                i64::MAX.to_le_bytes().to_vec(),
                header[10..].to_vec(),
            ]
            .concat(),
        ),
        (
            "positive front tie",
            [header[..10].to_vec(), 1i64.to_le_bytes().to_vec()].concat(),
        ),
        (
            "front tie i64::MIN",
            [header[..10].to_vec(), i64::MIN.to_le_bytes().to_vec()].concat(),
        ),
    ];
    for (what, h) in header_variants {
        cases.push((
            what.into(),
            dump.payload_with(&ModuleDump::items_for(&h, &units)),
        ));
    }

    // --- Unit counts and RDB-level lengths that lie.
    let n = units.len() as u64;
    for count in [0, n - 1, n + 1, n + 1000, u32::MAX as u64, u64::MAX - 1] {
        let mut items = dump.items.clone();
        items[1] = Item::Uint(count);
        cases.push((
            format!("unit count {count} (really {n})"),
            dump.payload_with(&items),
        ));
    }
    {
        let body = dump.body();
        // The first unit string's length prefix sits right after the
        // header and the count: re-encode it with lying lengths.
        let mut prefix = vec![RDB_TYPE_MODULE_2];
        rdb_len(&mut prefix, dump.module_id);
        prefix.push(5);
        rdb_len(&mut prefix, header.len() as u64);
        prefix.extend_from_slice(&header);
        prefix.push(2);
        rdb_len(&mut prefix, n);
        assert_eq!(body[prefix.len()], 5);
        let mut rest_start = prefix.len() + 1;
        let mut tmp = Vec::new();
        rdb_len(&mut tmp, units[0].len() as u64);
        rest_start += tmp.len();
        for lie in [
            units[0].len() as u64 + 1,
            units[0].len() as u64 + 1000,
            body.len() as u64 * 4,
            u32::MAX as u64,
            1 << 40,
        ] {
            let mut b = prefix.clone();
            b.push(5);
            rdb_len(&mut b, lie);
            b.extend_from_slice(&body[rest_start..]);
            cases.push((
                format!("RDB string length {lie} for {} bytes", units[0].len()),
                dump.sign(&b),
            ));
        }
        // No module EOF marker.
        cases.push(("no EOF marker".into(), dump.sign(&body[..body.len() - 1])));
        // The whole payload cut anywhere.
        // RESTORE parses the value from a buffer that still holds the
        // footer (RDB version, CRC), so a cut whose missing tail equals the
        // footer's first bytes reads back the very same value (e.g. a last
        // unit ending in 0x0a, then EOF 0x00, against version 10 = 0a 00):
        // that is the original payload, not a forgery.
        let footer = dump.rdb_version.to_le_bytes();
        for cut in 0..body.len() - 1 {
            let tail = &body[cut..];
            if tail.len() <= footer.len() && *tail == footer[..tail.len()] {
                continue;
            }
            cases.push((format!("body cut at {cut}"), dump.sign(&body[..cut])));
        }
    }

    // --- Truncated and padded units.
    for (i, u) in units.iter().enumerate() {
        for len in [0, 1, u.len() / 2, u.len() - 1] {
            cases.push((
                format!("unit {i} cut to {len}"),
                with_unit(i, u[..len].to_vec()),
            ));
        }
        cases.push((
            format!("unit {i} with a trailing byte"),
            with_unit(i, [u.clone(), vec![0]].concat()),
        ));
    }

    // --- Field-level forgeries that can never be valid.
    for (i, (u, fl)) in units.iter().zip(&fields).enumerate() {
        for f in fl {
            let bad: Vec<u64> = match f.k {
                K::Type => vec![0, 8, 0xff],
                K::Flag => vec![2, 0xff],
                K::Cause => vec![0, 4, 0xff],
                K::Time | K::Score => vec![u64::MAX, (MAX_TIME + 1) as u64, 1 << 63],
                K::Tie => vec![0, i64::MAX as u64, i64::MIN as u64],
                K::Skey => vec![i64::MAX as u64, i64::MIN as u64],
                K::Nonce | K::Token => vec![0, i64::MAX as u64, u64::MAX, 1 << 63],
                K::Delivery => vec![i64::MAX as u64, u64::MAX, 1 << 63],
                K::Seq => vec![0, u64::MAX, i64::MAX as u64],
                K::Len => {
                    let v = f.value;
                    let mut l = vec![v + 1, v + 9, u64::MAX, 1 << 63, u32::MAX as u64];
                    if v > 0 {
                        l.push(v - 1);
                    }
                    l
                }
                K::Count => vec![0, f.value - 1, f.value + 1, u64::MAX],
                K::Name => {
                    // Not UTF-8; a name without the user./team. prefix.
                    let mut a = u.clone();
                    a[f.off + f.size - 1] = 0xff;
                    cases.push((
                        format!("unit {i}: collation name not UTF-8"),
                        with_unit(i, a),
                    ));
                    let mut b = u.clone();
                    b[f.off] = b'x';
                    cases.push((
                        format!("unit {i}: collation name without prefix"),
                        with_unit(i, b),
                    ));
                    vec![]
                }
                K::Key | K::Attempts | K::Data => vec![],
            };
            for v in bad {
                cases.push((
                    format!(
                        "unit {i} (type {}): {:?} at {} set to {v:#x}",
                        fl[0].value, f.k, f.off
                    ),
                    with_unit(i, set_field(u, f, v)),
                ));
            }
        }
    }

    // --- Duplicated units.
    for i in 0..units.len() {
        let mut us = units.clone();
        us.insert(i + 1, units[i].clone());
        cases.push((
            format!("unit {i} (type {}) twice", fields[i][0].value),
            with_units(&us),
        ));
    }

    // --- Pairing broken between or inside units.
    let colls: Vec<usize> = (0..units.len())
        .filter(|&i| fields[i][0].value == 2)
        .collect();
    let singles: Vec<usize> = (0..units.len())
        .filter(|&i| fields[i][0].value == 1)
        .collect();
    let leases: Vec<usize> = (0..units.len())
        .filter(|&i| fields[i][0].value == 3)
        .collect();
    let cancels: Vec<usize> = (0..units.len())
        .filter(|&i| fields[i][0].value == 7)
        .collect();
    let of =
        |i: usize, k: K| -> Vec<Fld> { fields[i].iter().filter(|f| f.k == k).copied().collect() };
    assert!(colls.len() >= 3 && singles.len() >= 2 && leases.len() >= 2 && !cancels.is_empty());
    let copy_field = |u: &[u8], to: &Fld, from_unit: &[u8], from: &Fld| -> Vec<u8> {
        let mut out = u.to_vec();
        out[to.off..to.off + to.size].copy_from_slice(&from_unit[from.off..from.off + from.size]);
        out
    };
    let mut multi_job_collations = 0;
    for &a in &colls {
        for &b in &colls {
            if a == b {
                continue;
            }
            // B's first reservation (score and tie) = A's first.
            let (sa, ta) = (of(a, K::Score)[0], of(a, K::Tie)[0]);
            let (sb, tb) = (of(b, K::Score)[0], of(b, K::Tie)[0]);
            let u = copy_field(
                &copy_field(&units[b], &sb, &units[a], &sa),
                &tb,
                &units[a],
                &ta,
            );
            cases.push((
                format!("collation {b} shares a reservation with {a}"),
                with_unit(b, u),
            ));
            // B's first job = A's first job.
            let (ka, kb) = (of(a, K::Key)[0], of(b, K::Key)[0]);
            cases.push((
                format!("collation {b} holds a job of collation {a}"),
                with_unit(b, copy_field(&units[b], &kb, &units[a], &ka)),
            ));
        }
        let (sc, tc, nc, kc) = (
            of(a, K::Score),
            of(a, K::Tie),
            of(a, K::Nonce),
            of(a, K::Key),
        );
        let u = &units[a];
        if nc.len() >= 2 {
            multi_job_collations += 1;
            cases.push((
                format!("collation {a}: nonce twice"),
                with_unit(a, copy_field(u, &nc[1], u, &nc[0])),
            ));
            cases.push((
                format!("collation {a}: reservation twice"),
                with_unit(
                    a,
                    copy_field(&copy_field(u, &sc[1], u, &sc[0]), &tc[1], u, &tc[0]),
                ),
            ));
            cases.push((
                format!("collation {a}: job twice"),
                with_unit(a, copy_field(u, &kc[1], u, &kc[0])),
            ));
        }
        cases.push((
            format!("collation {a}: front (negative) tie"),
            with_unit(a, set_field(u, &tc[0], (-5i64) as u64)),
        ));
        // One job fewer than reservations, and one reservation fewer than
        // jobs (count adjusted so only the pairing is wrong).
        let count = of(a, K::Count)[0];
        let m = count.value;
        let job_start = count.off + 8;
        let res_start = sc[0].off;
        let first_job_end = of(a, K::Data)[0].off + of(a, K::Data)[0].size;
        let fewer_jobs = [
            &set_field(u, &count, m - 1)[..job_start],
            &u[first_job_end..],
        ]
        .concat();
        cases.push((
            format!("collation {a}: {} jobs, {m} reservations", m - 1),
            with_unit(a, fewer_jobs),
        ));
        let fewer_res = [&set_field(u, &count, m)[..res_start], &u[res_start + 24..]].concat();
        cases.push((
            format!("collation {a}: {m} jobs, {} reservations", m - 1),
            with_unit(a, fewer_res),
        ));
        let empty = set_field(u, &count, 0)[..job_start].to_vec();
        cases.push((format!("collation {a}: empty"), with_unit(a, empty)));
        for &s in &singles {
            // A single job's reservation = the collation's first.
            let (ss, ts) = (of(s, K::Score)[0], of(s, K::Tie)[0]);
            let v = copy_field(&copy_field(&units[s], &ss, u, &sc[0]), &ts, u, &tc[0]);
            cases.push((
                format!("single {s} shares a reservation with collation {a}"),
                with_unit(s, v),
            ));
            // A single job that is also in the collation.
            let ks = of(s, K::Key)[0];
            cases.push((
                format!("collation {a} holds single job {s}"),
                with_unit(a, copy_field(u, &kc[0], &units[s], &ks)),
            ));
        }
    }
    assert!(multi_job_collations >= 2);
    // A front reservation on a job that is not immediate.
    let released = singles
        .iter()
        .copied()
        .find(|&s| (of(s, K::Tie)[0].value as i64) < 0)
        .expect("a released job with a front tie");
    let imm_flag = *fields[released].last().unwrap();
    cases.push((
        "front reservation of a non-immediate job".into(),
        with_unit(released, set_field(&units[released], &imm_flag, 0)),
    ));
    // Lease tokens shared.
    let (t0, t1) = (of(leases[0], K::Token)[0], of(leases[1], K::Token)[0]);
    cases.push((
        "two leases with one token".into(),
        with_unit(
            leases[1],
            copy_field(&units[leases[1]], &t1, &units[leases[0]], &t0),
        ),
    ));
    let tc = of(cancels[0], K::Token)[0];
    cases.push((
        "a lease token also cancelled".into(),
        with_unit(
            cancels[0],
            copy_field(&units[cancels[0]], &tc, &units[leases[0]], &t0),
        ),
    ));

    assert!(cases.len() > 500, "{}", cases.len());
    for (what, p) in &cases {
        refused(&mut c, what, p, keep);
    }

    // --- Blind mutation: every byte flipped, one at a time. Accepted or
    // refused, the server stays up and never holds a broken queue.
    let mut accepted = 0;
    let mut total = 0;
    for (i, u) in units.iter().enumerate() {
        for pos in 0..u.len() {
            for mask in [0x01u8, 0x80] {
                let mut v = u.clone();
                v[pos] ^= mask;
                total += 1;
                if valid_or_refused(
                    &mut c,
                    &format!("unit {i} byte {pos} ^ {mask:#x}"),
                    &with_unit(i, v),
                ) {
                    accepted += 1;
                }
            }
        }
    }
    let mut rng = Rng::new(7);
    for round in 0..500 {
        let mut us = units.clone();
        for _ in 0..1 + rng.below(4) {
            let i = rng.below(us.len() as u64) as usize;
            if us[i].is_empty() {
                continue;
            }
            let pos = rng.below(us[i].len() as u64) as usize;
            us[i][pos] = rng.next_u64() as u8;
        }
        total += 1;
        if valid_or_refused(
            &mut c,
            &format!("random mutation {round}"),
            &with_units(&us),
        ) {
            accepted += 1;
        }
    }
    assert!(
        accepted < total,
        "every mutation accepted: the loader validates nothing"
    );
    eprintln!(
        "{} forged payloads refused; blind mutations: {accepted} of {total} valid",
        cases.len()
    );

    // Nothing refused left a trace; the original is intact.
    assert_eq!(info_int(&mut c, "orca", "orca_queues"), queues_before);
    assert_eq!(digest(&mut c, "q"), dq);
    assert_check(&mut c, "q");
    assert_eq!(orca_queues(&mut c), vec!["q".to_string()]);
}
