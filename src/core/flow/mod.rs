//! Flows: parents that wait for their children, and what crosses between the
//! two queues of a link (docs/design.md, "Flows").
//!
//! - `slot`: a child's outcome as its parent keeps it
//! - `parent`: the parent's side: a `Flow` per waiting (or returned) parent,
//!   its slots, counts and `ONFAIL` policy, and `Flows`, the queue's flows
//! - `children`: the child's side: `Groups` (one per parent that has children
//!   here) and the links from child keys to them
//! - `handoff`: what a finish will do, before it is done (`ACK`/`NACK ... FORWARD`)
//! - `outbox`: messages one queue holds for another until the relay carries
//!   them, and the peers a relay found missing
//!
//! These parts know nothing of the queue order: the queue calls them when a
//! child ends (its link goes, a message is posted) and when the relay carries
//! a message (the flow counts it and says whether the parent comes back).

pub mod children;
pub mod handoff;
pub mod outbox;
pub mod parent;
pub mod slot;

pub use children::{Group, GroupId, Groups, Link};
pub use outbox::{Message, Outbox};
pub use parent::{Counts, Flow, FlowError, Flows, OnFail, Step};
pub use slot::{Slot, SlotState};

/// A flow's id: a sequence number of the parent's queue, unique there for
/// the queue's life, so a message for an older flow of the same parent key
/// is told apart.
pub type FlowId = u64;
