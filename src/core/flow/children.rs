//! The child's side of a flow: which jobs of this queue are children of a
//! parent (here or in another queue), and of which.
//!
//! A `Group` is made by `ORCA.FANOUT` with the children's keys in order; a
//! `Link` (by child orca key) names the group and the child's index. The
//! link follows the key through every state of the child, so nothing in the
//! job, lease or retry records knows about flows. A child ends once: its
//! link goes (`Groups::end`), and the queue posts the end to the parent.

use std::collections::{BTreeMap, HashMap};

use super::FlowId;
use crate::core::config::{JobKey, KeyMap};

/// A group's id: local to the queue, from its own counter.
pub type GroupId = u64;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    /// The parent's queue (a key name of the same database; may be this one).
    pub peer: Box<[u8]>,
    /// The parent's orca key there.
    pub parent: JobKey,
    /// The parent's flow.
    pub flow: FlowId,
    /// The children's keys, in order (index = position).
    keys: Vec<JobKey>,
    /// Children still linked (not ended).
    linked: u32,
}

impl Group {
    pub fn keys(&self) -> &[JobKey] {
        &self.keys
    }

    pub fn linked(&self) -> u32 {
        self.linked
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link {
    pub group: GroupId,
    pub index: u32,
}

/// A child that just ended: where its end must go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ended {
    pub peer: Box<[u8]>,
    pub parent: JobKey,
    pub flow: FlowId,
    pub index: u32,
}

#[derive(Clone, Debug, Default)]
pub struct Groups {
    groups: BTreeMap<GroupId, Group>,
    by_parent: HashMap<(Box<[u8]>, FlowId), GroupId>,
    links: KeyMap<Link>,
    /// Next group id (> every id in use).
    next: GroupId,
}

impl Groups {
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Groups (parents with children here).
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    /// Children still linked to a parent.
    pub fn linked_len(&self) -> usize {
        self.links.len()
    }

    pub fn next_id(&self) -> GroupId {
        self.next
    }

    /// Is `key` a child of some parent?
    pub fn is_linked(&self, key: &JobKey) -> bool {
        self.links.contains_key(key)
    }

    /// The group and index of child `key`.
    pub fn link(&self, key: &JobKey) -> Option<(&Group, u32)> {
        let l = self.links.get(key)?;
        Some((self.groups.get(&l.group)?, l.index))
    }

    pub fn get(&self, id: GroupId) -> Option<&Group> {
        self.groups.get(&id)
    }

    /// The group of flow `flow` of a parent in queue `peer`.
    pub fn find(&self, peer: &[u8], flow: FlowId) -> Option<GroupId> {
        self.by_parent.get(&(Box::from(peer), flow)).copied()
    }

    /// Link `keys` (none linked yet: the caller checked) as the children of
    /// flow `flow` of parent `parent` in queue `peer`. `None` if a key is
    /// linked already or the parent has a group here already (nothing
    /// changed then).
    pub fn add(
        &mut self,
        peer: &[u8],
        parent: JobKey,
        flow: FlowId,
        keys: Vec<JobKey>,
    ) -> Option<GroupId> {
        let id = self.next;
        self.insert(id, Groups::group(peer.into(), parent, flow, keys))?;
        Some(id)
    }

    /// Store group `id` as saved, every child linked (the codec's path;
    /// `add` for new groups). `None` if the id, the parent or a link
    /// collides (nothing changed then).
    pub fn insert(&mut self, id: GroupId, g: Group) -> Option<()> {
        let all: Vec<u32> = (0..u32::try_from(g.keys.len()).ok()?).collect();
        self.insert_partly(id, g, &all)
    }

    /// `insert` with only the children at `indexes` linked (the others
    /// ended already).
    pub fn insert_partly(&mut self, id: GroupId, mut g: Group, indexes: &[u32]) -> Option<()> {
        let pk = (g.peer.clone(), g.flow);
        if indexes.is_empty() || self.groups.contains_key(&id) || self.by_parent.contains_key(&pk) {
            return None;
        }
        let mut fresh: KeyMap<()> = KeyMap::default();
        for &i in indexes {
            let k = g.keys.get(i as usize)?;
            if self.links.contains_key(k) || fresh.insert(*k, ()).is_some() {
                return None;
            }
        }
        for &i in indexes {
            self.links.insert(
                g.keys[i as usize],
                Link {
                    group: id,
                    index: i,
                },
            );
        }
        g.linked = indexes.len() as u32;
        self.by_parent.insert(pk, id);
        self.groups.insert(id, g);
        self.next = self.next.max(id.saturating_add(1));
        Some(())
    }

