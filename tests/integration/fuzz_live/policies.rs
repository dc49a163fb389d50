//! What the fuzzer sends of the grading policies and fair workers: gate
//! names (a small pool, and hostile ones: empty, binary, at and over
//! `orca.max-gate-length`, huge), `ORCA.GATE`, the config field `gate`,
//! `ORCA.MPOP` with random numkeys and keys, `ACK`/`NACK ... NEXT`,
//! `ORCA.SETTINGS` with every policy option, `ORCA.LIST STATE ... GATE`.

use crate::common::*;

use super::*;

/// Gates the stream closes, opens and names in configs.
pub const GATES: &[&str] = &["img0", "img1", "img2", "img-\u{e9}"];

impl Fuzz {
    /// A gate name for `ORCA.GATE`: mostly from the pool, else hostile.
    pub(super) fn gate_name(&mut self) -> Vec<u8> {
        match self.below(100) {
            0..=79 => self.rng.pick(GATES).as_bytes().to_vec(),
            80..=83 => Vec::new(),
            84..=87 => b"g\x00\xff\r\n".to_vec(),
            88..=90 => vec![b'g'; 255 + self.below(3) as usize],
            91 => vec![b'h'; 1 << 16],
            92..=94 => {
                let kw = *self.rng.pick(KEYWORDS);
                self.case(kw)
            }
            _ => self.random_bytes(12),
        }
    }

    /// The `"gate"` member of a config, or `None`: the pool, JSON escapes
    /// of it, and hostile values.
    pub(super) fn gate_field(&mut self) -> Option<String> {
        if !self.pct(35) {
            return None;
        }
        Some(match self.below(100) {
            0..=74 => json_str(self.rng.pick::<&str>(GATES)),
            75..=79 => "\"img-\\u00e9\"".to_string(),
            80..=82 => "\"\"".to_string(),
            83..=85 => json_str(&"g".repeat(255 + self.below(3) as usize)),
            86..=87 => "\"g\\u0000\\n\"".to_string(),
            88..=90 => "null".to_string(),
            91..=93 => self.below(10).to_string(),
            94..=95 => "[\"img0\"]".to_string(),
            _ => "{\"gate\":\"img0\"}".to_string(),
        })
    }

    /// `ORCA.GATE <queue> <gate> <op>`, sometimes with a wrong arity.
    pub(super) fn gate_command(&mut self) -> Vec<Vec<u8>> {
        let op = match self.below(100) {
            0..=44 => "CLOSE",
            45..=74 => "OPEN",
            75..=94 => "DROP",
            _ => *self.rng.pick(KEYWORDS),
        };
        let mut a = vec![
            self.name("ORCA.GATE"),
            self.queue(),
            self.gate_name(),
            self.case(op),
        ];
        match self.below(40) {
            0 => {
                a.pop();
            }
            1 => a.push(self.gate_name()),
            _ => {}
        }
        a
    }

    /// `ORCA.MPOP <numkeys> <queue>... [options]`: numkeys mostly right,
    /// sometimes 0, negative, too large, or not a number.
    pub(super) fn mpop_command(&mut self) -> Vec<Vec<u8>> {
        let n = 1 + self.below(4) as usize;
        let queues: Vec<Vec<u8>> = (0..n).map(|_| self.queue()).collect();
        let numkeys: Vec<u8> = match self.below(20) {
            0 => b"0".to_vec(),
            1 => b"-1".to_vec(),
            2 => (n + 1 + self.below(3) as usize).to_string().into_bytes(),
            3 => self.edge_int(),
            4 if n > 1 => (n - 1).to_string().into_bytes(),
            _ => n.to_string().into_bytes(),
        };
        let mut a = vec![self.name("ORCA.MPOP"), numkeys];
        a.extend(queues);
        a.extend(self.options(POP_OPTIONS));
        a
    }

    /// `ORCA.MACK <queue> <n> <key> <lease> ... [RESULTS ...] [TTL] [NOW]
    /// [NEXT [LEASE ms] [COUNT n]]`: harvested leases of one queue (with
    /// strays), sometimes a wrong count of pairs or of results.
    pub(super) fn mack_command(&mut self) -> Vec<Vec<u8>> {
        let (q, k, l) = self.lease_target();
        let mut pairs = vec![k, l];
        for _ in 0..self.below(4) {
            let (q2, k2, l2) = self.lease_target();
            // Mostly pairs of the same queue; a stray one now and then.
            if q2 == q || self.pct(20) {
                pairs.extend([k2, l2]);
            }
        }
        let n = pairs.len() / 2;
        let numleases = match self.below(20) {
            0 => self.edge_int(),
            1 => (n + 1).to_string().into_bytes(),
            _ => n.to_string().into_bytes(),
        };
        let mut a = vec![self.name("ORCA.MACK"), q, numleases];
        a.extend(pairs);
        let mut opts = self.options(&[("TTL", 0), ("NOW", 0)]);
        if self.pct(40) {
            let count = match self.below(10) {
                0 => n + 1,
                1 => n.saturating_sub(1),
                _ => n,
            };
            let mut r = vec![self.case("RESULTS")];
            for _ in 0..count {
                r.push(self.option_value(4));
            }
            let at = 2 * self.below(opts.len() as u64 / 2 + 1) as usize;
            opts.splice(at..at, r);
        }
        a.extend(opts);
        if self.pct(40) {
            a.extend(self.next_option());
            if self.pct(50) {
                a.push(self.case("COUNT"));
                let v = self.option_value(2);
                a.push(v);
            }
        }
        a
    }

