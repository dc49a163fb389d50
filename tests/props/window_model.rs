//! The model of automatic delays by submission rate (docs/commands.md,
//! `ORCA.SETTINGS ... AUTODELAY <window> <step> [CAP <ms>]` and
//! `ORCA.ENQUEUE`), written naively: every submission since the delay was
//! turned on is kept in a list and counted by a scan, so the count is
//! exact by construction.
//!
//! The rules, quoted:
//! - "a new collation job is delayed by `step` × (the jobs its collation
//!   submitted in the `window` ms before it: `(now - window, now]`), at most
//!   `CAP` (0 = no cap)": `delay`;
//! - "Updates of an existing key are not submissions; immediate jobs are
//!   neither delayed nor counted" (so only `Model::enqueue` of a new job
//!   records one, held or not: a held job is a new job, and GATE OPEN
//!   queues it "with the automatic delay it got at arrival");
//! - "`AUTODELAY 0 0` turns it off (and forgets the window)": `set`.
//!
//! Not in docs/commands.md, taken as stated in `src/core/window.rs`'s
//! comment (the report of this suite says so): a collation's record is
//! forgotten by a tick once its newest submission can no longer count for
//! anything, i.e. at newest + window, and counts once in the tick's
//! `forgotten` (`forget`, `next_expiry`). The docs also do not say what a
//! larger window does to submissions already outside the old one, nor what
//! a clock going backwards does to the count: the harnesses never grow the
//! window while it is on, and never move the clock back while it is on.

use std::collections::BTreeMap;

use orca::core::settings::AutoDelay;

#[derive(Clone, Debug, Default)]
pub struct MWindow {
    pub window: i64,
    pub step: i64,
    pub cap: i64,
    /// Every submission (collation, time) since the delay was last turned
    /// on, until its collation's record is forgotten.
    pub subs: Vec<(String, i64)>,
}

impl MWindow {
    pub fn on(&self) -> bool {
        self.window > 0
    }

    pub fn settings(&self) -> AutoDelay {
        AutoDelay {
            window: self.window,
            step: self.step,
            cap: self.cap,
        }
    }

    /// Earlier submissions of `coll` in `(now - window, now]`.
    pub fn count(&self, coll: &str, now: i64) -> usize {
        self.subs
            .iter()
            .filter(|(c, t)| c == coll && *t > now - self.window && *t <= now)
            .count()
    }

    /// The automatic delay of a new job of `coll` submitted at `now`.
    pub fn delay(&self, coll: &str, now: i64) -> i64 {
        if !self.on() {
            return 0;
        }
        let d = self.step as i128 * self.count(coll, now) as i128;
        let d = if self.cap > 0 {
            d.min(self.cap as i128)
        } else {
            d
        };
        // Anything above 2^53-1 makes the release time out of range anyway.
        d.min(i64::MAX as i128) as i64
    }

    pub fn record(&mut self, coll: &str, now: i64) {
        if self.on() {
            self.subs.push((coll.to_string(), now));
        }
    }

    pub fn set(&mut self, a: AutoDelay) {
        if a.window == 0 {
            self.subs.clear();
        }
        self.window = a.window;
        self.step = a.step;
        self.cap = a.cap;
    }

    /// Each collation with a record: the time its newest submission stops
    /// counting (newest + window).
    pub fn records(&self) -> BTreeMap<&str, i64> {
        let mut m: BTreeMap<&str, i64> = BTreeMap::new();
        for (c, t) in &self.subs {
            let e = m.entry(c.as_str()).or_insert(i64::MIN);
            *e = (*e).max(t.saturating_add(self.window));
        }
        m
    }

    pub fn next_expiry(&self) -> Option<i64> {
        self.records().values().copied().min()
    }

    /// A tick at `now`: forget the records whose newest submission no
    /// longer counts; how many.
    pub fn forget(&mut self, now: i64) -> usize {
        let gone: Vec<String> = self
            .records()
            .into_iter()
            .filter(|(_, at)| *at <= now)
            .map(|(c, _)| c.to_string())
            .collect();
        self.subs.retain(|(c, _)| !gone.contains(c));
        gone.len()
    }
}
