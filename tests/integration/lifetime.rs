//! Job lifetime ("every job is created with the promise of eventual
//! removal") and the bounds on what a queue keeps:
//!
//! - `ORCA.SETTINGS ... LIFETIME <ms>` and its module default
//!   (`orca.job-lifetime`), refusals;
//! - a waiting job (queued, delayed for a retry, held behind a gate) not
//!   handed out `lifetime` ms after its release time becomes a dead letter
//!   with cause `expired`, exactly then (pinned `ORCA.TICK`, `ORCA.POP`), and
//!   on time by the server's timer with no client touching the queue;
//!   leased jobs never expire this way; an update does not extend a life;
//! - `ORCA.DEAD ... REQUEUE` of an expired job, the `orca.lifetime` event,
//!   `INFO orca` counters;
//! - `DEADMAX`, `DEADTTL`, `RESULTMAX` and their module defaults.

use crate::common::*;

const L: i64 = 1000;

#[test]
fn lifetime_setting_module_default_and_refusals() {
    let s = Server::start_with(&["job-lifetime", "7000"], &[]);
    let mut c = s.conn();
    // The module default applies to queues created from then on.
    assert_eq!(int(&settings(&mut c, "missing"), "lifetime"), 7000);
    enqueue_job(&mut c, "old", "a", None, 0);
    assert_eq!(int(&settings(&mut c, "old"), "lifetime"), 7000);
    config_set(&mut c, "orca.job-lifetime", 0);
    enqueue_job(&mut c, "new", "a", None, 0);
    assert_eq!(int(&settings(&mut c, "new"), "lifetime"), 0);
    assert_eq!(int(&settings(&mut c, "old"), "lifetime"), 7000);
    // A queue's own setting; the others stay.
    let st = set(&mut c, "new", &["LIFETIME", "86400000"]);
    assert_eq!(int(&st, "lifetime"), 86_400_000);
    assert_eq!(text(&st, "order"), "lifo");
    assert_eq!(int(&st, "jobs"), 1);
    assert_eq!(int(&set(&mut c, "new", &["lifetime", "0"]), "lifetime"), 0);
    let st = set(&mut c, "new", &["LIFETIME", "9007199254740991"]);
    assert_eq!(int(&st, "lifetime"), MAX_TIME);

    assert_settings_refused(
        &mut c,
        "new",
        &[
            (vec!["LIFETIME", "x"], "ERR LIFETIME must be an integer"),
            (vec!["LIFETIME", "1.5"], "ERR LIFETIME must be an integer"),
            (
                vec!["LIFETIME", "-1"],
                "ERR LIFETIME must be between 0 and 9007199254740991",
            ),
            (
                vec!["LIFETIME", "9007199254740992"],
                "ERR LIFETIME must be between 0 and 9007199254740991",
            ),
            (vec!["LIFETIME"], "ERR option LIFETIME needs 1 value(s)"),
            (
                vec!["LIFETIME", "1", "LIFETIME", "2"],
                "ERR option LIFETIME given twice",
            ),
            (
                vec!["DEADTTL", "-5"],
                "ERR DEADTTL must be between 0 and 9007199254740991",
            ),
            (
                vec!["DEADMAX", "4294967296"],
                "ERR DEADMAX must be between 0 and 4294967295",
            ),
            (
                vec!["RESULTMAX", "-1"],
                "ERR RESULTMAX must be between 0 and 4294967295",
            ),
            (
                vec!["RESULTMAX", "many"],
                "ERR RESULTMAX must be an integer",
            ),
            // A refused option refuses the whole command.
            (
                vec!["DEADMAX", "3", "LIFETIME", "no"],
                "ERR LIFETIME must be an integer",
            ),
        ],
    );
    let e = assert_rejected(&mut c, "new", &args!["ORCA.SETTINGS", "new", "TTL", 5], ERR);
    assert!(e.starts_with("ERR unknown option 'TTL'"), "{e}");
    assert_eq!(int(&settings(&mut c, "new"), "deadmax"), 100_000);
}

/// A queue with `LIFETIME L` on a pinned clock far ahead of the server's.
fn pinned_with_lifetime() -> (Server, Con, i64) {
    let (s, mut c, t) = start_pinned();
    set(&mut c, "q", &["LIFETIME", &L.to_string()]);
    (s, c, t)
}

