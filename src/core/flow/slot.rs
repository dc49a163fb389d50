//! A child's outcome as its parent keeps it.

use crate::core::config::JobKey;

/// Where a child stands, as its parent sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SlotState {
    /// Not ended yet (queued, held, running or waiting for a retry).
    Pending = 0,
    /// Acked (or taken by a `LEASE 0` pop).
    Done = 1,
    /// A dead letter (its cause is kept).
    Failed = 2,
    /// Deleted (`ORCA.DELETE`, `ORCA.GATE ... DROP`).
    Deleted = 3,
    /// Cancelled by its parent (`STOP`, `ONFAIL`, the parent deleted).
    Cancelled = 4,
    /// Its queue was gone for good (deleted, renamed, replaced).
    Lost = 5,
}

impl SlotState {
    pub fn name(self) -> &'static str {
        match self {
            SlotState::Pending => "pending",
            SlotState::Done => "done",
            SlotState::Failed => "failed",
            SlotState::Deleted => "deleted",
            SlotState::Cancelled => "cancelled",
            SlotState::Lost => "lost",
        }
    }

    pub fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => SlotState::Pending,
            1 => SlotState::Done,
            2 => SlotState::Failed,
            3 => SlotState::Deleted,
            4 => SlotState::Cancelled,
            5 => SlotState::Lost,
            _ => return None,
        })
    }

    /// Counted as a failure (`ONFAIL` applies).
    pub fn is_failure(self) -> bool {
        matches!(
            self,
            SlotState::Failed | SlotState::Deleted | SlotState::Lost
        )
    }
}

/// One child of a flow: 56 bytes plus its result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slot {
    pub key: JobKey,
    pub state: SlotState,
    /// For `Failed`: the dead letter's cause (`DeathCause` as a number).
    pub cause: u8,
    /// For `Done`: the ACK's result, if it gave one.
    pub result: Option<Box<[u8]>>,
}

impl Slot {
    pub fn pending(key: JobKey) -> Self {
        Slot {
            key,
            state: SlotState::Pending,
            cause: 0,
            result: None,
        }
    }

    pub fn bytes(&self) -> usize {
        self.result.as_ref().map_or(0, |r| r.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip_and_a_slot_stays_small() {
        for v in 0..=255u8 {
            if let Some(s) = SlotState::from_u8(v) {
                assert_eq!(s as u8, v);
                assert!(!s.name().is_empty());
            } else {
                assert!(v > 5);
            }
        }
        assert!(SlotState::Lost.is_failure() && !SlotState::Cancelled.is_failure());
        assert_eq!(std::mem::size_of::<Slot>(), 56);
    }
}
