//! What one queue holds for another until the relay carries it, and the
//! peers a relay found missing (and since when).
//!
//! Messages go one way per kind: a child's end from the child's queue to the
//! parent's; a cancellation or an "unknown flow" answer from the parent's
//! queue to the child's. They are kept per peer in the order they were
//! posted, and carried in that order.

use std::collections::{BTreeMap, VecDeque};

use super::slot::SlotState;
use super::FlowId;
use crate::core::config::JobKey;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// Child `index` (key `child`) of flow `flow` of parent `parent` ended
    /// at `at` (child's queue -> parent's).
    Ended {
        parent: JobKey,
        flow: FlowId,
        index: u32,
        child: JobKey,
        state: SlotState,
        cause: u8,
        /// The child's ACK said the verdict is decided (`STOP`).
        stop: bool,
        result: Option<Box<[u8]>>,
        at: i64,
    },
    /// Flow `flow` was cancelled (its parent deleted, regraded, failed or
    /// back early): cancel its children still linked (parent's queue ->
    /// child's).
    Cancel { flow: FlowId, at: i64 },
    /// An end came for flow `flow`, which the parent's queue does not have:
    /// release its children as ordinary jobs (parent's queue -> child's).
    Unknown { flow: FlowId, at: i64 },
}

impl Message {
    pub fn bytes(&self) -> usize {
        match self {
            Message::Ended { result, .. } => result.as_ref().map_or(0, |r| r.len()),
            _ => 0,
        }
    }

    pub fn flow(&self) -> FlowId {
        match self {
            Message::Ended { flow, .. }
            | Message::Cancel { flow, .. }
            | Message::Unknown { flow, .. } => *flow,
        }
    }