/// `name` is a dead letter that ran out of lifetime at `died_at`.
fn assert_expired(c: &mut Con, q: &str, name: &str, died_at: i64) -> Fields {
    let f = must_status(c, q, &key_of(name));
    assert_eq!(text(&f, "state"), "dead", "{name}: {f:?}");
    assert_eq!(text(&f, "cause"), "expired", "{name}");
    assert_eq!(int(&f, "died_at"), died_at, "{name}");
    f
}

/// `ORCA.TICK ... NOW now` reports exactly `lifetime` jobs run out.
fn tick_expires(c: &mut Con, q: &str, now: i64, lifetime: i64) {
    let f = tick_at(c, q, now);
    assert_eq!(
        (
            int(&f, "lifetime"),
            int(&f, "died"),
            int(&f, "expired"),
            int(&f, "retried")
        ),
        (lifetime, lifetime, 0, 0),
        "TICK at {now}: {f:?}"
    );
}

#[test]
fn queued_jobs_expire_lifetime_after_their_release_time() {
    let (_s, mut c, t) = pinned_with_lifetime();
    let q = "q";
    let (info_life, info_dead) = (
        orca_info(&mut c, "orca_lifetime_expired"),
        orca_info(&mut c, "orca_dead"),
    );
    enqueue_at(&mut c, q, &config("single", None, 100), t);
    // One second before its release + lifetime nothing happens; at it, the
    // job is a dead letter.
    tick_expires(&mut c, q, t + 100 + L - 1, 0);
    assert_eq!(
        state(&mut c, q, &key_of("single")).as_deref(),
        Some("queued")
    );
    tick_expires(&mut c, q, t + 100 + L, 1);
    let f = assert_expired(&mut c, q, "single", t + 100 + L);
    assert_eq!(text(&f, "payload"), config("single", None, 100));
    assert_eq!(int(&f, "created_at"), t);
    assert_eq!(qlen(&mut c, q), 0);
    let d = dead_list(&mut c, q, &[]);
    assert_eq!(reply_keys(&d), keys_of(&["single"]));
    assert_eq!(
        (text(&d[0], "cause"), int(&d[0], "died_at")),
        ("expired".into(), t + 100 + L)
    );
    let st = stats(&mut c, q);
    assert_eq!((int(&st, "dead"), int(&st, "queued")), (1, 0));
    assert_eq!(orca_info(&mut c, "orca_lifetime_expired"), info_life + 1);
    assert_eq!(orca_info(&mut c, "orca_dead"), info_dead + 1);

    // A collation job lives by the reservation it is paired with. LIFO:
    // the newer job n is paired with the earlier reservation (t), so it
    // runs out first; the older job o then pairs with t + 500.
    enqueue_at(&mut c, q, &config("o", Some("user.1"), 0), t);
    enqueue_at(&mut c, q, &config("n", Some("user.1"), 0), t + 500);
    assert_eq!(
        keys_and_releases(&list_all(&mut c, q)),
        vec![(key_of("n"), t), (key_of("o"), t + 500)]
    );
    tick_expires(&mut c, q, t + L, 1);
    assert_expired(&mut c, q, "n", t + L);
    assert_eq!(
        keys_and_releases(&list_all(&mut c, q)),
        vec![(key_of("o"), t + 500)]
    );
    tick_expires(&mut c, q, t + 500 + L - 1, 0);
    tick_expires(&mut c, q, t + 500 + L, 1);
    assert_expired(&mut c, q, "o", t + 500 + L);
    assert_check(&mut c, q);

    // A pop applies the lifetime before handing out: nothing to hand out.
    enqueue_at(&mut c, q, &config("late", None, 0), t + 10_000);
    assert_eq!(pop_at(&mut c, q, LONG, t + 10_000 + L), None);
    assert_expired(&mut c, q, "late", t + 10_000 + L);
    // Handed out in time, it is not a dead letter (and a lease never
    // expires by lifetime).
    enqueue_at(&mut c, q, &config("in-time", None, 0), t + 20_000);
    let j = must_pop_at(&mut c, q, 10 * L, t + 20_000 + L - 1);
    tick_expires(&mut c, q, t + 20_000 + 5 * L, 0);
    assert_eq!(
        state(&mut c, q, &key_of("in-time")).as_deref(),
        Some("leased")
    );
    ack_job(&mut c, q, &j, &[]);
    assert_check(&mut c, q);
}

