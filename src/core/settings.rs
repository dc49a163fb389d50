//! A queue's own settings (`ORCA.SETTINGS`). They are part of the queue:
//! saved with it, replicated when they change, and given concrete values
//! when the queue is created (from the module's defaults), so a queue
//! behaves the same on every server whatever that server's configuration.

use super::error::QueueError;
use super::limits::valid_time;

/// Order in which a collation's own jobs are handed out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Most recent submission first (the grading-queue design's default).
    Lifo,
    /// Oldest submission first.
    Fifo,
}

impl Order {
    pub fn name(self) -> &'static str {
        match self {
            Order::Lifo => "lifo",
            Order::Fifo => "fifo",
        }
    }
}

/// Automatic delay by submission rate: a new collation job is delayed by
/// `step` for every job the same collation submitted in the `window` ms
/// before it, at most `cap` (0: no cap). `window == 0` is off.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AutoDelay {
    pub window: i64,
    pub step: i64,
    pub cap: i64,
}

impl AutoDelay {
    pub fn on(&self) -> bool {
        self.window > 0
    }

    /// The delay for a submission that has `earlier` submissions in the window.
    pub fn delay(&self, earlier: usize) -> i64 {
        if !self.on() {
            return 0;
        }
        let d = self
            .step
            .saturating_mul(i64::try_from(earlier).unwrap_or(i64::MAX));
        let d = if self.cap > 0 { d.min(self.cap) } else { d };
        d.min(super::limits::MAX_TIME)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    pub order: Order,
    /// A waiting job not handed out this long after its release time
    /// becomes a dead letter (`expired`). 0: never.
    pub lifetime: i64,
    pub autodelay: AutoDelay,
    /// Leased jobs a collation may have before its other jobs wait. 0: no cap.
    pub max_running: u32,
    /// Most dead letters kept (the oldest go first). 0: no bound.
    pub dead_max: u64,
    /// Dead letters are forgotten this long after they died. 0: kept.
    pub dead_ttl: i64,
    /// Most kept results (those expiring first go first). 0: no bound.
    pub result_max: u64,
}

/// Dead letters and results kept at most, unless set otherwise: enough for
/// any course's deadline, and nothing in a key grows forever.
pub const DEFAULT_KEEP_MAX: u64 = 100_000;

impl Default for Settings {
    /// The built-in defaults (also what a queue saved before these
    /// settings existed loads with).
    fn default() -> Self {
        Settings {
            order: Order::Lifo,
            lifetime: 0,
            autodelay: AutoDelay::default(),
            max_running: 0,
            dead_max: DEFAULT_KEEP_MAX,
            dead_ttl: 0,
            result_max: DEFAULT_KEEP_MAX,
        }
    }
}

/// Largest `max_running`, `dead_max` and `result_max` accepted.
pub const MAX_COUNT_SETTING: u64 = u32::MAX as u64;

impl Settings {
    /// Refuse values out of range (every time is 0..=2^53-1, counts fit
    /// their fields, an auto delay needs a step when it has a window).
    pub fn validate(&self) -> Result<(), QueueError> {
        let times = [
            self.lifetime,
            self.autodelay.window,
            self.autodelay.step,
            self.autodelay.cap,
            self.dead_ttl,
        ];
        if !times.iter().all(|t| valid_time(*t)) {
            return Err(QueueError::BadSetting(
                "times must be between 0 and 9007199254740991 ms".into(),
            ));
        }
        if self.dead_max > MAX_COUNT_SETTING || self.result_max > MAX_COUNT_SETTING {
            return Err(QueueError::BadSetting(format!(
                "counts must be between 0 and {MAX_COUNT_SETTING}"
            )));
        }
        if self.autodelay.window == 0 && (self.autodelay.step != 0 || self.autodelay.cap != 0) {
            return Err(QueueError::BadSetting(
                "AUTODELAY with a step or cap needs a window (AUTODELAY 0 0 turns it off)".into(),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn autodelay_steps_and_caps() {
        let off = AutoDelay::default();
        assert_eq!(off.delay(10), 0);
        let a = AutoDelay {
            window: 900_000,
            step: 60_000,
            cap: 0,
        };
        assert_eq!((a.delay(0), a.delay(1), a.delay(3)), (0, 60_000, 180_000));
        assert_eq!(a.delay(usize::MAX), crate::core::MAX_TIME);
        let capped = AutoDelay { cap: 100_000, ..a };
        assert_eq!((capped.delay(1), capped.delay(2)), (60_000, 100_000));
    }

    #[test]
    fn validation() {
        assert!(Settings::default().validate().is_ok());
        let bad = [
            Settings {
                lifetime: -1,
                ..Settings::default()
            },
            Settings {
                dead_max: MAX_COUNT_SETTING + 1,
                ..Settings::default()
            },
            Settings {
                autodelay: AutoDelay {
                    window: 0,
                    step: 5,
                    cap: 0,
                },
                ..Settings::default()
            },
        ];
        for s in bad {
            assert!(s.validate().is_err(), "{s:?}");
        }
    }
}