    /// A group as saved: its parent, flow and children's keys.
    pub fn group(peer: Box<[u8]>, parent: JobKey, flow: FlowId, keys: Vec<JobKey>) -> Group {
        Group {
            peer,
            parent,
            flow,
            keys,
            linked: 0,
        }
    }

    /// Child `key` ended: its link goes (and its group with its last link);
    /// where the end must be posted. `None` if it is not a child.
    pub fn end(&mut self, key: &JobKey) -> Option<Ended> {
        let l = self.links.remove(key)?;
        let g = self.groups.get_mut(&l.group)?;
        g.linked -= 1;
        let ended = Ended {
            peer: g.peer.clone(),
            parent: g.parent,
            flow: g.flow,
            index: l.index,
        };
        if g.linked == 0 {
            self.drop_group(l.group);
        }
        Some(ended)
    }

    /// Remove the group of flow `flow` of a parent in `peer` with every
    /// link left; the keys that were still linked, in order (the queue
    /// cancels them, or keeps them as ordinary jobs).
    pub fn remove(&mut self, peer: &[u8], flow: FlowId) -> Vec<JobKey> {
        let Some(id) = self.find(peer, flow) else {
            return Vec::new();
        };
        self.remove_id(id)
    }

    fn remove_id(&mut self, id: GroupId) -> Vec<JobKey> {
        let Some(g) = self.groups.get(&id) else {
            return Vec::new();
        };
        let still: Vec<JobKey> = g
            .keys
            .iter()
            .enumerate()
            .filter(|(i, k)| {
                self.links
                    .get(*k)
                    .is_some_and(|l| l.group == id && l.index as usize == *i)
            })
            .map(|(_, k)| *k)
            .collect();
        for k in &still {
            self.links.remove(k);
        }
        self.drop_group(id);
        still
    }

    fn drop_group(&mut self, id: GroupId) {
        if let Some(g) = self.groups.remove(&id) {
            self.by_parent.remove(&(g.peer, g.flow));
        }
    }

    /// Every group, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (GroupId, &Group)> {
        self.groups.iter().map(|(i, g)| (*i, g))
    }

    /// The indexes of group `id`'s children still linked, in order.
    pub fn linked_indexes(&self, id: GroupId) -> Vec<u32> {
        let Some(g) = self.groups.get(&id) else {
            return Vec::new();
        };
        (0..g.keys.len())
            .filter(|&i| {
                self.links
                    .get(&g.keys[i])
                    .is_some_and(|l| l.group == id && l.index as usize == i)
            })
            .map(|i| i as u32)
            .collect()
    }

    /// The groups whose parent is in `peer`: (flow, group id).
    pub fn of_peer<'a>(&'a self, peer: &'a [u8]) -> impl Iterator<Item = (FlowId, GroupId)> + 'a {
        self.groups
            .iter()
            .filter(move |(_, g)| &*g.peer == peer)
            .map(|(id, g)| (g.flow, *id))
    }

    /// The queues holding parents of children here (each once).
    pub fn peers(&self) -> Vec<Box<[u8]>> {
        let mut p: Vec<Box<[u8]>> = self.groups.values().map(|g| g.peer.clone()).collect();
        p.sort();
        p.dedup();
        p
    }

