//! Many FIFO queues threaded through one shared slab: each queue is a head and a tail index
//! (8 bytes), each queued item a slab node, and freed nodes are reused, so a queueing discipline
//! with thousands of queues (HTB leaves, fq_codel flows) allocates nothing once the slab has grown
//! to its peak backlog.

/// "No node".
pub const NIL: u32 = u32::MAX;

/// The two ends of one queue in a [`QueueSlab`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueEnds {
    head: u32,
    tail: u32,
}

impl QueueEnds {
    /// An empty queue.
    pub const EMPTY: QueueEnds = QueueEnds { head: NIL, tail: NIL };

    /// True if nothing is queued.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.head == NIL
    }
}

impl Default for QueueEnds {
    fn default() -> Self {
        QueueEnds::EMPTY
    }
}

#[derive(Clone, Copy, Debug)]
struct Node<T> {
    item: T,
    next: u32,
}

/// The shared slab. See the [module docs](self).
#[derive(Clone, Debug)]
pub struct QueueSlab<T> {
    nodes: Vec<Node<T>>,
    free: u32,
}

impl<T> Default for QueueSlab<T> {
    fn default() -> Self {
        QueueSlab { nodes: Vec::new(), free: NIL }
    }
}

impl<T: Copy> QueueSlab<T> {
    /// Appends `item` to queue `q`; returns the node holding it.
    #[inline]
    pub fn push_back(&mut self, q: &mut QueueEnds, item: T) -> u32 {
        let node = Node { item, next: NIL };
        let id = match self.free {
            NIL => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
            id => {
                self.free = self.nodes[id as usize].next;
                self.nodes[id as usize] = node;
                id
            }
        };
        if q.tail == NIL {
            q.head = id;
        } else {
            self.nodes[q.tail as usize].next = id;
        }
        q.tail = id;
        id
    }

    /// Takes the head of queue `q`, with the node that held it.
    #[inline]
    pub fn pop_front(&mut self, q: &mut QueueEnds) -> Option<(u32, T)> {
        let id = q.head;
        if id == NIL {
            return None;
        }
        let node = self.nodes[id as usize];
        q.head = node.next;
        if q.head == NIL {
            q.tail = NIL;
        }
        self.nodes[id as usize].next = self.free;
        self.free = id;
        Some((id, node.item))
    }

    /// The head of queue `q`.
    #[inline]
    pub fn front(&self, q: &QueueEnds) -> Option<&T> {
        (q.head != NIL).then(|| &self.nodes[q.head as usize].item)
    }

    /// The items of queue `q`, head first.
    pub fn iter<'a>(&'a self, q: &QueueEnds) -> impl Iterator<Item = &'a T> + 'a {
        let mut n = q.head;
        std::iter::from_fn(move || {
            let node = self.nodes.get(n as usize)?;
            n = node.next;
            Some(&node.item)
        })
    }

    /// The tail of queue `q`, with the node that holds it.
    #[inline]
    pub fn back(&self, q: &QueueEnds) -> Option<(u32, &T)> {
        (q.tail != NIL).then(|| (q.tail, &self.nodes[q.tail as usize].item))
    }

    /// The items of queue `q` with the nodes that hold them, head first.
    pub fn iter_nodes<'a>(&'a self, q: &QueueEnds) -> impl Iterator<Item = (u32, &'a T)> + 'a {
        let mut n = q.head;
        std::iter::from_fn(move || {
            let id = n;
            let node = self.nodes.get(id as usize)?;
            n = node.next;
            Some((id, &node.item))
        })
    }

    /// Unlinks the item after node `prev` of queue `q` (the head if `prev` is [`NIL`]).
    pub fn remove_after(&mut self, q: &mut QueueEnds, prev: u32) -> Option<T> {
        if prev == NIL {
            return self.pop_front(q).map(|(_, item)| item);
        }
        let id = self.nodes.get(prev as usize)?.next;
        if id == NIL {
            return None;
        }
        let node = self.nodes[id as usize];
        self.nodes[prev as usize].next = node.next;
        if q.tail == id {
            q.tail = prev;
        }
        self.nodes[id as usize].next = self.free;
        self.free = id;
        Some(node.item)
    }

    /// Forgets every queue (their ends must be reset by the owner).
    pub fn clear(&mut self) {
        self.nodes.clear();
        self.free = NIL;
    }

    /// Nodes allocated (the peak backlog so far).
    pub fn nodes(&self) -> usize {
        self.nodes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queues_share_the_slab_in_order_and_reuse_nodes() {
        let mut s = QueueSlab::default();
        let (mut a, mut b) = (QueueEnds::EMPTY, QueueEnds::EMPTY);
        for k in 0..3 {
            s.push_back(&mut a, k);
            s.push_back(&mut b, 10 + k);
        }
        assert_eq!(s.pop_front(&mut a).map(|(_, v)| v), Some(0));
        s.push_back(&mut a, 7);
        assert_eq!(s.iter(&a).copied().collect::<Vec<_>>(), vec![1, 2, 7]);
        assert_eq!(s.front(&b), Some(&10));
        // b holds 4 items at the peak of each push-then-pop: 7 nodes, and no more after that.
        s.push_back(&mut b, 99);
        s.pop_front(&mut b).unwrap();
        let peak = s.nodes();
        assert_eq!(peak, 7);
        for k in 0..100 {
            s.push_back(&mut b, k);
            s.pop_front(&mut b).unwrap();
        }
        assert_eq!(s.nodes(), peak);
        while s.pop_front(&mut a).is_some() {}
        assert!(a.is_empty());
        assert_eq!(s.front(&a), None);
    }

    #[test]
    fn remove_after_unlinks_head_middle_and_tail() {
        let mut s = QueueSlab::default();
        let mut a = QueueEnds::EMPTY;
        let ids: Vec<u32> = (0..4).map(|k| s.push_back(&mut a, k)).collect();
        assert_eq!(s.remove_after(&mut a, ids[0]), Some(1));
        assert_eq!(s.remove_after(&mut a, NIL), Some(0));
        assert_eq!(s.remove_after(&mut a, ids[2]), Some(3));
        assert_eq!(s.remove_after(&mut a, ids[2]), None);
        // The tail moved back: a push lands after the last item left.
        s.push_back(&mut a, 9);
        assert_eq!(s.iter(&a).copied().collect::<Vec<_>>(), vec![2, 9]);
        assert_eq!(s.iter_nodes(&a).map(|(_, v)| *v).collect::<Vec<_>>(), vec![2, 9]);
    }
}
