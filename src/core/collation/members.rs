//! A collation's two lists, its stack of jobs and its reservations, in
//! either form (small: lists through the records' links; large: two
//! trees), and the switch between forms. The pairing rule lives in their
//! use: the k-th job of the stack pairs with the k-th reservation.

use super::{corrupt, Collations, Large, Members, ResMembers, ResTree, StackMembers, StackTree};
use super::{DEMOTE_BELOW, LARGE, PROMOTE_ABOVE};
use crate::core::containers::slab::SlabId;
use crate::core::containers::Slab;
use crate::core::error::QueueError;
use crate::core::ids::{CollId, JobId, NodeId};
use crate::core::job::{CollRef, Job, JobLink};
use crate::core::reservation::{GlobalOrder, Owner, ResLink};

impl Collations {
    // ------------------------------------------------------------ the stack

    /// Put job `j` (its `skey` set) into collation `c`'s stack, in stack-key
    /// order. O(1) at either end in the small form, else O(m); O(log m) in
    /// the large form.
    pub fn push(
        &mut self,
        c: CollId,
        j: JobId,
        jobs: &mut Slab<Job, JobId>,
    ) -> Result<(), QueueError> {
        let skey = jobs[j].skey;
        jobs[j].coll = CollRef::in_stack_of(c);
        let rec = &self.recs[c];
        if rec.large() {
            let large = self
                .large
                .get_mut(&c)
                .ok_or_else(|| corrupt("large collation without its trees"))?;
            let node = large
                .stack
                .insert(skey, j, ())
                .ok_or_else(|| corrupt("stack key used twice in a collation"))?;
            jobs[j].link = JobLink::stack_node(node);
        } else {
            let (head, tail) = (rec.head, rec.tail);
            if head == JobId::NIL {
                jobs[j].link = JobLink::next_job(JobId::NIL);
                let rec = &mut self.recs[c];
                rec.head = j;
                rec.tail = j;
            } else if skey < jobs[head].skey {
                jobs[j].link = JobLink::next_job(head);
                self.recs[c].head = j;
            } else if skey > jobs[tail].skey {
                jobs[tail].link = JobLink::next_job(j);
                jobs[j].link = JobLink::next_job(JobId::NIL);
                self.recs[c].tail = j;
            } else {
                // Inside: after the last job with a smaller key.
                let mut p = head;
                loop {
                    let next = jobs[p].link.as_next_job();
                    if next == JobId::NIL || skey < jobs[next].skey {
                        if next != JobId::NIL && jobs[next].skey == skey {
                            return Err(corrupt("stack key used twice in a collation"));
                        }
                        jobs[j].link = JobLink::next_job(next);
                        jobs[p].link = JobLink::next_job(j);
                        break;
                    }
                    if jobs[next].skey == skey {
                        return Err(corrupt("stack key used twice in a collation"));
                    }
                    p = next;
                }
            }
        }
        let rec = &mut self.recs[c];
        rec.len += 1;
        if rec.len == 1 {
            self.active += 1;
        }
        Ok(())
    }

    /// Take job `j` out of collation `c`'s stack; returns the position it
    /// had. The job keeps naming the collation.
    pub fn unlink(
        &mut self,
        c: CollId,
        j: JobId,
        jobs: &mut Slab<Job, JobId>,
    ) -> Result<usize, QueueError> {
        let k = if self.recs[c].large() {
            let large = self
                .large
                .get_mut(&c)
                .ok_or_else(|| corrupt("large collation without its trees"))?;
            let node = jobs[j].link.as_stack_node();
            if large.stack.get_val(node) != Some(j) {
                return Err(corrupt("job missing from its collation"));
            }
            let k = large
                .stack
                .rank(node)
                .ok_or_else(|| corrupt("job missing from its collation"))?;
            large.stack.remove(node);
            if large.wants_compaction() && !self.sparse.contains(&c) {
                self.sparse.push(c);
            }
            k
        } else {
            let (k, prev) = self.small_position(c, j, jobs)?;
            let next = jobs[j].link.as_next_job();
            let rec = &mut self.recs[c];
            if prev == JobId::NIL {
                rec.head = next;
            } else {
                jobs[prev].link = JobLink::next_job(next);
            }
            if rec.tail == j {
                rec.tail = prev;
            }
            k
        };
        let job = &mut jobs[j];
        job.coll = CollRef::new(Some(c));
        job.link = JobLink::NONE;
        let rec = &mut self.recs[c];
        rec.len -= 1;
        if rec.len == 0 {
            self.active -= 1;
        }
        Ok(k)
    }