    /// The invariants: every link names a group at its index with its key
    /// there; each group's count equals its links and is positive; the
    /// parent index agrees; ids below the counter; every linked key `live`.
    pub fn check(&self, live: impl Fn(&JobKey) -> bool) -> Result<(), String> {
        let mut counted: HashMap<GroupId, u32> = HashMap::new();
        for (k, l) in &self.links {
            let Some(g) = self.groups.get(&l.group) else {
                return Err(format!(
                    "a child links to group {}, which does not exist",
                    l.group
                ));
            };
            if g.keys.get(l.index as usize) != Some(k) {
                return Err(format!(
                    "a child of group {} is not at its index {}",
                    l.group, l.index
                ));
            }
            if !live(k) {
                return Err(format!(
                    "child {} of group {} is linked but not in the queue",
                    l.index, l.group
                ));
            }
            *counted.entry(l.group).or_insert(0) += 1;
        }
        for (id, g) in &self.groups {
            let n = counted.get(id).copied().unwrap_or(0);
            if n != g.linked || n == 0 {
                return Err(format!(
                    "group {id} counts {} linked children, has {n}",
                    g.linked
                ));
            }
            if *id >= self.next {
                return Err(format!("group {id} is not below the counter {}", self.next));
            }
            if self.by_parent.get(&(g.peer.clone(), g.flow)) != Some(id) {
                return Err(format!("group {id} is not found by its parent"));
            }
        }
        if self.by_parent.len() != self.groups.len() {
            return Err("groups by parent do not match the groups".into());
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

    fn keys(r: std::ops::Range<u32>) -> Vec<JobKey> {
        r.map(key).collect()
    }

    #[test]
    fn children_end_once_and_the_group_goes_with_the_last() {
        let mut g = Groups::default();
        let id = g.add(b"grade", key(900), 7, keys(0..3)).unwrap();
        assert_eq!(g.linked_len(), 3);
        assert_eq!(g.find(b"grade", 7), Some(id));
        let (grp, i) = g.link(&key(1)).unwrap();
        assert_eq!((grp.parent, grp.flow, i), (key(900), 7, 1));
        // A key linked already, or the same parent flow again: refused, nothing changed.
        assert_eq!(g.add(b"other", key(901), 1, vec![key(2), key(50)]), None);
        assert_eq!(g.add(b"grade", key(900), 7, vec![key(60)]), None);
        assert!(!g.is_linked(&key(50)) && !g.is_linked(&key(60)));
        let e = g.end(&key(1)).unwrap();
        assert_eq!(
            (&*e.peer, e.parent, e.flow, e.index),
            (&b"grade"[..], key(900), 7, 1)
        );
        assert_eq!(g.end(&key(1)), None);
        assert!(g.check(|_| true).is_ok());
        g.end(&key(0));
        assert_eq!(g.len(), 1);
        g.end(&key(2));
        assert!(g.is_empty() && g.find(b"grade", 7).is_none());
        assert!(g.check(|_| true).is_ok());
    }

    #[test]
    fn removing_a_group_returns_the_children_still_linked_in_order() {
        let mut g = Groups::default();
        g.add(b"p", key(900), 1, keys(0..4)).unwrap();
        g.end(&key(2));
        // A key that ended may be linked again, to another parent: not the old group's.
        g.add(b"p", key(901), 2, vec![key(2)]).unwrap();
        assert_eq!(g.remove(b"p", 1), vec![key(0), key(1), key(3)]);
        assert_eq!(g.linked_len(), 1);
        assert!(g.link(&key(2)).is_some_and(|(grp, _)| grp.flow == 2));
        assert!(g.remove(b"p", 1).is_empty());
        assert!(g.check(|_| true).is_ok());
        assert_eq!(g.peers(), vec![Box::from(&b"p"[..])]);
        assert_eq!(g.of_peer(b"p").count(), 1);
    }

    #[test]
    fn saved_groups_load_partly_linked_and_check_finds_dead_links() {
        let mut g = Groups::default();
        let grp = Groups::group(b"p".to_vec().into(), key(900), 3, keys(0..4));
        g.insert_partly(10, grp.clone(), &[1, 3]).unwrap();
        assert_eq!(g.linked_indexes(10), vec![1, 3]);
        assert_eq!(g.next_id(), 11);
        // Colliding id, no link, an index out of range: refused.
        assert!(g
            .insert_partly(
                10,
                Groups::group(b"q".to_vec().into(), key(1), 1, keys(5..6)),
                &[0]
            )
            .is_none());
        assert!(g.insert_partly(11, grp.clone(), &[]).is_none());
        assert!(g
            .insert_partly(
                12,
                Groups::group(b"q".to_vec().into(), key(1), 1, keys(5..6)),
                &[4]
            )
            .is_none());
        assert!(
            g.check(|k| *k != key(3)).is_err(),
            "a linked child that is not in the queue"
        );
        assert!(g.check(|_| true).is_ok());
    }
}
