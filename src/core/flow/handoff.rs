//! Hand-offs (`ACK`/`NACK ... FORWARD`): what a finish will do, known before
//! anything changes, so the adapter can enqueue the successor first (the
//! half that may still refuse, and refuses without changing anything) and
//! then finish the delivery, which these checks say cannot refuse.

use crate::core::config::JobKey;
use crate::core::error::QueueError;
use crate::core::limits::{valid_time, MAX_TIME};
use crate::core::queue::Queue;
use crate::core::worker::Policy;

impl Queue {
    /// Would `ack(key, token, result, now, ..)` succeed? Changes nothing;
    /// the error is the one `ack` would give.
    pub fn ack_check(
        &self,
        key: &JobKey,
        token: u64,
        has_result: bool,
        now: i64,
    ) -> Result<(), QueueError> {
        self.held_lease(key, token)?;
        if has_result && !valid_time(now) {
            return Err(QueueError::TimeOverflow);
        }
        Ok(())
    }

    /// Would `nack(key, token, delay, now, policy)` succeed, and would it
    /// make the job a dead letter (`true`)? Changes nothing; the error is the
    /// one `nack` would give.
    pub fn nack_check(
        &self,
        key: &JobKey,
        token: u64,
        delay: Option<i64>,
        now: i64,
        policy: &Policy,
    ) -> Result<bool, QueueError> {
        let lease = self.held_lease(key, token)?;
        let attempts = lease.job.attempts;
        if !valid_time(now) {
            return Err(QueueError::TimeOverflow);
        }
        let delay = delay.unwrap_or_else(|| policy.backoff(attempts));
        now.checked_add(delay)
            .filter(|t| (0..=MAX_TIME).contains(t) && delay >= 0)
            .ok_or(QueueError::TimeOverflow)?;
        self.seq_room()?;
        if lease.superseded {
            return Ok(false);
        }
        Ok(policy.max_attempts > 0 && attempts >= policy.max_attempts)
    }
}

#[cfg(test)]
mod tests {
    use crate::core::config::parse_config;
    use crate::core::{Order, Policy, Queue, QueueError};

    const POLICY: Policy = Policy {
        max_attempts: 2,
        retry_base: 1000,
        retry_cap: 60_000,
    };

    fn popped(q: &mut Queue, name: &str, now: i64) -> ([u8; 32], u64) {
        let json = format!(r#"{{"key":"{name}"}}"#);
        let cfg = parse_config(json.as_bytes()).unwrap();
        q.enqueue(&cfg, json.as_bytes(), now).unwrap();
        let (out, _) = q.pop_deliveries(now, 1000, 1, &POLICY).unwrap();
        let d = &out[0];
        (d.job.key, d.lease.unwrap().0)
    }

    /// Each check answers what the finish then does, on every path.
    #[test]
    fn checks_agree_with_the_finishes() {
        let mut q = Queue::new(Order::Lifo);
        let (k, t) = popped(&mut q, "a", 10);
        assert_eq!(
            q.ack_check(&k, t + 99, false, 10),
            Err(QueueError::LeaseNotHeld)
        );
        assert_eq!(q.ack_check(&k, t, true, -1), Err(QueueError::TimeOverflow));
        assert_eq!(q.ack_check(&k, t, true, 10), Ok(()));
        assert!(q.ack(&k, t, Some(b"r"), 10, 1000).is_ok());
        assert_eq!(q.ack_check(&k, t, false, 10), Err(QueueError::LeaseNotHeld));

        // First attempt: a retry; the second dies.
        let (k, t) = popped(&mut q, "b", 20);
        assert_eq!(q.nack_check(&k, t, None, 20, &POLICY), Ok(false));
        assert_eq!(
            q.nack_check(&k, t, Some(i64::MAX), 20, &POLICY),
            Err(QueueError::TimeOverflow)
        );
        q.nack(&k, t, Some(0), 20, &POLICY).unwrap();
        let (out, _) = q.pop_deliveries(21, 1000, 1, &POLICY).unwrap();
        let t2 = out[0].lease.unwrap().0;
        assert_eq!(q.nack_check(&k, t2, None, 21, &POLICY), Ok(true));
        assert!(matches!(
            q.nack(&k, t2, None, 21, &POLICY),
            Ok(crate::core::NackOutcome::Dead { .. })
        ));

        // A cancelled lease says so; a superseded attempt never dies.
        let (k, t) = popped(&mut q, "c", 30);
        q.cancel(&k).unwrap();
        assert_eq!(q.ack_check(&k, t, false, 30), Err(QueueError::Cancelled));
        assert_eq!(
            q.nack_check(&k, t, None, 30, &POLICY),
            Err(QueueError::Cancelled)
        );
        let (k, t) = popped(&mut q, "d", 40);
        let cfg = parse_config(br#"{"key":"d"}"#).unwrap();
        q.enqueue(&cfg, br#"{"key":"d"}"#, 41).unwrap();
        let zero = Policy {
            max_attempts: 1,
            ..POLICY
        };
        assert_eq!(q.nack_check(&k, t, None, 41, &zero), Ok(false));
    }
}
