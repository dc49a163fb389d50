//! Automatic delay by submission rate (`ORCA.SETTINGS ... AUTODELAY
//! <window> <step> [CAP <ms>]`): a new collation job's reservation is at
//! now + priority + step × (the jobs its collation submitted in
//! `(now - window, now]` before it), at most CAP.
//!
//! - the setting, its module defaults and refusals;
//! - the delay of each new job, shown as `delay` in the write reply, and
//!   the reservation it gives; collations counted apart;
//! - updates of an existing key are not submissions; immediate jobs
//!   (IMMEDIATE, REENQUEUE) are neither delayed nor counted; jobs without a
//!   collation are not delayed; held jobs are submissions;
//! - the sliding window is exact: a seeded stream of submissions, updates,
//!   immediates, deletes and pops on a pinned clock against a brute-force
//!   count; a clock pinned back within the window;
//! - `AUTODELAY 0 0` turns it off and forgets the window.

use std::collections::BTreeMap;

use crate::common::*;

/// `ORCA.ENQUEUE` of a new job at `now`: its `delay`.
fn delay_of(c: &mut Con, q: &str, cfg: &str, now: i64) -> i64 {
    let f = enqueue_at(c, q, cfg, now);
    assert_eq!(int(&f, "created"), 1, "{f:?}");
    int(&f, "delay")
}

/// The reservations of `q` (their scores), sorted.
fn scores(c: &mut Con, q: &str) -> Vec<i64> {
    let mut v: Vec<i64> = list_all(c, q)
        .iter()
        .map(|f| int(f, "release_at"))
        .collect();
    v.sort();
    v
}

#[test]
fn autodelay_setting_defaults_and_refusals() {
    let s = Server::start_with(
        &[
            "autodelay-window",
            "900000",
            "autodelay-step",
            "60000",
            "autodelay-cap",
            "600000",
        ],
        &[],
    );
    let mut c = s.conn();
    let st = settings(&mut c, "new");
    assert_eq!(
        (
            int(&st, "autodelay_window"),
            int(&st, "autodelay_step"),
            int(&st, "autodelay_cap")
        ),
        (900_000, 60_000, 600_000)
    );
    config_set(&mut c, "orca.autodelay-window", 0);
    config_set(&mut c, "orca.autodelay-step", 0);
    config_set(&mut c, "orca.autodelay-cap", 0);
    let st = settings(&mut c, "other");
    assert_eq!(
        (int(&st, "autodelay_window"), int(&st, "autodelay_step")),
        (0, 0)
    );
    // Without AUTODELAY the write reply has no `delay`.
    let f = enqueue_job(&mut c, "q", "a", Some("user.1"), 0);
    assert!(!f.contains_key("delay"), "{f:?}");

    let st = set(&mut c, "q", &["AUTODELAY", "1000", "100", "CAP", "250"]);
    assert_eq!(
        (
            int(&st, "autodelay_window"),
            int(&st, "autodelay_step"),
            int(&st, "autodelay_cap")
        ),
        (1000, 100, 250)
    );
    // Without CAP the cap is 0 (none); AUTODELAY 0 0 turns it off.
    let st = set(&mut c, "q", &["autodelay", "1000", "100"]);
    assert_eq!(int(&st, "autodelay_cap"), 0);
    let st = set(&mut c, "q", &["AUTODELAY", "0", "0"]);
    assert_eq!(
        (int(&st, "autodelay_window"), int(&st, "autodelay_step")),
        (0, 0)
    );

    assert_settings_refused(
        &mut c,
        "q",
        &[
            (
                vec!["AUTODELAY", "0", "5"],
                "ERR AUTODELAY with a step or cap needs a window (AUTODELAY 0 0 turns it off)",
            ),
            (
                vec!["AUTODELAY", "0", "0", "CAP", "5"],
                "ERR AUTODELAY with a step or cap needs a window (AUTODELAY 0 0 turns it off)",
            ),
            (
                vec!["AUTODELAY", "1000"],
                "ERR option AUTODELAY needs 2 value(s)",
            ),
            (vec!["AUTODELAY"], "ERR option AUTODELAY needs 2 value(s)"),
            (
                vec!["AUTODELAY", "x", "1"],
                "ERR AUTODELAY window must be an integer",
            ),
            (
                vec!["AUTODELAY", "1000", "-1"],
                "ERR AUTODELAY step must be between 0 and 9007199254740991",
            ),
            (
                vec!["AUTODELAY", "1000", "1", "CAP", "1e3"],
                "ERR CAP must be an integer",
            ),
            (
                vec!["CAP", "5"],
                "ERR CAP belongs to AUTODELAY: AUTODELAY <window> <step> CAP <ms>",
            ),
            (
                vec!["AUTODELAY", "1000", "100", "CAP"],
                "ERR option CAP needs 1 value(s)",
            ),
            (
                vec!["AUTODELAY", "1", "1", "AUTODELAY", "2", "2"],
                "ERR option AUTODELAY given twice",
            ),
        ],
    );
}