    pub fn at(&self) -> i64 {
        match self {
            Message::Ended { at, .. }
            | Message::Cancel { at, .. }
            | Message::Unknown { at, .. } => *at,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outbox {
    by_peer: BTreeMap<Box<[u8]>, VecDeque<Message>>,
    len: usize,
    /// Bytes of the results the messages carry.
    bytes: usize,
    /// Peers a relay found missing, with the (pinned) time it first did.
    unreachable: BTreeMap<Box<[u8]>, i64>,
}

impl Outbox {
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Post `m` for queue `peer`.
    pub fn post(&mut self, peer: &[u8], m: Message) {
        self.len += 1;
        self.bytes += m.bytes();
        match self.by_peer.get_mut(peer) {
            Some(q) => q.push_back(m),
            None => {
                self.by_peer.insert(peer.into(), VecDeque::from([m]));
            }
        }
    }

    /// Take every message for `peer`, in order.
    pub fn take(&mut self, peer: &[u8]) -> VecDeque<Message> {
        let q = self.by_peer.remove(peer).unwrap_or_default();
        self.len -= q.len();
        self.bytes -= q.iter().map(Message::bytes).sum::<usize>();
        q
    }

    pub fn has_for(&self, peer: &[u8]) -> bool {
        self.by_peer.contains_key(peer)
    }

    /// The messages for `peer`, in order.
    pub fn for_peer(&self, peer: &[u8]) -> impl Iterator<Item = &Message> {
        self.by_peer.get(peer).into_iter().flatten()
    }

    /// The peers with messages, in name order.
    pub fn peers(&self) -> impl Iterator<Item = &[u8]> {
        self.by_peer.keys().map(|k| &**k)
    }

    /// Every (peer, message), peers in name order (the canonical order).
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &Message)> {
        self.by_peer
            .iter()
            .flat_map(|(p, q)| q.iter().map(move |m| (&**p, m)))
    }

    /// A relay found `peer` missing at `now`: since when it has been (the
    /// first such relay's time).
    pub fn missing(&mut self, peer: &[u8], now: i64) -> i64 {
        *self.unreachable.entry(peer.into()).or_insert(now)
    }

    /// A relay found `peer`: it is not missing any more.
    pub fn found(&mut self, peer: &[u8]) -> bool {
        self.unreachable.remove(peer).is_some()
    }

    pub fn missing_since(&self, peer: &[u8]) -> Option<i64> {
        self.unreachable.get(peer).copied()
    }

    pub fn unreachable(&self) -> impl Iterator<Item = (&[u8], i64)> {
        self.unreachable.iter().map(|(p, t)| (&**p, *t))
    }

    /// Record a peer found missing as saved.
    pub fn restore_missing(&mut self, peer: Box<[u8]>, since: i64) -> bool {
        self.unreachable.insert(peer, since).is_none()
    }

    /// Ends in flight for flow `flow` of parent `parent` to `peer`, and
    /// whether a cancellation or answer for flow `flow` is in flight.
    pub fn in_flight(&self, peer: &[u8], parent: &JobKey, flow: FlowId) -> (u32, bool) {
        let mut ends = 0;
        let mut other = false;
        for m in self.for_peer(peer) {
            match m {
                Message::Ended {
                    parent: p, flow: f, ..
                } if *f == flow && p == parent => ends += 1,
                Message::Cancel { flow: f, .. } | Message::Unknown { flow: f, .. }
                    if *f == flow =>
                {
                    other = true
                }
                _ => {}
            }
        }
        (ends, other)
    }

    /// Counts and bytes agree with the messages; no empty peer list.
    pub fn check(&self) -> Result<(), String> {
        let len: usize = self.by_peer.values().map(VecDeque::len).sum();
        let bytes: usize = self.by_peer.values().flatten().map(Message::bytes).sum();
        if len != self.len || bytes != self.bytes {
            return Err(format!(
                "outbox counts {} messages / {} bytes, holds {len} / {bytes}",
                self.len, self.bytes
            ));
        }
        if self.by_peer.values().any(VecDeque::is_empty) {
            return Err("outbox keeps an empty list for a peer".into());
        }
        for m in self.by_peer.values().flatten() {
            if let Message::Ended { state, result, .. } = m {
                if *state == SlotState::Pending || (result.is_some() && *state != SlotState::Done) {
                    return Err(format!("outbox holds an end of state {}", state.name()));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(flow: FlowId, index: u32, result: &[u8]) -> Message {
        Message::Ended {
            parent: [9; 32],
            flow,
            index,
            child: [index as u8; 32],
            state: SlotState::Done,
            cause: 0,
            stop: false,
            result: Some(result.into()),
            at: 5,
        }
    }

    #[test]
    fn messages_are_kept_per_peer_in_order_with_their_bytes() {
        let mut o = Outbox::default();
        o.post(b"p", ended(1, 0, b"abc"));
        o.post(b"q", Message::Cancel { flow: 4, at: 1 });
        o.post(b"p", ended(1, 1, b"de"));
        assert_eq!((o.len(), o.bytes()), (3, 5));
        assert_eq!(o.peers().collect::<Vec<_>>(), vec![&b"p"[..], &b"q"[..]]);
        assert_eq!(o.in_flight(b"p", &[9; 32], 1), (2, false));
        assert_eq!(o.in_flight(b"q", &[9; 32], 4), (0, true));
        assert!(o.check().is_ok());
        let p = o.take(b"p");
        assert_eq!(p.iter().map(|m| m.bytes()).collect::<Vec<_>>(), vec![3, 2]);
        assert_eq!((o.len(), o.bytes()), (1, 0));
        assert!(!o.has_for(b"p") && o.has_for(b"q"));
        assert!(o.take(b"p").is_empty());
        assert!(o.check().is_ok());
    }

    #[test]
    fn a_missing_peer_keeps_the_time_it_was_first_found_missing() {
        let mut o = Outbox::default();
        assert_eq!(o.missing(b"p", 100), 100);
        assert_eq!(o.missing(b"p", 500), 100);
        assert_eq!(o.missing_since(b"p"), Some(100));
        assert!(o.found(b"p"));
        assert!(!o.found(b"p"));
        assert_eq!(o.missing(b"p", 700), 700);
    }
}