#[test]
fn updates_do_not_extend_a_life() {
    let (_s, mut c, t) = pinned_with_lifetime();
    enqueue_at(&mut c, "q", &config("a", Some("user.1"), 0), t);
    enqueue_at(&mut c, "q", &revised("a", 2), t + L - 1);
    tick_expires(&mut c, "q", t + L, 1);
    let f = assert_expired(&mut c, "q", "a", t + L);
    assert_eq!(text(&f, "payload"), revised("a", 2), "the last config dies");
}

#[test]
fn delayed_and_held_jobs_expire_too() {
    let (_s, mut c, t) = pinned_with_lifetime();
    let q = "q";
    // Delayed for a retry: its lifetime counts from its original arrival,
    // even though its retry time is later.
    enqueue_at(&mut c, q, &config("d", Some("user.1"), 300), t);
    let j = must_pop_at(&mut c, q, LONG, t + 50);
    let n = nack_with(
        &mut c,
        q,
        &text(&j, "key"),
        &text(&j, "lease"),
        &args!["DELAY", 10 * L, "NOW", t + 60],
    );
    assert_eq!(text(&n, "outcome"), "retry");
    assert_eq!(state(&mut c, q, &key_of("d")).as_deref(), Some("delayed"));
    tick_expires(&mut c, q, t + L - 1, 0);
    tick_expires(&mut c, q, t + L, 1);
    assert_expired(&mut c, q, "d", t + L);
    assert_eq!(int(&stats(&mut c, q), "delayed"), 0);

    // Back from an expired lease: queued at its original arrival, so its
    // lifetime counts from there.
    enqueue_at(&mut c, q, &config("e", None, 0), t + 2 * L);
    must_pop_at(&mut c, q, 100, t + 2 * L);
    let f = tick_at(&mut c, q, t + 2 * L + 100);
    assert_eq!((int(&f, "expired"), int(&f, "lifetime")), (1, 0), "{f:?}");
    let back = must_status(&mut c, q, &key_of("e"));
    assert_eq!(
        (text(&back, "state"), int(&back, "release_at")),
        ("queued".into(), t + 2 * L)
    );
    tick_expires(&mut c, q, t + 3 * L, 1);
    assert_expired(&mut c, q, "e", t + 3 * L);

    // Held behind a gate: release time = arrival + priority.
    close_gate(&mut c, q, "img");
    enqueue_at(
        &mut c,
        q,
        &gated("h", Some("user.2"), 200, "img"),
        t + 4 * L,
    );
    immediate_at(&mut c, q, &gated("hi", None, 0, "img"), t + 4 * L);
    tick_expires(&mut c, q, t + 5 * L - 1, 0);
    tick_expires(&mut c, q, t + 5 * L, 1);
    assert_expired(&mut c, q, "hi", t + 5 * L);
    assert_eq!(state(&mut c, q, &key_of("h")).as_deref(), Some("held"));
    tick_expires(&mut c, q, t + 5 * L + 200, 1);
    assert_expired(&mut c, q, "h", t + 5 * L + 200);
    let st = stats(&mut c, q);
    assert_eq!(int(&st, "held"), 0);
    assert_eq!(
        gates_of(&st).get(b"img".as_slice()),
        Some(&0),
        "the gate stays closed"
    );
    assert_eq!(open_gate(&mut c, q, "img"), 0);
    assert_eq!(
        reply_keys(&list_state(&mut c, q, "DEAD", &[])),
        keys_of(&["d", "e", "hi", "h"])
    );
    assert_check(&mut c, q);
}