#[test]
fn delay_is_step_times_the_collations_recent_submissions() {
    let (_s, mut c, t) = start_pinned();
    let q = "q";
    set(&mut c, q, &["AUTODELAY", "1000", "100", "ORDER", "FIFO"]);
    // user.1 at t, t+100, t+500, t+1100, t+1100, t+2200 (priority 7):
    // (now - 1000, now] holds 0, 1, 2, 1 (t+500), 2 (t+500, t+1100), 0.
    let mut want = Vec::new();
    for (i, (dt, d)) in [
        (0, 0),
        (100, 100),
        (500, 200),
        (1100, 100),
        (1100, 200),
        (2200, 0),
    ]
    .iter()
    .enumerate()
    {
        let f = enqueue_at(
            &mut c,
            q,
            &config(&format!("u{i}"), Some("user.1"), 7),
            t + dt,
        );
        assert_eq!(int(&f, "delay"), *d, "submission at t+{dt}");
        assert_eq!(int(&f, "created_at"), t + dt);
        want.push(t + dt + 7 + d);
    }
    want.sort();
    assert_eq!(
        scores(&mut c, q),
        want,
        "reservations at now + priority + delay"
    );
    // Collations are counted apart (type and id), and jobs without one are
    // never delayed.
    assert_eq!(
        delay_of(&mut c, q, &config("x1", Some("team.1"), 0), t + 2200),
        0
    );
    assert_eq!(
        delay_of(&mut c, q, &config("x2", Some("user.2"), 0), t + 2200),
        0
    );
    assert_eq!(
        delay_of(&mut c, q, &config("x3", Some("team.1"), 0), t + 2200),
        100
    );
    assert_eq!(delay_of(&mut c, q, &config("x4", None, 0), t + 2200), 0);
    assert_eq!(delay_of(&mut c, q, &config("x5", None, 0), t + 2200), 0);
    assert_eq!(
        delay_of(&mut c, q, &config("x6", Some("user.1"), 0), t + 2200),
        100
    );
    // FIFO pairing with a delayed reservation: the first job keeps the
    // earliest reservation.
    let first = must_status(&mut c, q, &key_of("u0"));
    assert_eq!(int(&first, "release_at"), t + 7);
    assert_check(&mut c, q);
}

#[test]
fn cap_limits_the_delay() {
    let (_s, mut c, t) = start_pinned();
    set(&mut c, "q", &["AUTODELAY", "60000", "100", "CAP", "250"]);
    let got: Vec<i64> = (0..5)
        .map(|i| {
            delay_of(
                &mut c,
                "q",
                &config(&format!("j{i}"), Some("user.1"), 0),
                t + i,
            )
        })
        .collect();
    assert_eq!(got, vec![0, 100, 200, 250, 250]);
    // The write reply of a LIFO collation shows the paired reservation (the
    // earliest); the reservations themselves carry the delays.
    assert_eq!(
        scores(&mut c, "q"),
        vec![t, t + 101, t + 202, t + 253, t + 254]
    );
}

