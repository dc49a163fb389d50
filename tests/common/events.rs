//! Keyspace notifications of one queue key: subscribe, then read the
//! module's events in order (`orca.enqueue`, `orca.gate`, ...).

use std::time::Duration;

use super::reply::Con;

/// A subscription to the keyspace channel of one key and to every
/// `orca.*` keyevent channel of db 0. Turn the events on first
/// (`CONFIG SET notify-keyspace-events KEd`).
pub struct Events<'a> {
    pub ps: redis::PubSub<'a>,
    key: String,
}

impl<'a> Events<'a> {
    /// Subscribe `sub` (a connection of its own) to the events of `key`.
    pub fn subscribe(sub: &'a mut Con, key: &str) -> Events<'a> {
        let mut ps = sub.as_pubsub();
        ps.psubscribe(format!("__keyspace@0__:{key}")).unwrap();
        ps.psubscribe("__keyevent@0__:orca.*").unwrap();
        ps.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        Events {
            ps,
            key: key.to_string(),
        }
    }

    /// The next event on the key: the keyspace message (the event name),
    /// checked against the keyevent message that must follow it.
    pub fn next(&mut self) -> String {
        let m = self.ps.get_message().expect("an event in time");
        assert_eq!(
            m.get_channel_name(),
            format!("__keyspace@0__:{}", self.key),
            "{m:?}"
        );
        let ev: String = m.get_payload().unwrap();
        let m2 = self.ps.get_message().expect("the keyevent message");
        assert_eq!(m2.get_channel_name(), format!("__keyevent@0__:{ev}"));
        let key: String = m2.get_payload().unwrap();
        assert_eq!(key, self.key);
        ev
    }

    /// The next events are exactly `want`, in order (`step`: what caused
    /// them, for the failure message).
    pub fn expect(&mut self, want: &[&str], step: &str) {
        for w in want {
            let got = self.next();
            assert_eq!(got, *w, "event after {step}");
        }
    }

    /// No event arrives within `ms`; the last use of the subscription (a
    /// read that timed out leaves it unusable).
    pub fn expect_none(mut self, ms: u64, step: &str) {
        self.ps
            .set_read_timeout(Some(Duration::from_millis(ms)))
            .unwrap();
        if let Ok(m) = self.ps.get_message() {
            panic!("unexpected event after {step}: {m:?}");
        }
    }
}
