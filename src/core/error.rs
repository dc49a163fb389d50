//! Errors of queue operations. The adapter turns each into an `ERR ...` reply;
//! an operation that returns an error has changed nothing.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueError {
    /// The job config is not acceptable; the text says why.
    BadConfig(String),
    /// No job under that orca key.
    NoSuchJob,
    /// `ORCA.MOVE` of an immediate job.
    ImmediateNotMovable,
    /// A time computation would leave the supported range.
    TimeOverflow,
    /// ACK/NACK/EXTEND of a lease whose job was deleted (cancelled).
    Cancelled,
    /// ACK/NACK/EXTEND with a lease that is not held (expired and handed
    /// out again, already acked or nacked, or never issued).
    LeaseNotHeld,
    /// `ORCA.DEAD ... REQUEUE` of a job whose key is queued again.
    AlreadyQueued,
    /// A serialized queue (RDB, RESTORE, import) is malformed; the text says how.
    Corrupt(String),
    /// The queue holds as many jobs (or collations) as one key can address.
    Full,
    /// A setting's value is not acceptable; the text says why.
    BadSetting(String),
    /// The job is held behind a closed gate (named); it has no place yet.
    Held(String),
    /// The job is running (leased), not waiting in the queue.
    Leased,
    /// The job waits for its retry (at the given time), outside the queue order.
    Delayed(i64),
    /// The job is a dead letter.
    Dead,
    /// The job is not in the queue order (held).
    NotQueued,
}

impl fmt::Display for QueueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueueError::BadConfig(s) => write!(f, "{s}"),
            QueueError::NoSuchJob => write!(f, "no such job"),
            QueueError::ImmediateNotMovable => write!(f, "immediate jobs cannot be moved"),
            QueueError::TimeOverflow => write!(f, "time out of range"),
            QueueError::Cancelled => write!(f, "job was cancelled"),
            QueueError::LeaseNotHeld => write!(
                f,
                "lease not held (it expired and the job was handed out again, was already acked or nacked, or never existed)"
            ),
            QueueError::AlreadyQueued => write!(f, "job is already queued"),
            QueueError::Corrupt(s) => write!(f, "corrupt queue data: {s}"),
            QueueError::Full => write!(
                f,
                "queue is full (one key holds at most 2^30 - 1 jobs and reservations)"
            ),
            QueueError::BadSetting(s) => write!(f, "{s}"),
            QueueError::Held(g) => write!(
                f,
                "job is held behind gate '{g}' (ORCA.GATE ... OPEN releases it)"
            ),
            QueueError::Leased => write!(
                f,
                "job is running (leased to a worker); it is not in the queue order"
            ),
            QueueError::Delayed(t) => write!(
                f,
                "job is waiting to be retried (at {t}); it is not in the queue order"
            ),
            QueueError::Dead => write!(
                f,
                "job is a dead letter (ORCA.DEAD ... REQUEUE puts it back)"
            ),
            QueueError::NotQueued => write!(f, "job is not in the queue order"),
        }
    }
}

impl std::error::Error for QueueError {}