#[test]
fn updates_and_immediates_are_not_submissions() {
    let (_s, mut c, t) = start_pinned();
    let q = "q";
    set(&mut c, q, &["AUTODELAY", "10000", "1000"]);
    assert_eq!(delay_of(&mut c, q, &config("a", Some("user.1"), 0), t), 0);
    // An update: created 0, delay 0, its reservation untouched.
    let f = enqueue_at(&mut c, q, &revised("a", 2), t + 1);
    assert_eq!((int(&f, "created"), int(&f, "delay")), (0, 0));
    assert_eq!(int(&f, "release_at"), t);
    // Immediate jobs: not delayed, not counted (new ones and upgrades).
    for (i, cmd) in ["ORCA.IMMEDIATE", "ORCA.IMMEDIATE"].iter().enumerate() {
        let cfg = config(&format!("i{i}"), Some("user.1"), 0);
        let f = fields(ok(&mut c, &args![*cmd, q, cfg, "NOW", t + 2]));
        assert_eq!((int(&f, "immediate"), int(&f, "release_at")), (1, t + 2));
        assert_eq!(int(&f, "delay"), 0, "{f:?}");
    }
    let f = reenqueue(&mut c, q, &config("r", Some("user.1"), 0), t + 3);
    assert_eq!((int(&f, "immediate"), int(&f, "release_at")), (1, t + 3));
    // A dead letter requeued is immediate too.
    set(&mut c, q, &["LIFETIME", "1"]);
    enqueue_at(&mut c, q, &config("dead", Some("user.9"), 0), t - 10);
    assert_eq!(int(&tick_at(&mut c, q, t - 9), "lifetime"), 1);
    set(&mut c, q, &["LIFETIME", "0"]);
    ok(&mut c, &args!["ORCA.DEAD", q, "REQUEUE", key_of("dead")]);
    // Only "a" counted for user.1; user.9's one submission counts for it.
    assert_eq!(
        delay_of(&mut c, q, &config("b", Some("user.1"), 0), t + 4),
        1000
    );
    assert_eq!(
        delay_of(&mut c, q, &config("c", Some("user.9"), 0), t + 4),
        1000
    );
    assert_check(&mut c, q);
}

#[test]
fn held_jobs_are_submissions_and_keep_their_delay() {
    let (_s, mut c, t) = start_pinned();
    let q = "q";
    set(&mut c, q, &["AUTODELAY", "10000", "1000"]);
    close_gate(&mut c, q, "img");
    let f = enqueue_at(&mut c, q, &gated("h", Some("user.1"), 5, "img"), t);
    assert_eq!(
        (text(&f, "state"), int(&f, "delay"), int(&f, "release_at")),
        ("held".into(), 0, t + 5)
    );
    let f = enqueue_at(&mut c, q, &gated("h2", Some("user.1"), 5, "img"), t + 1);
    assert_eq!((int(&f, "delay"), int(&f, "release_at")), (1000, t + 1006));
    assert_eq!(
        delay_of(&mut c, q, &config("d", Some("user.1"), 0), t + 2),
        2000
    );
    // Opened well after the window: the delays they got at arrival stay.
    assert_eq!(open_gate(&mut c, q, "img"), 2);
    assert_eq!(scores(&mut c, q), vec![t + 5, t + 1006, t + 2002]);
    assert_check(&mut c, q);
}