    /// Position of a small collation's job, with its predecessor.
    fn small_position(
        &self,
        c: CollId,
        j: JobId,
        jobs: &Slab<Job, JobId>,
    ) -> Result<(usize, JobId), QueueError> {
        let rec = &self.recs[c];
        let (mut prev, mut cur, mut k) = (JobId::NIL, rec.head, 0usize);
        while cur != j {
            if cur == JobId::NIL || k > rec.len as usize {
                return Err(corrupt("job missing from its collation"));
            }
            prev = cur;
            cur = jobs[cur].link.as_next_job();
            k += 1;
        }
        Ok((k, prev))
    }

    /// Position (0 = front) of job `j` in collation `c`'s stack.
    pub fn position(
        &self,
        c: CollId,
        j: JobId,
        jobs: &Slab<Job, JobId>,
    ) -> Result<usize, QueueError> {
        if self.recs[c].large() {
            let large = self
                .large
                .get(&c)
                .ok_or_else(|| corrupt("large collation without its trees"))?;
            let node = jobs[j].link.as_stack_node();
            if large.stack.get_val(node) != Some(j) {
                return Err(corrupt("job missing from its collation"));
            }
            large
                .stack
                .rank(node)
                .ok_or_else(|| corrupt("job missing from its collation"))
        } else {
            Ok(self.small_position(c, j, jobs)?.0)
        }
    }

    /// The job at position `k` of collation `c`'s stack.
    pub fn job_at(&self, c: CollId, k: usize, jobs: &Slab<Job, JobId>) -> Option<JobId> {
        if self.recs.get(c)?.large() {
            let large = self.large.get(&c)?;
            large.stack.nth(k).map(|n| large.stack.val(n))
        } else {
            self.stack(c, jobs).nth(k)
        }
    }

    /// The front (next to pop) of collation `c`'s stack.
    pub fn front(&self, c: CollId) -> Option<JobId> {
        let rec = self.recs.get(c)?;
        if rec.large() {
            let large = self.large.get(&c)?;
            large.stack.first().map(|n| large.stack.val(n))
        } else {
            rec.head.some()
        }
    }

    /// Job ids of collation `c`'s stack, front first.
    pub fn stack<'a>(&'a self, c: CollId, jobs: &'a Slab<Job, JobId>) -> StackMembers<'a> {
        match self.recs.get(c) {
            Some(rec) if rec.large() => match self.large.get(&c) {
                Some(large) => Members::Large(large.stack.iter(), &large.stack),
                None => Members::Empty,
            },
            rec => Members::Small {
                cur: rec.map_or(JobId::NIL, |r| r.head),
                next: Box::new(move |j| jobs[j].link.as_next_job()),
            },
        }
    }

    // ----------------------------------------------------- the reservations

    /// Add node `n` (owned by `c`, already in the global order) to
    /// collation `c`'s reservations, in key order.
    pub fn add_res(
        &mut self,
        c: CollId,
        n: NodeId,
        index: &mut GlobalOrder,
    ) -> Result<(), QueueError> {
        let key = *index.key(n);
        let rec = &self.recs[c];
        if rec.large() {
            let large = self
                .large
                .get_mut(&c)
                .ok_or_else(|| corrupt("large collation without its trees"))?;
            let rn = large
                .res
                .insert(key, n, ())
                .ok_or_else(|| corrupt("duplicate reservation"))?;
            index.set_aux(n, ResLink::tree_node(rn));
            return Ok(());
        }
        let (rhead, rtail) = (rec.rhead, rec.rtail);
        if rtail == NodeId::NIL {
            index.set_aux(n, ResLink::next(NodeId::NIL));
            let rec = &mut self.recs[c];
            rec.rhead = n;
            rec.rtail = n;
        } else if *index.key(rtail) < key {
            index.set_aux(rtail, ResLink::next(n));
            index.set_aux(n, ResLink::next(NodeId::NIL));
            self.recs[c].rtail = n;
        } else if key < *index.key(rhead) {
            index.set_aux(n, ResLink::next(rhead));
            self.recs[c].rhead = n;
        } else {
            // Inside: after the last reservation below `key`.
            let mut p = rhead;
            loop {
                let next = index.aux(p).as_next();
                if next == NodeId::NIL || key < *index.key(next) {
                    index.set_aux(n, ResLink::next(next));
                    index.set_aux(p, ResLink::next(n));
                    break;
                }
                p = next;
            }
        }
        Ok(())
    }

