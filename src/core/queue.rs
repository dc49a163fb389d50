//! The grading queue of seed 000 as one in-memory value.
//!
//! Nothing here knows about Redis: every operation takes the time (`now`, ms)
//! as an argument, so the queue is deterministic and can be tested and
//! replayed exactly. See docs/design.md for the model and its invariants.
//!
//! Layout (docs/design.md, "Memory"): jobs, reservations and collations are
//! records in slabs, linked by `u32` ids.
//! - A job (64 bytes + payload) is found by its orca key through `by_key`.
//! - Every reservation is a node of the global order (`index`): its key is
//!   (score, tie); `val` names its owner: a job (single reservation) or,
//!   tagged, a collation; `aux` is the immediate flag of a single
//!   reservation, or the next reservation of the same collation.
//! - A collation keeps its stack of jobs in pop order (a list through the
//!   jobs' `link`) and its reservations in key order (a list through the
//!   nodes' `aux`); the k-th job of the stack is paired with the k-th
//!   reservation.
//! - Nonces equal the tie for every reservation the queue creates itself,
//!   except those put at the very front; the others are kept aside.

use std::borrow::Cow;
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::num::NonZeroU32;

use super::config::{JobConfig, JobKey};
use super::error::QueueError;
use super::index::OrderIndex;
use super::limits::{MAX_TIME, SEQ_LIMIT};
use super::names::{render, PackedName};
use super::slab::{IdTable, Slab, NIL};

/// A reservation's place in the global order: by score (release time, ms),
/// then by tie. Ties of ordinary reservations are increasing sequence numbers
/// (arrival order); reservations put at the very front get decreasing
/// negative ties, so they sort before every reservation of the same score.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResKey {
    pub score: i64,
    pub tie: i64,
}

/// A `ResKey` as index nodes store it: four `u32` words, so a node needs
/// 4-byte alignment only and takes 36 bytes instead of 40.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NodeKey([u32; 4]);

impl From<ResKey> for NodeKey {
    fn from(k: ResKey) -> Self {
        let (s, t) = (k.score as u64, k.tie as u64);
        NodeKey([(s >> 32) as u32, s as u32, (t >> 32) as u32, t as u32])
    }
}

impl From<NodeKey> for ResKey {
    fn from(k: NodeKey) -> Self {
        let w = k.0;
        ResKey {
            score: ((w[0] as u64) << 32 | w[1] as u64) as i64,
            tie: ((w[2] as u64) << 32 | w[3] as u64) as i64,
        }
    }
}

impl Ord for NodeKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        ResKey::from(*self).cmp(&ResKey::from(*other))
    }
}

impl PartialOrd for NodeKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// In `Job::coll`: the job is in its collation's stack.
pub(crate) const COLLATED: u32 = 1 << 31;
/// In a node's `val`: the reservation belongs to a collation.
pub(crate) const OWNED_BY_COLLATION: u32 = 1 << 31;
/// In a single reservation's `aux`: the job is immediate.
pub(crate) const IMMEDIATE: u32 = 1;

/// A queued job.
#[derive(Clone, Debug)]
pub(crate) struct Job {
    pub key: JobKey,
    pub payload: Box<[u8]>,
    pub created_at: i64,
    /// The collation's id (`NIL` for none), with `COLLATED` set while the
    /// job is in that collation's stack; otherwise the collation its config
    /// named (informational).
    pub coll: u32,
    /// In a stack: the next job of the stack (`NIL` at its end). Otherwise
    /// the job's own reservation node.
    pub link: u32,
}

impl Job {
    pub fn collated(&self) -> bool {
        self.coll != NIL && self.coll & COLLATED != 0
    }

    /// The collation id, if the job names one.
    pub fn coll_id(&self) -> Option<u32> {
        (self.coll != NIL).then_some(self.coll & !COLLATED)
    }
}

/// One collation (`user.<id>` / `team.<id>`).
#[derive(Clone, Debug)]
pub(crate) struct Collation {
    /// The name, or `PackedName::LONG` (then it is in `Queue::long_names`).
    pub name: PackedName,
    /// Stack of jobs, front (next to pop) to back.
    pub head: u32,
    pub tail: u32,
    /// Reservations in key order.
    pub rhead: u32,
    pub rtail: u32,
    /// Jobs in the stack (= reservations).
    pub len: u32,
    /// Jobs naming the collation: those in the stack and single jobs whose
    /// config names it. The record goes when the last one goes.
    pub refs: NonZeroU32,
}

/// Order in which a collation's own jobs are handed out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Most recent submission first (seed 000's default).
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

/// What a job looks like to a client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobInfo<'a> {
    pub key: JobKey,
    pub collation: Option<Cow<'a, str>>,
    pub immediate: bool,
    pub nonce: u64,
    pub created_at: i64,
    pub release_at: i64,
    pub attempts: u32,
    pub payload: Cow<'a, [u8]>,
}

/// How `ORCA.MOVE` moves a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Move {
    /// To the very front of the whole queue (the job becomes immediate).
    Release,
    /// To the very back: last score + buffer, and the back of its collation.
    Delay { buffer: i64 },
}

