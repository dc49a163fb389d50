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
    /// A serialized queue (RDB, RESTORE, import) is malformed; the text says how.
    Corrupt(String),
}

impl fmt::Display for QueueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueueError::BadConfig(s) => write!(f, "{s}"),
            QueueError::NoSuchJob => write!(f, "no such job"),
            QueueError::ImmediateNotMovable => write!(f, "immediate jobs cannot be moved"),
            QueueError::TimeOverflow => write!(f, "time out of range"),
            QueueError::Corrupt(s) => write!(f, "corrupt queue data: {s}"),
        }
    }
}

impl std::error::Error for QueueError {}