    /// Take the `k`-th reservation out of collation `c`'s reservations (the
    /// caller removes it from the global order); returns its node.
    pub fn unlink_res_at(
        &mut self,
        c: CollId,
        k: usize,
        index: &mut GlobalOrder,
    ) -> Result<NodeId, QueueError> {
        if self.recs[c].large() {
            let large = self
                .large
                .get_mut(&c)
                .ok_or_else(|| corrupt("large collation without its trees"))?;
            let rn = large
                .res
                .nth(k)
                .ok_or_else(|| corrupt("collation has too few reservations"))?;
            let n = large.res.val(rn);
            large.res.remove(rn);
            if large.wants_compaction() && !self.sparse.contains(&c) {
                self.sparse.push(c);
            }
            index.set_aux(n, ResLink::NONE);
            return Ok(n);
        }
        let (mut prev, mut cur) = (NodeId::NIL, self.recs[c].rhead);
        for _ in 0..k {
            if cur == NodeId::NIL {
                break;
            }
            prev = cur;
            cur = index.aux(cur).as_next();
        }
        if cur == NodeId::NIL {
            return Err(corrupt("collation has too few reservations"));
        }
        let next = index.aux(cur).as_next();
        let rec = &mut self.recs[c];
        if prev == NodeId::NIL {
            rec.rhead = next;
        } else {
            index.set_aux(prev, ResLink::next(next));
        }
        if rec.rtail == cur {
            rec.rtail = prev;
        }
        index.set_aux(cur, ResLink::NONE);
        Ok(cur)
    }

    /// The `k`-th earliest reservation of collation `c`.
    pub fn res_at(&self, c: CollId, k: usize, index: &GlobalOrder) -> Result<NodeId, QueueError> {
        let found = if self.recs[c].large() {
            self.large
                .get(&c)
                .and_then(|l| l.res.nth(k).map(|rn| l.res.val(rn)))
        } else {
            self.reservations(c, index).nth(k)
        };
        found.ok_or_else(|| corrupt("collation has too few reservations"))
    }

    /// Rank (0 = earliest) of reservation `n` among collation `c`'s.
    pub fn res_rank(&self, c: CollId, n: NodeId, index: &GlobalOrder) -> Result<usize, QueueError> {
        let found = if self.recs[c].large() {
            self.large.get(&c).and_then(|l| {
                let rn = index.aux(n).as_tree_node();
                (l.res.get_val(rn) == Some(n))
                    .then(|| l.res.rank(rn))
                    .flatten()
            })
        } else {
            self.reservations(c, index).position(|x| x == n)
        };
        found.ok_or_else(|| corrupt("reservation missing from its collation"))
    }

    /// The earliest reservation of collation `c`.
    pub fn first_res(&self, c: CollId) -> Option<NodeId> {
        let rec = self.recs.get(c)?;
        if rec.large() {
            let large = self.large.get(&c)?;
            large.res.first().map(|rn| large.res.val(rn))
        } else {
            rec.rhead.some()
        }
    }

    /// Reservation nodes of collation `c`, in key order.
    pub fn reservations<'a>(&'a self, c: CollId, index: &'a GlobalOrder) -> ResMembers<'a> {
        match self.recs.get(c) {
            Some(rec) if rec.large() => match self.large.get(&c) {
                Some(large) => Members::Large(large.res.iter(), &large.res),
                None => Members::Empty,
            },
            rec => Members::Small {
                cur: rec.map_or(NodeId::NIL, |r| r.rhead),
                next: Box::new(move |n| index.aux(n).as_next()),
            },
        }
    }

    // ------------------------------------------------------ representation

    /// Switch collation `c` to the form its size calls for (called after
    /// each operation that changed its stack, when stack and reservations
    /// pair again). O(m log m) when it switches, which happens only after
    /// O(m) operations in the other direction.
    pub fn settle(
        &mut self,
        c: CollId,
        jobs: &mut Slab<Job, JobId>,
        index: &mut GlobalOrder,
    ) -> Result<(), QueueError> {
        let Some(rec) = self.recs.get(c) else {
            return Ok(());
        };
        if !rec.large() && rec.len > PROMOTE_ABOVE {
            self.promote(c, jobs, index)
        } else if rec.large() && rec.len < DEMOTE_BELOW {
            self.demote(c, jobs, index)
        } else {
            Ok(())
        }
    }

    fn promote(
        &mut self,
        c: CollId,
        jobs: &mut Slab<Job, JobId>,
        index: &mut GlobalOrder,
    ) -> Result<(), QueueError> {
        let stack: Vec<JobId> = self.stack(c, jobs).collect();
        let res: Vec<NodeId> = self.reservations(c, index).collect();
        let mut large = Large {
            stack: StackTree::new(),
            res: ResTree::new(),
        };
        for j in stack {
            let node = large
                .stack
                .insert(jobs[j].skey, j, ())
                .ok_or_else(|| corrupt("stack key used twice in a collation"))?;
            jobs[j].link = JobLink::stack_node(node);
        }
        for n in res {
            let rn = large
                .res
                .insert(*index.key(n), n, ())
                .ok_or_else(|| corrupt("duplicate reservation"))?;
            index.set_aux(n, ResLink::tree_node(rn));
        }
        let rec = &mut self.recs[c];
        rec.head = JobId::from_raw(LARGE);
        rec.tail = JobId::NIL;
        rec.rhead = NodeId::NIL;
        rec.rtail = NodeId::NIL;
        self.large.insert(c, Box::new(large));
        Ok(())
    }