/// `attempts` is the number of times a job was handed out: running out of
/// lifetime is not a delivery.
#[test]
fn expired_jobs_keep_their_attempt_count() {
    let (_s, mut c, t) = pinned_with_lifetime();
    let q = "q";
    enqueue_at(&mut c, q, &config("once", None, 0), t);
    let j = must_pop_at(&mut c, q, 100, t);
    assert_eq!(text(&j, "key"), key_of("once"));
    enqueue_at(&mut c, q, &config("nacked", None, 0), t);
    enqueue_at(&mut c, q, &config("never", Some("user.1"), 0), t);
    let j = must_pop_at(&mut c, q, LONG, t);
    assert_eq!(
        text(&j, "key"),
        key_of("nacked"),
        "arrival order at one time"
    );
    nack_with(
        &mut c,
        q,
        &text(&j, "key"),
        &text(&j, "lease"),
        &args!["DELAY", LONG, "NOW", t],
    );
    close_gate(&mut c, q, "img");
    enqueue_at(&mut c, q, &gated("held", None, 0, "img"), t);
    // "once" comes back from its expired lease, then all four run out.
    let f = tick_at(&mut c, q, t + L);
    assert_eq!((int(&f, "expired"), int(&f, "lifetime")), (1, 4), "{f:?}");
    let got: Vec<(String, i64)> = ["never", "once", "nacked", "held"]
        .iter()
        .map(|n| {
            (
                n.to_string(),
                int(&must_status(&mut c, q, &key_of(n)), "attempts"),
            )
        })
        .collect();
    let want: Vec<(String, i64)> = [("never", 0), ("once", 1), ("nacked", 1), ("held", 0)]
        .iter()
        .map(|(n, a)| (n.to_string(), *a))
        .collect();
    assert_eq!(got, want, "attempts of the expired dead letters");
}

#[test]
fn dead_requeue_of_an_expired_job() {
    let (_s, mut c, t) = pinned_with_lifetime();
    let q = "q";
    enqueue_at(&mut c, q, &config("a", Some("user.3"), 0), t);
    tick_expires(&mut c, q, t + L, 1);
    // Requeued on the server clock: a long lifetime keeps the timer off it.
    set(&mut c, q, &["LIFETIME", "3600000"]);
    let before = server_ms(&mut c);
    let f = fields(ok(&mut c, &args!["ORCA.DEAD", q, "REQUEUE", key_of("a")]));
    let after = server_ms(&mut c);
    assert_eq!(text(&f, "key"), key_of("a"));
    let s = must_status(&mut c, q, &key_of("a"));
    assert_eq!(text(&s, "state"), "queued");
    assert_eq!((int(&s, "immediate"), int(&s, "attempts")), (1, 0));
    let r = int(&s, "release_at");
    assert!(
        (before..=after).contains(&r),
        "requeued at now: {r} not in {before}..={after}"
    );
    assert_eq!(int(&stats(&mut c, q), "dead"), 0);
    let p = must_pop(&mut c, q, LONG);
    assert_eq!((text(&p, "key"), int(&p, "attempt")), (key_of("a"), 1));
}

#[test]
fn lifetime_runs_out_by_the_server_timer() {
    let (s, mut c) = start_server();
    config_set(&mut c, "notify-keyspace-events", "KEd");
    let mut sub = s.conn();
    let mut ev = Events::subscribe(&mut sub, "q");
    let q = "q";
    let life = 1500;
    set(&mut c, q, &["LIFETIME", &life.to_string()]);
    ev.expect(&["orca.settings"], "SETTINGS");
    let expired_before = orca_info(&mut c, "orca_lifetime_expired");
    // A job delayed for a retry, a queued job and a held job, on the
    // server's clock.
    enqueue(&mut c, q, &config("delayed", None, 0));
    let j = must_pop(&mut c, q, LONG);
    nack_job(&mut c, q, &j, &["DELAY", "600000"]);
    enqueue(&mut c, q, &config("queued", Some("user.1"), 10));
    close_gate(&mut c, q, "img");
    enqueue(&mut c, q, &gated("held", None, 250, "img"));
    ev.expect(
        &[
            "orca.enqueue",
            "orca.pop",
            "orca.nack",
            "orca.enqueue",
            "orca.gate",
            "orca.held",
        ],
        "setup",
    );
    let releases = [
        (
            "delayed",
            int(&must_status(&mut c, q, &key_of("delayed")), "created_at"),
        ),
        (
            "queued",
            int(&must_status(&mut c, q, &key_of("queued")), "release_at"),
        ),
        (
            "held",
            int(&must_status(&mut c, q, &key_of("held")), "release_at"),
        ),
    ];

    // Nobody touches the queue: the timer makes them dead letters.
    wait_orca_info(&mut c, "orca_lifetime_expired", expired_before + 3, 20);
    ev.expect(&["orca.lifetime"], "the timer's expiry");
    for (name, release) in releases {
        let f = must_status(&mut c, q, &key_of(name));
        assert_eq!(
            (text(&f, "state"), text(&f, "cause")),
            ("dead".into(), "expired".into()),
            "{name}"
        );
        assert!(
            int(&f, "died_at") >= release + life,
            "{name} died early: {f:?}"
        );
    }
    let st = stats(&mut c, q);
    assert_eq!(
        (
            int(&st, "dead"),
            int(&st, "queued"),
            int(&st, "held"),
            int(&st, "delayed")
        ),
        (3, 0, 0, 0)
    );
    assert_check(&mut c, q);
}

