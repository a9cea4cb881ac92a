//! Intrusive doubly linked lists over line indices: every line is on exactly one list (free,
//! dirty, or the clean LRU of its class), and moves between lists in O(1).

const NONE: u32 = u32::MAX;

/// A set of lists sharing one index space.
#[derive(Clone, Debug)]
pub struct Lists {
    prev: Vec<u32>,
    next: Vec<u32>,
    owner: Vec<u16>,
    head: Vec<u32>,
    tail: Vec<u32>,
    len: Vec<u64>,
}

/// The list a line is on when it is on none (only transiently).
pub const UNLISTED: u16 = u16::MAX;

impl Lists {
    /// `items` unlisted items and `lists` empty lists.
    pub fn new(items: usize, lists: usize) -> Self {
        Self {
            prev: vec![NONE; items],
            next: vec![NONE; items],
            owner: vec![UNLISTED; items],
            head: vec![NONE; lists],
            tail: vec![NONE; lists],
            len: vec![0; lists],
        }
    }

    /// Number of items on `list`.
    pub fn len(&self, list: u16) -> u64 {
        self.len[usize::from(list)]
    }

    /// The list `item` is on.
    pub fn owner(&self, item: u32) -> u16 {
        self.owner[item as usize]
    }

    /// Appends `item` (taken off its current list first) at the tail (most recent end).
    pub fn push_back(&mut self, list: u16, item: u32) {
        self.remove(item);
        let l = usize::from(list);
        let i = item as usize;
        self.prev[i] = self.tail[l];
        self.next[i] = NONE;
        if self.tail[l] == NONE {
            self.head[l] = item;
        } else {
            self.next[self.tail[l] as usize] = item;
        }
        self.tail[l] = item;
        self.owner[i] = list;
        self.len[l] += 1;
    }

    /// Takes `item` off its list (no-op when unlisted).
    pub fn remove(&mut self, item: u32) {
        let i = item as usize;
        let list = self.owner[i];
        if list == UNLISTED {
            return;
        }
        let l = usize::from(list);
        let (prev, next) = (self.prev[i], self.next[i]);
        if prev == NONE {
            self.head[l] = next;
        } else {
            self.next[prev as usize] = next;
        }
        if next == NONE {
            self.tail[l] = prev;
        } else {
            self.prev[next as usize] = prev;
        }
        self.prev[i] = NONE;
        self.next[i] = NONE;
        self.owner[i] = UNLISTED;
        self.len[l] -= 1;
    }

    /// Items of `list` from the head (least recent) on.
    pub fn iter(&self, list: u16) -> impl Iterator<Item = u32> + '_ {
        let mut cursor = self.head[usize::from(list)];
        std::iter::from_fn(move || {
            (cursor != NONE).then(|| {
                let item = cursor;
                cursor = self.next[item as usize];
                item
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_items_between_lists_in_order() {
        let mut lists = Lists::new(5, 2);
        for item in 0..5 {
            lists.push_back(0, item);
        }
        lists.push_back(1, 2);
        lists.push_back(0, 0);
        assert_eq!(lists.iter(0).collect::<Vec<_>>(), vec![1, 3, 4, 0]);
        assert_eq!(lists.iter(1).collect::<Vec<_>>(), vec![2]);
        lists.remove(4);
        lists.remove(4);
        assert_eq!(lists.len(0), 3);
        assert_eq!(lists.owner(4), UNLISTED);
        assert_eq!(lists.iter(0).collect::<Vec<_>>(), vec![1, 3, 0]);
    }
}