    fn demote(
        &mut self,
        c: CollId,
        jobs: &mut Slab<Job, JobId>,
        index: &mut GlobalOrder,
    ) -> Result<(), QueueError> {
        let large = self
            .large
            .remove(&c)
            .ok_or_else(|| corrupt("large collation without its trees"))?;
        let stack: Vec<JobId> = large.stack.iter().map(|n| large.stack.val(n)).collect();
        let res: Vec<NodeId> = large.res.iter().map(|n| large.res.val(n)).collect();
        for w in stack.windows(2) {
            jobs[w[0]].link = JobLink::next_job(w[1]);
        }
        for w in res.windows(2) {
            index.set_aux(w[0], ResLink::next(w[1]));
        }
        if let Some(&last) = stack.last() {
            jobs[last].link = JobLink::next_job(JobId::NIL);
        }
        if let Some(&last) = res.last() {
            index.set_aux(last, ResLink::next(NodeId::NIL));
        }
        let rec = &mut self.recs[c];
        rec.head = JobId::or_nil(stack.first().copied());
        rec.tail = JobId::or_nil(stack.last().copied());
        rec.rhead = NodeId::or_nil(res.first().copied());
        rec.rtail = NodeId::or_nil(res.last().copied());
        Ok(())
    }

    // --------------------------------------------------------------- check

    /// Collation `c`'s stack and reservations as stored: every job says it
    /// is in this stack, keys strictly increase, the lengths match the
    /// record, and (large form) every tree node points back at its record.
    pub fn check_members(
        &self,
        c: CollId,
        name: &str,
        jobs: &Slab<Job, JobId>,
        index: &GlobalOrder,
    ) -> Result<(), String> {
        let rec = &self.recs[c];
        let len = rec.len as usize;
        if rec.large() {
            let large = self
                .large
                .get(&c)
                .ok_or(format!("large collation {name} has no trees"))?;
            large.stack.check_structure()?;
            large.res.check_structure()?;
            if large.stack.len() != len || large.res.len() != len {
                return Err(format!("collation {name}'s trees hold the wrong counts"));
            }
            if rec.len < DEMOTE_BELOW {
                return Err(format!("collation {name} is large but small"));
            }
            for node in large.stack.iter() {
                let j = large.stack.val(node);
                let job = jobs
                    .get(j)
                    .ok_or("a collation stack names a missing job (invariant 1)")?;
                if job.coll != CollRef::in_stack_of(c)
                    || job.link != JobLink::stack_node(node)
                    || job.skey != *large.stack.key(node)
                {
                    return Err(format!(
                        "a job in collation {name}'s stack does not say it is there"
                    ));
                }
            }
            for rn in large.res.iter() {
                let n = large.res.val(rn);
                if !index.is_live(n)
                    || index.val(n) != Owner::collation(c)
                    || index.aux(n) != ResLink::tree_node(rn)
                    || index.key(n) != large.res.key(rn)
                {
                    return Err(format!("collation {name} lists a reservation not its own"));
                }
            }
            return Ok(());
        }
        if self.large.contains_key(&c) || rec.len > PROMOTE_ABOVE {
            return Err(format!("collation {name} is small but large"));
        }
        let (mut j, mut last, mut k) = (rec.head, JobId::NIL, 0usize);
        while j != JobId::NIL && k <= len {
            let job = jobs
                .get(j)
                .ok_or("a collation stack names a missing job (invariant 1)")?;
            if job.coll != CollRef::in_stack_of(c) {
                return Err(format!(
                    "a job in collation {name}'s stack does not say it is there"
                ));
            }
            if last != JobId::NIL && jobs[last].skey >= job.skey {
                return Err(format!("collation {name}'s stack is out of order"));
            }
            last = j;
            j = job.link.as_next_job();
            k += 1;
        }
        if k != len || j != JobId::NIL || rec.tail != last {
            return Err(format!("collation {name}'s stack is malformed"));
        }
        let (mut n, mut last, mut k) = (rec.rhead, NodeId::NIL, 0usize);
        while n != NodeId::NIL && k <= len {
            if !index.is_live(n) || index.val(n) != Owner::collation(c) {
                return Err(format!("collation {name} lists a reservation not its own"));
            }
            if last != NodeId::NIL && index.key(last) >= index.key(n) {
                return Err(format!("collation {name}'s reservations are out of order"));
            }
            last = n;
            n = index.aux(n).as_next();
            k += 1;
        }
        if k != len || n != NodeId::NIL || rec.rtail != last {
            return Err(format!("collation {name}'s reservations are malformed"));
        }
        Ok(())
    }
}