    /// `NEXT [LEASE ms [FORMAT f]]` after an ACK or NACK (sometimes misplaced
    /// options).
    /// `FORWARD <queue2> <config>` of a hand-off (a quarter of the time),
    /// now and then short of its values.
    pub(super) fn forward_option(&mut self) -> Vec<Vec<u8>> {
        if !self.pct(25) {
            return Vec::new();
        }
        let mut a = vec![self.case("FORWARD"), self.queue()];
        if !self.pct(5) {
            a.push(self.config());
        }
        a
    }

    pub(super) fn next_option(&mut self) -> Vec<Vec<u8>> {
        let mut a = vec![self.case("NEXT")];
        match self.below(10) {
            0..=4 => {}
            5..=7 => {
                a.push(self.case("LEASE"));
                let v = self.option_value(1);
                a.push(v);
                if self.pct(50) {
                    a.push(self.case("FORMAT"));
                    let v = self.option_value(7);
                    a.push(v);
                }
                if self.pct(40) {
                    a.push(self.case("WORKER"));
                    let v = self.option_value(4);
                    a.push(v);
                }
            }
            8 => a.push(self.case("LEASE")),
            _ => {
                let kw = *self.rng.pick(KEYWORDS);
                a.push(self.case(kw));
                let v = self.edge_int();
                a.push(v);
            }
        }
        a
    }

    /// `ORCA.SETTINGS <queue>` with policy options: lifetimes short enough
    /// for the timer to expire jobs during the run, windows, caps, bounds.
    pub(super) fn settings_command(&mut self) -> Vec<Vec<u8>> {
        let mut a = vec![self.name("ORCA.SETTINGS"), self.queue()];
        let small = |f: &mut Fuzz, max: u64| -> Vec<u8> {
            if f.pct(10) {
                f.edge_int()
            } else {
                f.below(max).to_string().into_bytes()
            }
        };
        for _ in 0..1 + self.below(3) {
            match self.below(8) {
                0 => {
                    a.push(self.case("LIFETIME"));
                    let v = match self.below(4) {
                        0 => b"0".to_vec(),
                        1 => small(self, 300),
                        2 => small(self, 60_000),
                        _ => self.ms(false),
                    };
                    a.push(v);
                }
                1 => {
                    a.push(self.case("AUTODELAY"));
                    let w = if self.pct(20) {
                        b"0".to_vec()
                    } else {
                        small(self, 5000)
                    };
                    a.push(w);
                    let s = small(self, 2000);
                    a.push(s);
                    if self.pct(40) {
                        a.push(self.case("CAP"));
                        let c = small(self, 10_000);
                        a.push(c);
                    }
                }
                2 => {
                    a.push(self.case("MAXRUNNING"));
                    let v = small(self, 4);
                    a.push(v);
                }
                3 => {
                    a.push(self.case("DEADMAX"));
                    let v = small(self, 6);
                    a.push(v);
                }
                4 => {
                    a.push(self.case("DEADTTL"));
                    let v = small(self, 2000);
                    a.push(v);
                }
                5 => {
                    a.push(self.case("RESULTMAX"));
                    let v = small(self, 6);
                    a.push(v);
                }
                6 => {
                    a.push(self.case("ORDER"));
                    let v = self.option_value(5);
                    a.push(v);
                }
                _ => {
                    let kw = *self.rng.pick(KEYWORDS);
                    a.push(self.case(kw));
                    if self.pct(70) {
                        let v = self.edge_int();
                        a.push(v);
                    }
                }
            }
        }
        a
    }

    /// `ORCA.LIST <queue> STATE <state> [GATE <gate>] [OFFSET/LIMIT]`.
    pub(super) fn list_state_command(&mut self) -> Vec<Vec<u8>> {
        let state = *self.rng.pick(&[
            "QUEUED", "HELD", "HELD", "LEASED", "DELAYED", "DEAD", "DONE", "PENNED",
        ]);
        let mut a = vec![
            self.name("ORCA.LIST"),
            self.queue(),
            self.case("STATE"),
            self.case(state),
        ];
        if self.pct(40) {
            a.push(self.case("GATE"));
            a.push(self.gate_name());
        }
        a.extend(self.options(&[("OFFSET", 6), ("LIMIT", 6)]));
        a
    }
}
