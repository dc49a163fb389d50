//! The parent's side of a flow: what a parent waiting for its children (or
//! back with their results) keeps in its own queue.
//!
//! A `Flow` is made by `ORCA.FANOUT` with one pending slot per child. Each
//! child's end is counted once (`Flow::end`); the flow says when the parent
//! comes back (`Step`): when no slot is pending, or earlier by its `ONFAIL`
//! policy or a child's `STOP`. The parent job itself is parked in the flow
//! while it waits (`J`: the queue's parked-job record) and taken out when it
//! comes back; the slots (results) stay until the parent is done with them.

use std::collections::BTreeSet;

use super::slot::{Slot, SlotState};
use super::FlowId;
use crate::core::config::{JobKey, KeyMap};

/// What a failed child (failed, deleted, lost) does to its parent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnFail {
    /// Counted; the other children run (the default).
    Continue = 0,
    /// The parent fails at once (a dead letter); the others are cancelled.
    Fail = 1,
    /// The parent comes back at once; the others are cancelled.
    Stop = 2,
}

impl OnFail {
    pub fn name(self) -> &'static str {
        match self {
            OnFail::Continue => "continue",
            OnFail::Fail => "fail",
            OnFail::Stop => "stop",
        }
    }

    pub fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => OnFail::Continue,
            1 => OnFail::Fail,
            2 => OnFail::Stop,
            _ => return None,
        })
    }
}

/// A flow's counts. `failed` includes deleted and lost children.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub total: u32,
    pub done: u32,
    pub failed: u32,
    pub cancelled: u32,
    pub pending: u32,
}