#[test]
fn off_forgets_the_window() {
    let (_s, mut c, t) = start_pinned();
    set(&mut c, "q", &["AUTODELAY", "10000", "1000"]);
    for i in 0..3 {
        delay_of(
            &mut c,
            "q",
            &config(&format!("a{i}"), Some("user.1"), 0),
            t + i,
        );
    }
    set(&mut c, "q", &["AUTODELAY", "0", "0"]);
    let f = enqueue_at(&mut c, "q", &config("off", Some("user.1"), 0), t + 5);
    assert!(!f.contains_key("delay"), "off: no delay field {f:?}");
    set(&mut c, "q", &["AUTODELAY", "10000", "1000"]);
    assert_eq!(
        delay_of(&mut c, "q", &config("b", Some("user.1"), 0), t + 6),
        0
    );
    assert_eq!(
        delay_of(&mut c, "q", &config("b2", Some("user.1"), 0), t + 7),
        1000
    );
}

#[test]
fn a_clock_pinned_back_within_the_window() {
    let (_s, mut c, t) = start_pinned();
    set(&mut c, "q", &["AUTODELAY", "1000", "100"]);
    // (now - 1000, now] with submissions at 5000, 5000, then 4500 (the
    // two later ones are not in its window), 4600, 5000.
    let got: Vec<i64> = [5000, 5000, 4500, 4600, 5000]
        .iter()
        .enumerate()
        .map(|(i, dt)| {
            delay_of(
                &mut c,
                "q",
                &config(&format!("b{i}"), Some("user.1"), 0),
                t + dt,
            )
        })
        .collect();
    assert_eq!(got, vec![0, 100, 0, 100, 400]);
    assert_check(&mut c, "q");
}

/// A seeded stream of puts, updates, immediates, deletes, pops and gated
/// jobs at a non-decreasing pinned clock; every new collation job's delay
/// checked against a brute-force count of the submissions so far.
#[test]
fn sliding_window_is_exact() {
    let (_s, mut c, base) = start_pinned();
    let (window, step, cap) = (3000i64, 70i64, 1000i64);
    for seed in [1u64, 2, 3] {
        let q = format!("w{seed}");
        set(&mut c, &q, &["AUTODELAY", "3000", "70", "CAP", "1000"]);
        close_gate(&mut c, &q, "img");
        let mut rng = Rng::new(seed);
        let mut subs: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
        let mut names: Vec<String> = Vec::new();
        let mut t = base;
        let colls = ["user.1", "user.2", "team.1"];
        for i in 0..400 {
            t += *rng.pick(&[0, 0, 10, 100, 400, 1500, 2999, 3000, 3001]);
            let coll = *rng.pick(&colls);
            match rng.below(10) {
                0..=5 => {
                    let name = format!("n{i}");
                    let gated_job = rng.chance(20);
                    let cfg = if gated_job {
                        gated(&name, Some(coll), 3, "img")
                    } else {
                        config(&name, Some(coll), 3)
                    };
                    let times = subs.entry(coll).or_default();
                    let n = times.iter().filter(|&&s| s > t - window && s <= t).count() as i64;
                    let want = (n * step).min(cap);
                    let f = enqueue_at(&mut c, &q, &cfg, t);
                    assert_eq!(
                        int(&f, "delay"),
                        want,
                        "seed {seed} step {i}: {coll} at {t}"
                    );
                    times.push(t);
                    names.push(name);
                }
                6 if !names.is_empty() => {
                    let name = rng.pick(&names).clone();
                    let f = enqueue_at(&mut c, &q, &revised(&name, i), t);
                    assert_eq!(int(&f, "delay"), 0);
                }
                7 => {
                    let f = immediate_at(&mut c, &q, &config(&format!("i{i}"), Some(coll), 0), t);
                    assert_eq!(int(&f, "delay"), 0);
                }
                8 if !names.is_empty() => {
                    let name = rng.pick(&names).clone();
                    ok(&mut c, &args!["ORCA.DELETE", &q, key_of(&name)]);
                }
                _ => {
                    ok(&mut c, &args!["ORCA.POP", &q, "LEASE", 0, "NOW", t]);
                }
            }
        }
        assert_check(&mut c, &q);
    }
}
