//! Intrusive doubly linked lists over dense keys: the building block of every queue-based policy.
//!
//! A key belongs to at most one list at a time. Heads hold the newest keys, tails the oldest.
//! All operations are O(1) and allocation-free once the per-key arrays have grown.

use crate::Key;

pub(crate) const NIL: Key = Key::MAX;
const NO_LIST: u8 = u8::MAX;

#[derive(Clone, Debug)]
pub(crate) struct Lists {
    newer: Vec<Key>,
    older: Vec<Key>,
    owner: Vec<u8>,
    heads: Vec<Key>,
    tails: Vec<Key>,
    lens: Vec<usize>,
}

impl Lists {
    pub(crate) fn new(n_lists: usize, key_space: usize) -> Self {
        assert!(n_lists < NO_LIST as usize);
        Lists {
            newer: vec![NIL; key_space],
            older: vec![NIL; key_space],
            owner: vec![NO_LIST; key_space],
            heads: vec![NIL; n_lists],
            tails: vec![NIL; n_lists],
            lens: vec![0; n_lists],
        }
    }

    #[inline]
    fn grow(&mut self, key: Key) {
        let index = key as usize;
        if index >= self.owner.len() {
            let size = (index + 1).next_power_of_two();
            self.newer.resize(size, NIL);
            self.older.resize(size, NIL);
            self.owner.resize(size, NO_LIST);
        }
    }

    /// The list `key` is in, if any.
    #[inline]
    pub(crate) fn list_of(&self, key: Key) -> Option<u8> {
        match self.owner.get(key as usize) {
            Some(&list) if list != NO_LIST => Some(list),
            _ => None,
        }
    }

    #[inline]
    pub(crate) fn in_list(&self, key: Key, list: u8) -> bool {
        self.owner.get(key as usize) == Some(&list)
    }

    #[inline]
    pub(crate) fn len(&self, list: u8) -> usize {
        self.lens[list as usize]
    }

    /// Oldest key of `list`.
    #[inline]
    pub(crate) fn tail(&self, list: u8) -> Option<Key> {
        let key = self.tails[list as usize];
        (key != NIL).then_some(key)
    }

    /// The keys of `list`, oldest (tail) first.
    pub(crate) fn oldest_first(&self, list: u8) -> impl Iterator<Item = Key> + '_ {
        std::iter::successors(self.tail(list), |&key| {
            let newer = self.newer(key);
            (newer != NIL).then_some(newer)
        })
    }

    /// Next key toward the head (newer), `NIL` at the head.
    #[inline]
    pub(crate) fn newer(&self, key: Key) -> Key {
        self.newer[key as usize]
    }

    #[inline]
    pub(crate) fn push_head(&mut self, list: u8, key: Key) {
        self.grow(key);
        let index = key as usize;
        debug_assert_eq!(self.owner[index], NO_LIST, "key {key} already listed");
        let l = list as usize;
        let head = self.heads[l];
        self.owner[index] = list;
        self.newer[index] = NIL;
        self.older[index] = head;
        if head == NIL {
            self.tails[l] = key;
        } else {
            self.newer[head as usize] = key;
        }
        self.heads[l] = key;
        self.lens[l] += 1;
    }

    /// Removes `key` from its list; returns the list it was in.
    #[inline]
    pub(crate) fn remove(&mut self, key: Key) -> Option<u8> {
        let list = self.list_of(key)?;
        let index = key as usize;
        let l = list as usize;
        let (newer, older) = (self.newer[index], self.older[index]);
        if newer == NIL {
            self.heads[l] = older;
        } else {
            self.older[newer as usize] = older;
        }
        if older == NIL {
            self.tails[l] = newer;
        } else {
            self.newer[older as usize] = newer;
        }
        self.owner[index] = NO_LIST;
        self.lens[l] -= 1;
        Some(list)
    }

    #[inline]
    pub(crate) fn pop_tail(&mut self, list: u8) -> Option<Key> {
        let key = self.tail(list)?;
        self.remove(key);
        Some(key)
    }

    /// Moves `key` (in any list) to the head of `list`.
    #[inline]
    pub(crate) fn move_to_head(&mut self, list: u8, key: Key) {
        if self.heads[list as usize] == key {
            return;
        }
        self.remove(key);
        self.push_head(list, key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_pop_order_is_fifo_from_tail() {
        let mut lists = Lists::new(2, 4);
        for key in 0..5 {
            lists.push_head(0, key);
        }
        assert_eq!(lists.len(0), 5);
        lists.move_to_head(1, 2);
        assert_eq!(lists.list_of(2), Some(1));
        let popped: Vec<Key> = std::iter::from_fn(|| lists.pop_tail(0)).collect();
        assert_eq!(popped, vec![0, 1, 3, 4]);
        assert_eq!(lists.pop_tail(1), Some(2));
        assert_eq!(lists.len(1), 0);
    }
}