/// A job as read from a serialized unit (codec) or another queue (import).
pub(crate) struct LoadedJob {
    pub key: JobKey,
    pub created_at: i64,
    pub attempts: u32,
    pub payload: Box<[u8]>,
}

#[derive(Clone, Debug)]
pub struct Queue {
    pub(crate) order: Order,
    pub(crate) jobs: Slab<Job>,
    /// Job ids by orca key.
    pub(crate) by_key: IdTable,
    /// The global order of reservations.
    pub(crate) index: OrderIndex<NodeKey>,
    pub(crate) colls: Slab<Collation>,
    /// Collation ids by name (names are chosen by clients: keyed hash).
    pub(crate) by_name: IdTable,
    name_hasher: RandomState,
    /// Names too long to pack (collation id -> name).
    pub(crate) long_names: HashMap<u32, Box<str>>,
    /// Collations with a non-empty stack.
    pub(crate) active: usize,
    /// Attempts of queued jobs that have had any (job id -> attempts).
    pub(crate) attempts: HashMap<u32, u32>,
    /// Nonces that differ from their reservation's tie (node id -> nonce).
    pub(crate) nonces: HashMap<u32, u64>,
    /// Next sequence number (ties of ordinary reservations, and nonces). > 0.
    pub(crate) next_seq: i64,
    /// Tie of the last reservation put at the very front. <= 0.
    pub(crate) front_tie: i64,
    /// Sum of payload lengths of queued jobs (for memory accounting).
    pub(crate) payload_bytes: usize,
    /// Jobs handed out and not yet acked/nacked/expired (see worker.rs).
    pub(crate) work: super::work::Work,
}

fn key_hash(key: &JobKey) -> u64 {
    // The key is a SHA-256 digest: uniform, and clients cannot choose its
    // bits, so its first 8 bytes are the hash.
    let mut b = [0u8; 8];
    b.copy_from_slice(&key[..8]);
    u64::from_le_bytes(b)
}

fn corrupt(msg: &str) -> QueueError {
    QueueError::Corrupt(msg.to_string())
}

impl Queue {
    pub fn new(order: Order) -> Self {
        Queue {
            order,
            jobs: Slab::default(),
            by_key: IdTable::default(),
            index: OrderIndex::new(),
            colls: Slab::default(),
            by_name: IdTable::default(),
            name_hasher: RandomState::new(),
            long_names: HashMap::new(),
            active: 0,
            attempts: HashMap::new(),
            nonces: HashMap::new(),
            next_seq: 1,
            front_tie: 0,
            payload_bytes: 0,
            work: Default::default(),
        }
    }

    pub fn order(&self) -> Order {
        self.order
    }

    /// Change the collation order. Jobs already queued keep their places;
    /// the order decides where new jobs enter their collation's stack.
    pub fn set_order(&mut self, order: Order) {
        self.order = order;
    }

    /// Is a job queued under `key`?
    pub fn contains(&self, key: &JobKey) -> bool {
        self.job_id(key).is_some()
    }

    /// Number of queued jobs.
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// Collations with queued jobs in their stack.
    pub fn collation_count(&self) -> usize {
        self.active
    }

    /// Jobs in collation stacks.
    pub(crate) fn stacked_jobs(&self) -> usize {
        self.colls.iter().map(|(_, c)| c.len as usize).sum()
    }

    /// Is a queued job placed as immediate?
    pub fn is_immediate(&self, key: &JobKey) -> bool {
        self.job_id(key).is_some_and(|j| self.job_immediate(j))
    }

    pub(crate) fn job_id(&self, key: &JobKey) -> Option<u32> {
        let jobs = &self.jobs;
        self.by_key.find(key_hash(key), |id| {
            jobs.get(id).is_some_and(|j| j.key == *key)
        })
    }

    /// Hash of a name: of its packed form, or of the text of a long name.
    fn name_hash(hasher: &RandomState, packed: Option<&PackedName>, long: &str) -> u64 {
        match packed {
            Some(p) => hasher.hash_one(p),
            None => hasher.hash_one(long),
        }
    }

    /// Hash of stored collation `c`'s name.
    fn stored_name_hash(&self, c: u32) -> u64 {
        let name = &self.colls[c].name;
        if name.is_long() {
            let long = self.long_names.get(&c).map_or("", |s| &**s);
            Self::name_hash(&self.name_hasher, None, long)
        } else {
            Self::name_hash(&self.name_hasher, Some(name), "")
        }
    }

    pub(crate) fn coll_id(&self, name: &str) -> Option<u32> {
        let packed = PackedName::pack(name);
        let h = Self::name_hash(&self.name_hasher, packed.as_ref(), name);
        let (colls, long) = (&self.colls, &self.long_names);
        self.by_name.find(h, |id| match &packed {
            Some(p) => colls.get(id).is_some_and(|c| c.name == *p),
            None => {
                colls.get(id).is_some_and(|c| c.name.is_long())
                    && long.get(&id).is_some_and(|s| &**s == name)
            }
        })
    }