#[test]
fn dead_letter_bounds() {
    let (_s, mut c, t) = pinned_with_lifetime();
    let q = "q";
    assert_eq!(int(&settings(&mut c, q), "deadttl"), 0);
    set(&mut c, q, &["DEADMAX", "2", "DEADTTL", "5000"]);
    for (i, name) in ["a", "b", "c"].iter().enumerate() {
        let at = t + i as i64 * 100;
        enqueue_at(&mut c, q, &config(name, None, 0), at);
        tick_expires(&mut c, q, at + L, 1);
    }
    // DEADMAX 2: the oldest went first.
    assert_eq!(reply_keys(&dead_list(&mut c, q, &[])), keys_of(&["b", "c"]));
    assert_eq!(status(&mut c, q, &key_of("a")), None);
    assert_eq!(int(&stats(&mut c, q), "dead"), 2);
    // DEADTTL 5000: each is forgotten 5000 ms after it died.
    let f = tick_at(&mut c, q, t + 100 + L + 5000 - 1);
    assert_eq!(int(&f, "forgotten"), 0, "{f:?}");
    let f = tick_at(&mut c, q, t + 100 + L + 5000);
    assert_eq!(int(&f, "forgotten"), 1, "{f:?}");
    assert_eq!(reply_keys(&dead_list(&mut c, q, &[])), keys_of(&["c"]));
    tick_at(&mut c, q, t + 200 + L + 5000);
    assert!(dead_list(&mut c, q, &[]).is_empty());
    assert_check(&mut c, q);

    // DEADMAX 0: no bound.
    set(&mut c, q, &["DEADMAX", "0", "DEADTTL", "0"]);
    for i in 0..5 {
        enqueue_at(&mut c, q, &config(&format!("z{i}"), None, 0), t + 10_000);
    }
    tick_expires(&mut c, q, t + 10_000 + L, 5);
    assert_eq!(int(&stats(&mut c, q), "dead"), 5);
    // Lowering the bound keeps at most that many.
    set(&mut c, q, &["DEADMAX", "3"]);
    assert_eq!(dead_list(&mut c, q, &[]).len(), 3, "DEADMAX lowered");
    assert_eq!(int(&stats(&mut c, q), "dead"), 3);
}

#[test]
fn result_bound_and_module_defaults() {
    let s = Server::start_with(
        &["dead-max", "7", "dead-ttl", "60000", "result-max", "2"],
        &[],
    );
    let mut c = s.conn();
    let t = future_base(&mut c);
    let st = settings(&mut c, "q");
    assert_eq!(
        (
            int(&st, "deadmax"),
            int(&st, "deadttl"),
            int(&st, "resultmax")
        ),
        (7, 60_000, 2)
    );
    // RESULTMAX 2: the result expiring first goes first.
    for (name, ttl) in [("a", 10_000), ("b", 5_000), ("c", 20_000)] {
        let j = leased_at(&mut c, "q", name, LONG, t);
        ack_job(
            &mut c,
            "q",
            &j,
            &[
                "RESULT",
                name,
                "TTL",
                &ttl.to_string(),
                "NOW",
                &t.to_string(),
            ],
        );
    }
    assert_eq!(int(&stats(&mut c, "q"), "results"), 2);
    assert_eq!(result(&mut c, "q", &key_of("b")), None);
    assert_eq!(result(&mut c, "q", &key_of("a")), Some(b"a".to_vec()));
    assert_eq!(result(&mut c, "q", &key_of("c")), Some(b"c".to_vec()));
    set(&mut c, "q", &["RESULTMAX", "0"]);
    for name in ["d", "e"] {
        let j = leased_at(&mut c, "q", name, LONG, t);
        ack_job(&mut c, "q", &j, &["RESULT", name, "NOW", &t.to_string()]);
    }
    assert_eq!(int(&stats(&mut c, "q"), "results"), 4);
    // CONFIG SET changes the defaults of new queues only.
    config_set(&mut c, "orca.result-max", 100_000);
    assert_eq!(int(&settings(&mut c, "q"), "resultmax"), 0);
    assert_eq!(int(&settings(&mut c, "fresh"), "resultmax"), 100_000);
}