/// What counting a child's end did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Counted; the parent still waits.
    Waiting,
    /// The parent comes back. `cancelled`: children that were still pending
    /// and are now cancelled (their queue must be told).
    Complete { cancelled: u32 },
    /// `ONFAIL FAIL`: the parent fails (a dead letter); `cancelled` as above.
    Failed { cancelled: u32 },
    /// Nothing changed: the slot had ended already, or the flow no longer
    /// waits (its parent came back or failed).
    Ignored,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FlowError {
    /// No children.
    Empty,
    /// More children than a flow can count.
    TooMany,
    /// The child at this 0-based index has the key of an earlier one.
    Duplicate(usize),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flow<J> {
    pub id: FlowId,
    /// The queue the children are in.
    pub child_queue: Box<[u8]>,
    pub onfail: OnFail,
    /// When the parent began waiting (ms).
    pub since: i64,
    /// The parent job while it waits; `None` once it came back.
    parent: Option<J>,
    slots: Vec<Slot>,
    counts: Counts,
    /// Bytes of the results kept in the slots.
    bytes: usize,
}

impl<J> Flow<J> {
    /// A waiting flow with one pending slot per child key, in order.
    pub fn new(
        id: FlowId,
        child_queue: &[u8],
        onfail: OnFail,
        since: i64,
        parent: J,
        keys: &[JobKey],
    ) -> Result<Self, FlowError> {
        if keys.is_empty() {
            return Err(FlowError::Empty);
        }
        let total = u32::try_from(keys.len()).map_err(|_| FlowError::TooMany)?;
        let mut seen = KeyMap::default();
        for (i, k) in keys.iter().enumerate() {
            if seen.insert(*k, ()).is_some() {
                return Err(FlowError::Duplicate(i));
            }
        }
        Ok(Flow {
            id,
            child_queue: child_queue.into(),
            onfail,
            since,
            parent: Some(parent),
            slots: keys.iter().map(|k| Slot::pending(*k)).collect(),
            counts: Counts {
                total,
                pending: total,
                ..Counts::default()
            },
            bytes: 0,
        })
    }

    /// A flow as it was saved (the codec validates it with `check`).
    pub fn from_parts(
        id: FlowId,
        child_queue: Box<[u8]>,
        onfail: OnFail,
        since: i64,
        parent: Option<J>,
        slots: Vec<Slot>,
    ) -> Self {
        let mut counts = Counts {
            total: u32::try_from(slots.len()).unwrap_or(u32::MAX),
            ..Counts::default()
        };
        for s in &slots {
            *counts.slot_mut(s.state) += 1;
        }
        let bytes = slots.iter().map(Slot::bytes).sum();
        Flow {
            id,
            child_queue,
            onfail,
            since,
            parent,
            slots,
            counts,
            bytes,
        }
    }

    /// Is the parent waiting (not back yet)?
    pub fn waiting(&self) -> bool {
        self.parent.is_some()
    }

    pub fn parent(&self) -> Option<&J> {
        self.parent.as_ref()
    }

    pub fn parent_mut(&mut self) -> Option<&mut J> {
        self.parent.as_mut()
    }

    pub fn counts(&self) -> Counts {
        self.counts
    }

    pub fn slots(&self) -> &[Slot] {
        &self.slots
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The slots from `offset`, at most `limit`, and no more once their
    /// results exceed `max_bytes` (always one if any is left).
    pub fn page(&self, offset: usize, limit: usize, max_bytes: usize) -> &[Slot] {
        let rest = self.slots.get(offset..).unwrap_or(&[]);
        let mut n = 0;
        let mut bytes = 0usize;
        for s in rest.iter().take(limit) {
            if n > 0 && bytes.saturating_add(s.bytes()) > max_bytes {
                break;
            }
            bytes = bytes.saturating_add(s.bytes());
            n += 1;
        }
        &rest[..n]
    }

    /// Count the end of child `index` (whose key must be `key`): `state` is
    /// not `Pending`; `stop`: the child's ACK said the verdict is decided.
    pub fn end(
        &mut self,
        index: u32,
        key: &JobKey,
        state: SlotState,
        cause: u8,
        result: Option<Box<[u8]>>,
        stop: bool,
    ) -> Step {
        if !self.waiting() || state == SlotState::Pending {
            return Step::Ignored;
        }
        let Some(slot) = self.slots.get_mut(index as usize) else {
            return Step::Ignored;
        };
        if slot.key != *key || slot.state != SlotState::Pending {
            return Step::Ignored;
        }
        slot.state = state;
        slot.cause = if state == SlotState::Failed { cause } else { 0 };
        if state == SlotState::Done {
            slot.result = result;
            self.bytes += slot.bytes();
        }
        self.counts.pending -= 1;
        *self.counts.slot_mut(state) += 1;
        self.decide(state.is_failure(), stop && state == SlotState::Done)
    }

    /// Every pending child is lost (its queue is gone for good): the flow
    /// decides as if each had failed.
    pub fn lose_pending(&mut self) -> Step {
        if !self.waiting() {
            return Step::Ignored;
        }
        let lost = self.mark_pending(SlotState::Lost);
        if lost == 0 {
            return Step::Ignored;
        }
        self.decide(true, false)
    }

    /// Mark every pending slot `state`; how many there were.
    fn mark_pending(&mut self, state: SlotState) -> u32 {
        let mut n = 0;
        for s in self
            .slots
            .iter_mut()
            .filter(|s| s.state == SlotState::Pending)
        {
            s.state = state;
            n += 1;
        }
        self.counts.pending -= n;
        *self.counts.slot_mut(state) += n;
        n
    }

    fn decide(&mut self, failure: bool, stop: bool) -> Step {
        if failure && self.onfail == OnFail::Fail {
            let cancelled = self.mark_pending(SlotState::Cancelled);
            return Step::Failed { cancelled };
        }
        if stop || (failure && self.onfail == OnFail::Stop) || self.counts.pending == 0 {
            let cancelled = self.mark_pending(SlotState::Cancelled);
            return Step::Complete { cancelled };
        }
        Step::Waiting
    }

    /// The parent comes back: taken out of the flow (the slots stay).
    pub fn take_parent(&mut self) -> Option<J> {
        self.parent.take()
    }

    /// The flow's own invariants: counts match the slots, results only on
    /// done slots, a waiting flow has pending slots or holds a parent that
    /// is about to come back, a returned one has none pending.
    pub fn check(&self) -> Result<(), String> {
        let again = Flow::<()>::from_parts(
            self.id,
            Box::default(),
            self.onfail,
            self.since,
            None,
            self.slots.clone(),
        );
        if again.counts != self.counts || again.bytes != self.bytes {
            return Err(format!(
                "flow {} counts {:?} / {} bytes, its slots say {:?} / {} bytes",
                self.id, self.counts, self.bytes, again.counts, again.bytes
            ));
        }
        if self.slots.is_empty() {
            return Err(format!("flow {} has no children", self.id));
        }
        if let Some(s) = self
            .slots
            .iter()
            .find(|s| s.result.is_some() && s.state != SlotState::Done)
        {
            return Err(format!(
                "flow {}: a {} child has a result",
                self.id,
                s.state.name()
            ));
        }
        if self.waiting() != (self.counts.pending > 0) {
            return Err(format!(
                "flow {}: {} with {} pending children",
                self.id,
                if self.waiting() {
                    "waiting"
                } else {
                    "complete"
                },
                self.counts.pending
            ));
        }
        let mut seen = KeyMap::default();
        if self.slots.iter().any(|s| seen.insert(s.key, ()).is_some()) {
            return Err(format!("flow {}: a child key twice", self.id));
        }
        Ok(())
    }
}

impl Counts {
    fn slot_mut(&mut self, s: SlotState) -> &mut u32 {
        match s {
            SlotState::Pending => &mut self.pending,
            SlotState::Done => &mut self.done,
            SlotState::Cancelled => &mut self.cancelled,
            SlotState::Failed | SlotState::Deleted | SlotState::Lost => &mut self.failed,
        }
    }
}

/// A queue's flows, by parent orca key, with the waiting ones in the order
/// they began waiting (for `LIST STATE WAITING` and lifetimes). Results'
/// bytes are kept in step.
#[derive(Clone, Debug)]
pub struct Flows<J> {
    by_key: KeyMap<Flow<J>>,
    waiting: BTreeSet<(i64, JobKey)>,
    bytes: usize,
}

impl<J> Default for Flows<J> {
    fn default() -> Self {
        Flows {
            by_key: KeyMap::default(),
            waiting: BTreeSet::new(),
            bytes: 0,
        }
    }
}

impl<J> Flows<J> {
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// Parents waiting for their children.
    pub fn waiting_len(&self) -> usize {
        self.waiting.len()
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn get(&self, key: &JobKey) -> Option<&Flow<J>> {
        self.by_key.get(key)
    }

    /// Is `key` a parent waiting for its children?
    pub fn is_waiting(&self, key: &JobKey) -> bool {
        self.by_key.get(key).is_some_and(Flow::waiting)
    }

    /// Add the flow of parent `key`; an older flow of the key comes back
    /// (the caller cancels or drops it).
    pub fn insert(&mut self, key: JobKey, flow: Flow<J>) -> Option<Flow<J>> {
        let old = self.remove(&key);
        if flow.waiting() {
            self.waiting.insert((flow.since, key));
        }
        self.bytes += flow.bytes;
        self.by_key.insert(key, flow);
        old
    }

    pub fn remove(&mut self, key: &JobKey) -> Option<Flow<J>> {
        let f = self.by_key.remove(key)?;
        self.waiting.remove(&(f.since, *key));
        self.bytes -= f.bytes;
        Some(f)
    }

    /// Count a child's end in the flow `id` of parent `key` (see
    /// `Flow::end`); `Ignored` if there is no such flow.
    #[allow(clippy::too_many_arguments)]
    pub fn end(
        &mut self,
        key: &JobKey,
        id: FlowId,
        index: u32,
        child: &JobKey,
        state: SlotState,
        cause: u8,
        result: Option<Box<[u8]>>,
        stop: bool,
    ) -> Step {
        let Some(f) = self.by_key.get_mut(key).filter(|f| f.id == id) else {
            return Step::Ignored;
        };
        let before = f.bytes;
        let step = f.end(index, child, state, cause, result, stop);
        self.bytes = self.bytes - before + f.bytes;
        step
    }

    /// The pending children of flow `id` of parent `key` are lost.
    pub fn lose_pending(&mut self, key: &JobKey, id: FlowId) -> Step {
        match self.by_key.get_mut(key).filter(|f| f.id == id) {
            Some(f) => f.lose_pending(),
            None => Step::Ignored,
        }
    }

    /// The parent of `key` comes back: taken out of its flow, which stays
    /// with the results.
    pub fn take_parent(&mut self, key: &JobKey) -> Option<J> {
        let f = self.by_key.get_mut(key)?;
        let p = f.take_parent()?;
        self.waiting.remove(&(f.since, *key));
        Some(p)
    }

    /// The waiting parents in the order they began waiting, from `offset`.
    pub fn waiting_keys(&self) -> impl Iterator<Item = &(i64, JobKey)> {
        self.waiting.iter()
    }

    /// The one that began waiting first.
    pub fn first_waiting(&self) -> Option<(i64, JobKey)> {
        self.waiting.first().copied()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&JobKey, &Flow<J>)> {
        self.by_key.iter()
    }

    /// The waiting flows whose children are in `child_queue`: (parent key,
    /// flow id).
    pub fn waiting_on<'a>(
        &'a self,
        child_queue: &'a [u8],
    ) -> impl Iterator<Item = (JobKey, FlowId)> + 'a {
        self.by_key
            .iter()
            .filter(move |(_, f)| f.waiting() && &*f.child_queue == child_queue)
            .map(|(k, f)| (*k, f.id))
    }

    /// Every flow's own invariants, and the waiting order and byte count.
    pub fn check(&self) -> Result<(), String> {
        let mut waiting = 0;
        let mut bytes = 0;
        for (k, f) in &self.by_key {
            f.check()?;
            bytes += f.bytes;
            if f.waiting() {
                waiting += 1;
                if !self.waiting.contains(&(f.since, *k)) {
                    return Err(format!(
                        "waiting flow {} missing from the waiting order",
                        f.id
                    ));
                }
            }
        }
        if waiting != self.waiting.len() {
            return Err(format!(
                "{} waiting parents, {} in the waiting order",
                waiting,
                self.waiting.len()
            ));
        }
        if bytes != self.bytes {
            return Err(format!(
                "flows hold {bytes} result bytes, counted {}",
                self.bytes
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u32) -> JobKey {
        let mut k = [0u8; 32];
        k[..4].copy_from_slice(&i.to_le_bytes());
        k
    }

    fn flow(n: u32, onfail: OnFail) -> Flow<&'static str> {
        let keys: Vec<JobKey> = (0..n).map(key).collect();
        Flow::new(7, b"tests", onfail, 100, "parent", &keys).unwrap()
    }

    #[test]
    fn new_refuses_no_children_and_duplicates() {
        assert_eq!(
            Flow::new(1, b"q", OnFail::Continue, 0, (), &[]).unwrap_err(),
            FlowError::Empty
        );
        assert_eq!(
            Flow::new(1, b"q", OnFail::Continue, 0, (), &[key(1), key(2), key(1)]).unwrap_err(),
            FlowError::Duplicate(2)
        );
    }

    #[test]
    fn continue_counts_every_end_and_completes_when_none_is_pending() {
        let mut f = flow(3, OnFail::Continue);
        assert_eq!(
            f.end(
                0,
                &key(0),
                SlotState::Done,
                0,
                Some(b"r0".to_vec().into()),
                false
            ),
            Step::Waiting
        );
        // The same end again, a wrong key, an index out of range: nothing.
        assert_eq!(
            f.end(0, &key(0), SlotState::Done, 0, None, false),
            Step::Ignored
        );
        assert_eq!(
            f.end(1, &key(2), SlotState::Done, 0, None, false),
            Step::Ignored
        );
        assert_eq!(
            f.end(9, &key(9), SlotState::Done, 0, None, false),
            Step::Ignored
        );
        assert_eq!(
            f.end(
                2,
                &key(2),
                SlotState::Failed,
                1,
                Some(b"x".to_vec().into()),
                false
            ),
            Step::Waiting
        );
        assert_eq!(
            f.end(1, &key(1), SlotState::Deleted, 0, None, false),
            Step::Complete { cancelled: 0 }
        );
        assert_eq!(
            f.counts(),
            Counts {
                total: 3,
                done: 1,
                failed: 2,
                cancelled: 0,
                pending: 0
            }
        );
        // Only a done child keeps its result.
        assert_eq!(f.slots()[0].result.as_deref(), Some(&b"r0"[..]));
        assert_eq!(f.slots()[2].result, None);
        assert_eq!(f.slots()[2].cause, 1);
        assert_eq!(f.bytes(), 2);
        assert_eq!(f.take_parent(), Some("parent"));
        assert!(f.check().is_ok());
        // Back already: later ends change nothing.
        assert_eq!(
            f.end(0, &key(0), SlotState::Done, 0, None, false),
            Step::Ignored
        );
    }

    #[test]
    fn fail_fails_at_the_first_failure_and_cancels_the_rest() {
        let mut f = flow(4, OnFail::Fail);
        assert_eq!(
            f.end(3, &key(3), SlotState::Done, 0, None, false),
            Step::Waiting
        );
        assert_eq!(
            f.end(1, &key(1), SlotState::Lost, 0, None, false),
            Step::Failed { cancelled: 2 }
        );
        let c = f.counts();
        assert_eq!((c.done, c.failed, c.cancelled, c.pending), (1, 1, 2, 0));
    }

    #[test]
    fn stop_comes_back_early_on_a_failure_or_a_childs_stop() {
        let mut f = flow(3, OnFail::Stop);
        assert_eq!(
            f.end(0, &key(0), SlotState::Failed, 2, None, false),
            Step::Complete { cancelled: 2 }
        );
        let mut g = flow(3, OnFail::Continue);
        assert_eq!(
            g.end(0, &key(0), SlotState::Failed, 2, None, false),
            Step::Waiting
        );
        // A child's STOP counts only with its ACK.
        assert_eq!(
            g.end(1, &key(1), SlotState::Deleted, 0, None, true),
            Step::Waiting
        );
        assert_eq!(
            g.end(2, &key(2), SlotState::Done, 0, None, true),
            Step::Complete { cancelled: 0 }
        );
        let mut h = flow(3, OnFail::Continue);
        assert_eq!(
            h.end(2, &key(2), SlotState::Done, 0, None, true),
            Step::Complete { cancelled: 2 }
        );
        assert!(h.take_parent().is_some());
        assert!(h.check().is_ok());
    }

    #[test]
    fn losing_the_pending_children_decides_as_failures() {
        let mut f = flow(3, OnFail::Continue);
        f.end(0, &key(0), SlotState::Done, 0, None, false);
        assert_eq!(f.lose_pending(), Step::Complete { cancelled: 0 });
        assert_eq!(f.counts().failed, 2);
        assert_eq!(f.lose_pending(), Step::Ignored);
        let mut g = flow(2, OnFail::Fail);
        assert_eq!(g.lose_pending(), Step::Failed { cancelled: 0 });
    }

    #[test]
    fn pages_stop_at_the_byte_budget_but_hold_at_least_one() {
        let mut f = flow(5, OnFail::Continue);
        for i in 0..5 {
            f.end(
                i,
                &key(i),
                SlotState::Done,
                0,
                Some(vec![0u8; 10].into()),
                false,
            );
        }
        assert_eq!(f.page(0, 100, 25).len(), 2);
        assert_eq!(f.page(0, 100, 5).len(), 1);
        assert_eq!(f.page(3, 100, 1000).len(), 2);
        assert_eq!(f.page(4, 1, 1000).len(), 1);
        assert!(f.page(5, 10, 10).is_empty() && f.page(99, 10, 10).is_empty());
        assert!(f.page(0, 0, 10).is_empty());
    }

    #[test]
    fn flows_keep_the_waiting_order_and_bytes_in_step() {
        let mut fs: Flows<&str> = Flows::default();
        let mut a = flow(2, OnFail::Continue);
        a.since = 50;
        fs.insert(key(100), a);
        fs.insert(key(101), flow(1, OnFail::Continue));
        assert_eq!(fs.waiting_len(), 2);
        assert_eq!(fs.first_waiting(), Some((50, key(100))));
        // A message for another flow id of the key is not counted.
        assert_eq!(
            fs.end(&key(100), 8, 0, &key(0), SlotState::Done, 0, None, false),
            Step::Ignored
        );
        assert_eq!(
            fs.end(
                &key(101),
                7,
                0,
                &key(0),
                SlotState::Done,
                0,
                Some(b"abc".to_vec().into()),
                false
            ),
            Step::Complete { cancelled: 0 }
        );
        assert_eq!(fs.bytes(), 3);
        assert_eq!(fs.take_parent(&key(101)), Some("parent"));
        assert_eq!(fs.waiting_len(), 1);
        assert!(!fs.is_waiting(&key(101)) && fs.is_waiting(&key(100)));
        assert!(fs.check().is_ok());
        assert_eq!(
            fs.waiting_on(b"tests").collect::<Vec<_>>(),
            vec![(key(100), 7)]
        );
        // A new flow of the same key replaces the old one, which comes back.
        let old = fs.insert(key(101), flow(1, OnFail::Stop)).unwrap();
        assert_eq!(old.counts().done, 1);
        assert_eq!(fs.bytes(), 0);
        assert!(fs.remove(&key(100)).is_some());
        assert!(fs.check().is_ok());
        assert_eq!(fs.len(), 1);
    }

    #[test]
    fn check_finds_counts_that_do_not_match() {
        let f = flow(2, OnFail::Continue);
        let mut slots = f.slots().to_vec();
        slots[0].state = SlotState::Done;
        slots[0].result = None;
        let bad = Flow::from_parts(
            1,
            b"q".to_vec().into(),
            OnFail::Continue,
            0,
            Some(()),
            slots,
        );
        assert!(bad.check().is_ok()); // from_parts counts: consistent
        let mut done = flow(1, OnFail::Continue);
        done.slots[0].result = Some(b"x".to_vec().into());
        assert!(done.check().is_err());
        let mut back = flow(1, OnFail::Continue);
        back.take_parent();
        assert!(back.check().is_err(), "returned with a pending child");
    }
}