    /// Collation `c`'s name.
    pub(crate) fn name_of(&self, c: u32) -> Cow<'_, str> {
        render(&self.colls[c].name, self.long_names.get(&c).map(|s| &**s))
    }

    /// Is `name` a collation with jobs in its stack?
    pub(crate) fn has_collation(&self, name: &str) -> bool {
        self.coll_id(name).is_some_and(|c| self.colls[c].len > 0)
    }

    fn job_immediate(&self, j: u32) -> bool {
        let job = &self.jobs[j];
        !job.collated() && self.index.aux(job.link) & IMMEDIATE != 0
    }

    pub(crate) fn job_attempts(&self, j: u32) -> u32 {
        self.attempts.get(&j).copied().unwrap_or(0)
    }

    pub(crate) fn coll_name(&self, job: &Job) -> Option<Cow<'_, str>> {
        job.coll_id().map(|c| self.name_of(c))
    }

    /// The reservation key of node `n`.
    pub(crate) fn rk(&self, n: u32) -> ResKey {
        (*self.index.key(n)).into()
    }

    pub(crate) fn nonce_of(&self, n: u32) -> u64 {
        match self.nonces.get(&n) {
            Some(v) => *v,
            None => self.rk(n).tie as u64,
        }
    }

    /// Refuse an operation (before it changes anything) when the sequence
    /// counters are near their limit, so every queue stays reloadable.
    pub(crate) fn seq_room(&self) -> Result<(), QueueError> {
        if self.next_seq > SEQ_LIMIT - 16 || self.front_tie < -SEQ_LIMIT + 16 {
            return Err(QueueError::Corrupt("sequence numbers exhausted".into()));
        }
        Ok(())
    }

    /// Refuse (before changing anything) when another job, reservation and
    /// collation could not be stored.
    pub(crate) fn room(&self) -> Result<(), QueueError> {
        if self.jobs.has_room() && self.index.has_room() && self.colls.has_room() {
            Ok(())
        } else {
            Err(QueueError::Full)
        }
    }

    pub(crate) fn alloc_seq(&mut self) -> i64 {
        let s = self.next_seq;
        self.next_seq += 1;
        s
    }

    /// The id of collation `name` with one more reference, created (with an
    /// empty stack) if needed.
    fn acquire_coll(&mut self, name: &str) -> Result<u32, QueueError> {
        if let Some(c) = self.coll_id(name) {
            let coll = &mut self.colls[c];
            coll.refs = coll.refs.checked_add(1).ok_or(QueueError::Full)?;
            return Ok(c);
        }
        let packed = PackedName::pack(name);
        let c = self
            .colls
            .insert(Collation {
                name: packed.unwrap_or(PackedName::LONG),
                head: NIL,
                tail: NIL,
                rhead: NIL,
                rtail: NIL,
                len: 0,
                refs: NonZeroU32::MIN,
            })
            .ok_or(QueueError::Full)?;
        if packed.is_none() {
            self.long_names.insert(c, name.into());
        }
        let h = Self::name_hash(&self.name_hasher, packed.as_ref(), name);
        let mut table = std::mem::take(&mut self.by_name);
        table.insert(h, c, |id| self.stored_name_hash(id));
        self.by_name = table;
        Ok(c)
    }

    /// Drop one reference to collation `c`; the record goes with the last.
    fn release_coll(&mut self, c: u32) {
        let last = match self.colls.get_mut(c) {
            Some(coll) => match NonZeroU32::new(coll.refs.get() - 1) {
                Some(r) => {
                    coll.refs = r;
                    false
                }
                None => true,
            },
            None => return,
        };
        if last {
            let h = self.stored_name_hash(c);
            let mut table = std::mem::take(&mut self.by_name);
            table.remove(h, c, |id| self.stored_name_hash(id));
            self.by_name = table;
            self.colls.remove(c);
            self.long_names.remove(&c);
        }
    }

    /// Store a new job record (not placed yet) naming collation `coll`.
    fn new_job(
        &mut self,
        key: JobKey,
        payload: Box<[u8]>,
        created_at: i64,
        attempts: u32,
        collation: Option<&str>,
    ) -> Result<u32, QueueError> {
        let coll = match collation {
            Some(name) => self.acquire_coll(name)?,
            None => NIL,
        };
        let len = payload.len();
        let j = self
            .jobs
            .insert(Job {
                key,
                payload,
                created_at,
                coll,
                link: NIL,
            })
            .ok_or(QueueError::Full)?;
        let jobs = &self.jobs;
        self.by_key
            .insert(key_hash(&key), j, |id| key_hash(&jobs[id].key));
        if attempts > 0 {
            self.attempts.insert(j, attempts);
        }
        self.payload_bytes += len;
        Ok(j)
    }

    /// Remove a job record that holds no reservation any more. Returns it
    /// with its attempts and collation name.
    fn drop_job(&mut self, j: u32) -> Result<(Job, u32, Option<String>), QueueError> {
        let key = self.jobs.get(j).ok_or_else(|| corrupt("job missing"))?.key;
        let jobs = &self.jobs;
        self.by_key
            .remove(key_hash(&key), j, |id| key_hash(&jobs[id].key));
        let job = self.jobs.remove(j).ok_or_else(|| corrupt("job missing"))?;
        let attempts = self.attempts.remove(&j).unwrap_or(0);
        self.payload_bytes -= job.payload.len();
        let name = job.coll_id().map(|c| {
            let name = self.name_of(c).into_owned();
            self.release_coll(c);
            name
        });
        Ok((job, attempts, name))
    }

    fn replace_payload(&mut self, j: u32, payload: &[u8]) {
        let job = &mut self.jobs[j];
        self.payload_bytes = self.payload_bytes - job.payload.len() + payload.len();
        job.payload = payload.into();
    }

    /// Add a reservation node.
    fn add_res(&mut self, rk: ResKey, val: u32, aux: u32, nonce: u64) -> Result<u32, QueueError> {
        let n = self
            .index
            .insert(rk.into(), val, aux)
            .ok_or_else(|| corrupt("duplicate reservation"))?;
        if nonce != rk.tie as u64 {
            self.nonces.insert(n, nonce);
        }
        Ok(n)
    }

    fn remove_res(&mut self, n: u32) {
        self.index.remove(n);
        self.nonces.remove(&n);
    }

    /// Give job `j` a single reservation of its own.
    fn place_single(
        &mut self,
        j: u32,
        rk: ResKey,
        nonce: u64,
        immediate: bool,
    ) -> Result<(), QueueError> {
        let n = self.add_res(rk, j, immediate as u32 * IMMEDIATE, nonce)?;
        let job = &mut self.jobs[j];
        job.link = n;
        if job.coll != NIL {
            job.coll &= !COLLATED;
        }
        Ok(())
    }

    /// Give job `j` a single reservation at `score`, in arrival order among
    /// equal scores.
    fn add_single(&mut self, j: u32, score: i64, immediate: bool) -> Result<(), QueueError> {
        let seq = self.alloc_seq();
        self.place_single(j, ResKey { score, tie: seq }, seq as u64, immediate)
    }

    /// Give job `j` an immediate reservation before every other one.
    fn add_front(&mut self, j: u32, now: i64) -> Result<(), QueueError> {
        let score = match self.index.first() {
            Some(first) => self.rk(first).score.min(now),
            None => now,
        };
        self.front_tie -= 1;
        let nonce = self.alloc_seq() as u64;
        let tie = self.front_tie;
        self.place_single(j, ResKey { score, tie }, nonce, true)
    }

    /// Add a reservation to collation `c`, in key order.
    fn coll_add_res(&mut self, c: u32, rk: ResKey, nonce: u64) -> Result<(), QueueError> {
        let n = self.add_res(rk, c | OWNED_BY_COLLATION, NIL, nonce)?;
        let (rhead, rtail) = {
            let coll = &self.colls[c];
            (coll.rhead, coll.rtail)
        };
        if rtail == NIL {
            let coll = &mut self.colls[c];
            coll.rhead = n;
            coll.rtail = n;
        } else if self.rk(rtail) < rk {
            self.index.set_aux(rtail, n);
            self.colls[c].rtail = n;
        } else if rk < self.rk(rhead) {
            self.index.set_aux(n, rhead);
            self.colls[c].rhead = n;
        } else {
            // Somewhere inside: after the last reservation below `rk`.
            let mut p = rhead;
            loop {
                let next = self.index.aux(p);
                if next == NIL || rk < self.rk(next) {
                    self.index.set_aux(n, next);
                    self.index.set_aux(p, n);
                    break;
                }
                p = next;
            }
        }
        Ok(())
    }

    /// Put job `j` into collation `c`'s stack, at the front or the back.
    fn push_job(&mut self, c: u32, j: u32, front: bool) {
        let (head, tail) = {
            let coll = &self.colls[c];
            (coll.head, coll.tail)
        };
        {
            let job = &mut self.jobs[j];
            job.coll = c | COLLATED;
            job.link = if front { head } else { NIL };
        }
        if head == NIL {
            let coll = &mut self.colls[c];
            coll.head = j;
            coll.tail = j;
        } else if front {
            self.colls[c].head = j;
        } else {
            self.jobs[tail].link = j;
            self.colls[c].tail = j;
        }
        let coll = &mut self.colls[c];
        coll.len += 1;
        if coll.len == 1 {
            self.active += 1;
        }
    }

    /// Position of a collated job in its stack, with its predecessor.
    fn stack_pos(&self, c: u32, j: u32) -> Result<(usize, u32), QueueError> {
        let coll = &self.colls[c];
        let (mut prev, mut cur, mut k) = (NIL, coll.head, 0usize);
        while cur != j {
            if cur == NIL || k > coll.len as usize {
                return Err(corrupt("job missing from its collation"));
            }
            prev = cur;
            cur = self.jobs[cur].link;
            k += 1;
        }
        Ok((k, prev))
    }

    /// The k-th reservation of collation `c`, with its predecessor.
    fn coll_res_at(&self, c: u32, k: usize) -> Result<(u32, u32), QueueError> {
        let (mut prev, mut cur) = (NIL, self.colls[c].rhead);
        for _ in 0..k {
            if cur == NIL {
                break;
            }
            prev = cur;
            cur = self.index.aux(cur);
        }
        if cur == NIL {
            return Err(corrupt("collation has too few reservations"));
        }
        Ok((cur, prev))
    }

    /// Take a collated job out of its collation: out of the stack, and the
    /// reservation paired with it out of the collation and the global order.
    /// Every other job of the collation keeps its pairing. The job keeps
    /// naming the collation.
    fn detach_collated(&mut self, j: u32) -> Result<(), QueueError> {
        let c = self.jobs[j].coll & !COLLATED;
        let (k, prev) = self.stack_pos(c, j)?;
        let (n, rprev) = self.coll_res_at(c, k)?;
        let next = self.jobs[j].link;
        let rnext = self.index.aux(n);
        if prev == NIL {
            self.colls[c].head = next;
        } else {
            self.jobs[prev].link = next;
        }
        if rprev == NIL {
            self.colls[c].rhead = rnext;
        } else {
            self.index.set_aux(rprev, rnext);
        }
        let coll = &mut self.colls[c];
        if coll.tail == j {
            coll.tail = prev;
        }
        if coll.rtail == n {
            coll.rtail = rprev;
        }
        coll.len -= 1;
        if coll.len == 0 {
            self.active -= 1;
        }
        let job = &mut self.jobs[j];
        job.coll = c;
        job.link = NIL;
        self.remove_res(n);
        Ok(())
    }

    /// Remove whatever reservation the job holds (single or paired).
    fn detach(&mut self, j: u32) -> Result<(), QueueError> {
        let job = &self.jobs[j];
        if job.collated() {
            self.detach_collated(j)
        } else {
            let n = job.link;
            self.jobs[j].link = NIL;
            self.remove_res(n);
            Ok(())
        }
    }

    /// The reservation node job `j` holds or is paired with.
    pub(crate) fn reservation_node(&self, j: u32) -> Result<u32, QueueError> {
        let job = &self.jobs[j];
        if job.collated() {
            let c = job.coll & !COLLATED;
            let (k, _) = self.stack_pos(c, j)?;
            Ok(self.coll_res_at(c, k)?.0)
        } else {
            Ok(job.link)
        }
    }

    /// `ORCA.ENQUEUE`: create-or-update. A new job gets a reservation at
    /// `now + priority` and enters its collation's stack (front for LIFO, back
    /// for FIFO). An existing job only has its payload replaced.
    /// Returns the job and whether it was created.
    pub fn enqueue(
        &mut self,
        cfg: &JobConfig,
        payload: &[u8],
        now: i64,
    ) -> Result<(JobInfo<'_>, bool), QueueError> {
        let key = cfg.job_key;
        if !(0..=MAX_TIME).contains(&now) {
            return Err(QueueError::TimeOverflow);
        }
        if let Some(j) = self.job_id(&key) {
            self.replace_payload(j, payload);
            return Ok((self.info_of(j)?, false));
        }
        self.seq_room()?;
        self.room()?;
        let release = now
            .checked_add(cfg.priority)
            .filter(|t| (0..=MAX_TIME).contains(t))
            .ok_or(QueueError::TimeOverflow)?;
        let j = match &cfg.collation {
            None => {
                let j = self.new_job(key, payload.into(), now, 0, None)?;
                self.add_single(j, release, false)?;
                j
            }
            Some(name) => {
                let j = self.new_job(key, payload.into(), now, 0, Some(name))?;
                let c = self.jobs[j].coll;
                let seq = self.alloc_seq();
                self.coll_add_res(
                    c,
                    ResKey {
                        score: release,
                        tie: seq,
                    },
                    seq as u64,
                )?;
                self.push_job(c, j, self.order == Order::Lifo);
                j
            }
        };
        self.supersede(&key);
        Ok((self.info_of(j)?, true))
    }

    /// `ORCA.IMMEDIATE` (arrival = created = now) and `ORCA.REENQUEUE`
    /// (arrival = created = the job's original arrival time): create-or-update
    /// as an immediate job with a reservation at `arrival`. A waiting job that
    /// is not immediate is upgraded: the reservation paired with it is removed
    /// and an immediate one at `arrival` added.
    pub fn put_immediate(
        &mut self,
        cfg: &JobConfig,
        payload: &[u8],
        arrival: i64,
    ) -> Result<(JobInfo<'_>, bool), QueueError> {
        if !(0..=MAX_TIME).contains(&arrival) {
            return Err(QueueError::TimeOverflow);
        }
        self.seq_room()?;
        self.room()?;
        let key = cfg.job_key;
        if let Some(j) = self.job_id(&key) {
            if !self.job_immediate(j) {
                self.detach(j)?;
                self.add_single(j, arrival, true)?;
            }
            self.replace_payload(j, payload);
            return Ok((self.info_of(j)?, false));
        }
        self.supersede(&key);
        let j = self.new_job(key, payload.into(), arrival, 0, cfg.collation.as_deref())?;
        self.add_single(j, arrival, true)?;
        Ok((self.info_of(j)?, true))
    }

    /// Queue a job that comes back from a lease or a retry (worker.rs): a
    /// single reservation at `score`.
    pub(crate) fn insert_single(
        &mut self,
        job: LoadedJob,
        collation: Option<&str>,
        score: i64,
        immediate: bool,
    ) -> Result<(), QueueError> {
        self.room()?;
        let j = self.new_job(
            job.key,
            job.payload,
            job.created_at,
            job.attempts,
            collation,
        )?;
        self.add_single(j, score, immediate)
    }

    /// `ORCA.MOVE`.
    pub fn move_job(
        &mut self,
        key: &JobKey,
        how: Move,
        now: i64,
    ) -> Result<JobInfo<'_>, QueueError> {
        let j = self.job_id(key).ok_or(QueueError::NoSuchJob)?;
        if self.job_immediate(j) {
            return Err(QueueError::ImmediateNotMovable);
        }
        if let Move::Delay { buffer } = how {
            if !(0..=MAX_TIME).contains(&buffer) {
                return Err(QueueError::TimeOverflow);
            }
        }
        self.seq_room()?;
        match how {
            Move::Release => {
                if !(0..=MAX_TIME).contains(&now) {
                    return Err(QueueError::TimeOverflow);
                }
                self.detach(j)?;
                self.add_front(j, now)?;
            }
            Move::Delay { buffer } => {
                let last = match self.index.last() {
                    Some(n) => self.rk(n).score,
                    None => now,
                };
                let score = last
                    .checked_add(buffer)
                    .filter(|t| (0..=MAX_TIME).contains(t))
                    .ok_or(QueueError::TimeOverflow)?;
                if self.jobs[j].collated() {
                    let c = self.jobs[j].coll & !COLLATED;
                    self.detach_collated(j)?;
                    let seq = self.alloc_seq();
                    self.coll_add_res(c, ResKey { score, tie: seq }, seq as u64)?;
                    self.push_job(c, j, false);
                } else {
                    self.detach(j)?;
                    self.add_single(j, score, false)?;
                }
            }
        }
        self.info_of(j)
    }

    /// `ORCA.DELETE`: remove the job and the reservation paired with it.
    pub fn delete(&mut self, key: &JobKey) -> Result<bool, QueueError> {
        let Some(j) = self.job_id(key) else {
            return Ok(false);
        };
        self.detach(j)?;
        self.drop_job(j)?;
        Ok(true)
    }

    /// `ORCA.POP`: the job of the lowest reservation, removed from the queue.
    /// Priority orders the queue; it does not hold jobs back, so the lowest
    /// reservation is taken even when its release time is in the future.
    pub fn pop(&mut self) -> Result<Option<JobInfo<'static>>, QueueError> {
        let Some(n) = self.index.first() else {
            return Ok(None);
        };
        let owner = self.index.val(n);
        let nonce = self.nonce_of(n);
        let rk = self.rk(n);
        let (j, immediate) = if owner & OWNED_BY_COLLATION != 0 {
            // The collation's earliest reservation, paired with its stack's
            // front: detaching the front takes both (O(1)).
            let c = owner & !OWNED_BY_COLLATION;
            let coll = self
                .colls
                .get(c)
                .ok_or_else(|| corrupt("reservation of unknown collation"))?;
            let j = coll.head;
            if coll.rhead != n || j == NIL {
                return Err(corrupt("collation out of step with the order"));
            }
            self.detach_collated(j)?;
            (j, false)
        } else {
            let immediate = self.index.aux(n) & IMMEDIATE != 0;
            self.remove_res(n);
            (owner, immediate)
        };
        let (job, attempts, collation) = self.drop_job(j)?;
        Ok(Some(JobInfo {
            key: job.key,
            collation: collation.map(Cow::Owned),
            immediate,
            nonce,
            created_at: job.created_at,
            release_at: rk.score,
            attempts: attempts.saturating_add(1),
            payload: Cow::Owned(job.payload.into_vec()),
        }))
    }

    /// The reservation a job holds or is paired with, and its nonce.
    pub fn reservation_of(&self, key: &JobKey) -> Result<(ResKey, u64), QueueError> {
        let j = self.job_id(key).ok_or(QueueError::NoSuchJob)?;
        let n = self.reservation_node(j)?;
        Ok((self.rk(n), self.nonce_of(n)))
    }

    /// Job `j` as clients see it, given its reservation node.
    pub(crate) fn info_at(&self, j: u32, n: u32) -> JobInfo<'_> {
        let job = &self.jobs[j];
        JobInfo {
            key: job.key,
            collation: self.coll_name(job),
            immediate: !job.collated() && self.index.aux(n) & IMMEDIATE != 0,
            nonce: self.nonce_of(n),
            created_at: job.created_at,
            release_at: self.rk(n).score,
            attempts: self.job_attempts(j),
            payload: Cow::Borrowed(&job.payload),
        }
    }

    fn info_of(&self, j: u32) -> Result<JobInfo<'_>, QueueError> {
        Ok(self.info_at(j, self.reservation_node(j)?))
    }

    /// A queued job as clients see it.
    pub fn info(&self, key: &JobKey) -> Result<JobInfo<'_>, QueueError> {
        self.info_of(self.job_id(key).ok_or(QueueError::NoSuchJob)?)
    }

    /// 1-based position of a queued job in pop order (that of the
    /// reservation it holds or is paired with).
    pub fn position(&self, key: &JobKey) -> Result<usize, QueueError> {
        let j = self.job_id(key).ok_or(QueueError::NoSuchJob)?;
        let n = self.reservation_node(j)?;
        self.index
            .rank(n)
            .map(|r| r + 1)
            .ok_or_else(|| corrupt("reservation missing from the order"))
    }

    /// Walks the global order and names the job each reservation serves:
    /// `(node, job)` pairs in pop order from position `start`. Collations
    /// met first mid-way are located once (O(their length)), then followed
    /// along their stacks.
    pub(crate) fn walk_from(&self, start: usize) -> impl Iterator<Item = (u32, u32)> + '_ {
        let mut cursor: HashMap<u32, u32> = HashMap::new();
        self.index.iter_from(start).filter_map(move |n| {
            let owner = self.index.val(n);
            if owner & OWNED_BY_COLLATION == 0 {
                return Some((n, owner));
            }
            let c = owner & !OWNED_BY_COLLATION;
            let coll = self.colls.get(c)?;
            let j = match cursor.get(&c) {
                Some(&j) => j,
                None => {
                    // Rank of `n` among the collation's reservations.
                    let mut k = 0usize;
                    let mut r = coll.rhead;
                    while r != n && r != NIL {
                        r = self.index.aux(r);
                        k += 1;
                    }
                    let mut j = coll.head;
                    for _ in 0..k {
                        if j == NIL {
                            break;
                        }
                        j = self.jobs[j].link;
                    }
                    j
                }
            };
            if j == NIL {
                return None;
            }
            cursor.insert(c, self.jobs[j].link);
            Some((n, j))
        })
    }

    /// Job keys in pop order (linear; for tests, checks and listings).
    pub fn pop_order(&self) -> Vec<JobKey> {
        self.walk_from(0).map(|(_, j)| self.jobs[j].key).collect()
    }

    /// Rough heap footprint in bytes, for `MEMORY USAGE`.
    pub fn mem_usage(&self) -> usize {
        use std::mem::size_of;
        let names: usize = self.long_names.values().map(|n| n.len() + 16).sum();
        let side = (self.attempts.capacity() + self.nonces.capacity()) * 24;
        let work = (self.work.leases.len() + self.work.delayed.len() + self.work.dead.len())
            * (size_of::<super::work::Lease>() + 48)
            + (self.work.results.len() + self.work.cancelled.len()) * 96;
        size_of::<Queue>()
            + self.jobs.heap_bytes()
            + self.by_key.heap_bytes()
            + self.index.heap_bytes()
            + self.colls.heap_bytes()
            + self.by_name.heap_bytes()
            + names
            + side
            + self.payload_bytes
            + work
            + self.work.bytes
    }

    /// Add a loaded single job with its reservation (codec, import). Refused
    /// with nothing changed if the key or the reservation is taken.
    pub(crate) fn load_single(
        &mut self,
        job: LoadedJob,
        collation: Option<&str>,
        rk: ResKey,
        nonce: u64,
        immediate: bool,
    ) -> Result<(), QueueError> {
        if self.contains(&job.key) {
            return Err(corrupt("duplicate job key"));
        }
        if self.index.contains(&rk.into()) {
            return Err(corrupt("duplicate reservation"));
        }
        self.room()?;
        let j = self.new_job(
            job.key,
            job.payload,
            job.created_at,
            job.attempts,
            collation,
        )?;
        self.place_single(j, rk, nonce, immediate)
    }

    /// Add a loaded collation: its jobs in stack order and its reservations
    /// (any order). Refused with nothing changed if the collation has jobs
    /// here already, or a key or reservation is taken or repeated.
    pub(crate) fn load_collation(
        &mut self,
        name: &str,
        jobs: Vec<LoadedJob>,
        mut res: Vec<(ResKey, u64)>,
    ) -> Result<(), QueueError> {
        if jobs.is_empty() || jobs.len() != res.len() {
            return Err(corrupt("collation jobs and reservations do not pair"));
        }
        if self.has_collation(name) {
            return Err(corrupt("duplicate collation"));
        }
        let mut keys = std::collections::HashSet::with_capacity(jobs.len());
        if jobs
            .iter()
            .any(|j| !keys.insert(j.key) || self.contains(&j.key))
        {
            return Err(corrupt("duplicate job key"));
        }
        res.sort_unstable();
        if res.windows(2).any(|w| w[0].0 == w[1].0)
            || res.iter().any(|r| self.index.contains(&r.0.into()))
        {
            return Err(corrupt("duplicate reservation"));
        }
        if self.jobs.len() + jobs.len() >= super::slab::MAX_ID as usize
            || self.index.len() + res.len() >= super::slab::MAX_ID as usize
        {
            return Err(QueueError::Full);
        }
        self.room()?;
        let mut c = NIL;
        for job in jobs {
            let j = self.new_job(
                job.key,
                job.payload,
                job.created_at,
                job.attempts,
                Some(name),
            )?;
            c = self.jobs[j].coll;
            self.push_job(c, j, false);
        }
        for (rk, nonce) in res {
            self.coll_add_res(c, rk, nonce)?;
        }
        Ok(())
    }

    /// Single jobs in reservation order: (job id, its node).
    pub(crate) fn singles(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.index.iter().filter_map(|n| {
            let owner = self.index.val(n);
            (owner & OWNED_BY_COLLATION == 0).then_some((owner, n))
        })
    }

    /// Ids of the collations with a stack, by name.
    pub(crate) fn collations_by_name(&self) -> Vec<u32> {
        let ids: Vec<u32> = self
            .colls
            .iter()
            .filter(|(_, c)| c.len > 0)
            .map(|(id, _)| id)
            .collect();
        let mut named: Vec<(Cow<'_, str>, u32)> =
            ids.into_iter().map(|c| (self.name_of(c), c)).collect();
        named.sort_unstable();
        named.into_iter().map(|(_, c)| c).collect()
    }

    /// Job ids of collation `c`'s stack, front first.
    pub(crate) fn stack(&self, c: u32) -> impl Iterator<Item = u32> + '_ {
        let mut cur = self.colls.get(c).map_or(NIL, |c| c.head);
        std::iter::from_fn(move || {
            (cur != NIL).then(|| {
                let j = cur;
                cur = self.jobs[j].link;
                j
            })
        })
    }

    /// Reservation nodes of collation `c`, in key order.
    pub(crate) fn coll_reservations(&self, c: u32) -> impl Iterator<Item = u32> + '_ {
        let mut cur = self.colls.get(c).map_or(NIL, |c| c.rhead);
        std::iter::from_fn(move || {
            (cur != NIL).then(|| {
                let n = cur;
                cur = self.index.aux(n);
                n
            })
        })
    }

    /// Take every queued job out, as units to load elsewhere (import):
    /// single jobs with (collation, reservation, nonce, immediate), and
    /// collations with their stacks and reservations.
    #[allow(clippy::type_complexity)]
    pub(crate) fn drain_units(
        &mut self,
    ) -> Result<
        (
            Vec<(LoadedJob, Option<String>, ResKey, u64, bool)>,
            Vec<(String, Vec<LoadedJob>, Vec<(ResKey, u64)>)>,
        ),
        QueueError,
    > {
        let singles: Vec<(u32, u32)> = self.singles().collect();
        let colls = self.collations_by_name();
        let mut loaded_colls = Vec::with_capacity(colls.len());
        for c in colls {
            let stack: Vec<u32> = self.stack(c).collect();
            let res: Vec<(ResKey, u64)> = self
                .coll_reservations(c)
                .map(|n| (self.rk(n), self.nonce_of(n)))
                .collect();
            loaded_colls.push((self.name_of(c).into_owned(), stack, res));
        }
        let mut out_singles = Vec::with_capacity(singles.len());
        for (j, n) in singles {
            let (rk, nonce) = (self.rk(n), self.nonce_of(n));
            let immediate = self.index.aux(n) & IMMEDIATE != 0;
            let attempts = self.job_attempts(j);
            let name = self.coll_name(&self.jobs[j]).map(Cow::into_owned);
            let job = self.jobs.get_mut(j).ok_or_else(|| corrupt("job missing"))?;
            let payload = std::mem::take(&mut job.payload);
            out_singles.push((
                LoadedJob {
                    key: job.key,
                    created_at: job.created_at,
                    attempts,
                    payload,
                },
                name,
                rk,
                nonce,
                immediate,
            ));
        }
        let mut out_colls = Vec::with_capacity(loaded_colls.len());
        for (name, stack, res) in loaded_colls {
            let mut jobs = Vec::with_capacity(stack.len());
            for j in stack {
                let attempts = self.job_attempts(j);
                let job = self.jobs.get_mut(j).ok_or_else(|| corrupt("job missing"))?;
                jobs.push(LoadedJob {
                    key: job.key,
                    created_at: job.created_at,
                    attempts,
                    payload: std::mem::take(&mut job.payload),
                });
            }
            out_colls.push((name, jobs, res));
        }
        *self = Queue {
            work: std::mem::take(&mut self.work),
            ..Queue::new(self.order)
        };
        Ok((out_singles, out_colls))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_compact() {
        // docs/design.md, "Memory": what a queued job costs beyond its payload.
        assert_eq!(std::mem::size_of::<Option<Job>>(), 64);
        assert_eq!(std::mem::size_of::<Option<Collation>>(), 40);
        for (score, tie) in [
            (0, 1),
            (MAX_TIME, -SEQ_LIMIT),
            (5, i64::MAX),
            (-1, i64::MIN),
        ] {
            let k = ResKey { score, tie };
            assert_eq!(ResKey::from(NodeKey::from(k)), k);
        }
        let keys = [
            (0, -3),
            (0, 5),
            (1, i64::MIN),
            (1, -1),
            (1, 0),
            (1, 7),
            (MAX_TIME, 2),
        ];
        for a in keys {
            for b in keys {
                let (ka, kb) = (
                    ResKey {
                        score: a.0,
                        tie: a.1,
                    },
                    ResKey {
                        score: b.0,
                        tie: b.1,
                    },
                );
                assert_eq!(NodeKey::from(ka).cmp(&NodeKey::from(kb)), ka.cmp(&kb));
            }
        }
    }
}
