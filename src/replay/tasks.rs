//! The replay's task stacks: one stack of open calls per task, in a table that evicts its
//! least recently seen tasks, so that a stream of any number of task ids costs O(1) a line
//! and bounded memory.
//!
//! # Design
//!
//! Stacks live in slots of one vector, found by a hash map from [`TaskKey`] and threaded on a
//! doubly linked list in order of last use (newest first). A lookup moves its slot to the
//! front. A new task takes a free slot, else a new one while there are fewer than
//! [`MAX_TASKS`], else the oldest task's slot: that task is evicted. Each stack's open calls
//! live in its own vector, grown by doubling; the sum of all their capacities stays within
//! [`MAX_OPEN_CALLS`]: a stack that must grow past it first evicts the oldest other tasks
//! until the growth fits.
//!
//! An evicted task's open calls are handed to the caller, which counts them as open at the
//! end (they were hits when entered; only their exits are given up). Every eviction frees a
//! slot that one lookup created, so its cost, like its calls', is paid once: lookups and
//! pushes are O(1) amortized whatever the number of tasks.
//!
//! # Invariants
//!
//! - `map` holds exactly the live slots, each under its `key`; the list holds exactly the
//!   live slots; `free` exactly the others (their stacks empty, with no capacity).
//! - `open_capacity` is the sum of the live stacks' capacities and never exceeds
//!   [`MAX_OPEN_CALLS`]; at most [`MAX_TASKS`] slots exist.
//! - In each stack the depths rise strictly from bottom to top.

use std::collections::HashMap;

/// Task stacks kept at once; a new task beyond them evicts the least recently seen task,
/// whose open calls are counted as open at the end (the summary's `Unmatched::evicted`).
pub(crate) const MAX_TASKS: usize = 1 << 16;
/// Open calls kept by all tasks together (stack capacity, about 48 bytes a call): a stack
/// that must grow past it evicts the least recently seen other tasks first, their open calls
/// counted as open at the end (the summary's `Unmatched::evicted`).
pub(crate) const MAX_OPEN_CALLS: usize = 1 << 18;
/// Open calls one task's stack tracks; deeper entries still count a hit, are not timed, and
/// are counted as overruns.
pub(crate) const MAX_OPEN: usize = 4096;

/// Whose stack a call goes on (the replayer's module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum TaskKey {
    /// A task by PID.
    Pid(u32),
    /// The idle task (PID 0) of a CPU: every CPU has its own.
    Idle(u32),
    /// A CPU, when the trace says nothing about tasks.
    Cpu(u32),
}

impl TaskKey {
    pub(super) fn of(cpu: u32, pid: u32) -> TaskKey {
        if pid == 0 {
            TaskKey::Idle(cpu)
        } else {
            TaskKey::Pid(pid)
        }
    }
}

/// One open entry as the trace showed it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Open {
    pub(super) ip: usize,
    pub(super) depth: u16,
    /// The CPU of the entry line (where its hit went).
    pub(super) cpu: u32,
    /// The entry's timestamp, when the line had one.
    pub(super) calltime: Option<u64>,
    /// Summed durations of the calls made from it that returned (ns).
    pub(super) child: u64,
    /// Its call path, when paths are recorded and the trie had room.
    pub(super) path: Option<u32>,
}

/// No slot.
const NIL: u32 = u32::MAX;

/// One task's open calls.
#[derive(Debug)]
pub(super) struct TaskStack {
    pub(super) open: Vec<Open>,
    /// The CPU of the task's latest line.
    pub(super) cpu: u32,
    key: TaskKey,
    /// The slot used just after this one, and just before ([`NIL`] at the ends).
    newer: u32,
    older: u32,
    live: bool,
}

/// The task stacks (module docs).
#[derive(Debug)]
pub(super) struct Tasks {
    map: HashMap<TaskKey, u32>,
    slots: Vec<TaskStack>,
    free: Vec<u32>,
    newest: u32,
    oldest: u32,
    open_capacity: usize,
    max_tasks: usize,
    max_open_calls: usize,
    /// Slots visited by evictions and list moves: the work the table does, for the tests
    /// that check it stays proportional to the lines.
    #[cfg(test)]
    pub(super) work: u64,
}

impl Default for Tasks {
    fn default() -> Self {
        Tasks::with_limits(MAX_TASKS, MAX_OPEN_CALLS)
    }
}

impl Tasks {
    /// A table of at most `max_tasks` stacks and `max_open_calls` open calls in all
    /// (`max_open_calls >= MAX_OPEN`, so that one task's stack always fits).
    pub(super) fn with_limits(max_tasks: usize, max_open_calls: usize) -> Tasks {
        Tasks {
            map: HashMap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            newest: NIL,
            oldest: NIL,
            open_capacity: 0,
            max_tasks: max_tasks.max(1),
            max_open_calls: max_open_calls.max(MAX_OPEN),
            #[cfg(test)]
            work: 0,
        }
    }

    /// The slot of `key`, if it has one (the list order is left alone).
    pub(super) fn get(&self, key: TaskKey) -> Option<usize> {
        self.map.get(&key).map(|&i| i as usize)
    }

    /// Stack `i`.
    pub(super) fn stack(&self, i: usize) -> &TaskStack {
        &self.slots[i]
    }

    /// Stack `i`, mutably.
    pub(super) fn stack_mut(&mut self, i: usize) -> &mut TaskStack {
        &mut self.slots[i]
    }

    /// Every stack (free slots are empty).
    pub(super) fn stacks_mut(&mut self) -> impl Iterator<Item = &mut TaskStack> {
        self.slots.iter_mut()
    }

    /// The slot of `key`, created when new, moved to the front of the list. A new task that
    /// finds the table full evicts the oldest: its open calls go to `evicted`.
    pub(super) fn lookup(&mut self, key: TaskKey, evicted: &mut impl FnMut(Open)) -> usize {
        if let Some(&i) = self.map.get(&key) {
            self.unlink(i);
            self.push_front(i);
            return i as usize;
        }
        let i = match self.free.pop() {
            Some(i) => i,
            None if self.slots.len() < self.max_tasks => {
                self.slots.push(TaskStack {
                    open: Vec::new(),
                    cpu: 0,
                    key,
                    newer: NIL,
                    older: NIL,
                    live: false,
                });
                // At most `MAX_TASKS` slots, which fits a `u32`.
                (self.slots.len() - 1) as u32
            }
            None => {
                let i = self.oldest;
                self.evict(i, evicted);
                self.free.pop().unwrap_or(i)
            }
        };
        let st = &mut self.slots[i as usize];
        st.key = key;
        st.live = true;
        st.cpu = 0;
        self.map.insert(key, i);
        self.push_front(i);
        i as usize
    }

    /// Gives stack `s` the key `to` in place of its own; a stack that `to` had (which must
    /// be empty) is freed.
    pub(super) fn rekey(&mut self, s: usize, to: TaskKey) {
        if let Some(&p) = self.map.get(&to)
            && p as usize != s
        {
            self.release(p);
        }
        let from = self.slots[s].key;
        if self.map.get(&from) == Some(&(s as u32)) {
            self.map.remove(&from);
        }
        self.slots[s].key = to;
        self.map.insert(to, s as u32);
    }

    /// Pushes `o` on stack `s` (below [`MAX_OPEN`] calls). When the stack must grow past the
    /// budget of open calls, the oldest other tasks are evicted first (their calls to
    /// `evicted`).
    pub(super) fn push(&mut self, s: usize, o: Open, evicted: &mut impl FnMut(Open)) {
        let st = &self.slots[s];
        if st.open.len() == st.open.capacity() {
            let cap = st.open.capacity();
            let want = (cap * 2).clamp(1, MAX_OPEN);
            while self.open_capacity - cap + want > self.max_open_calls {
                let victim = self.oldest_other(s);
                if victim == NIL {
                    break;
                }
                self.evict(victim, evicted);
            }
            let open = &mut self.slots[s].open;
            open.reserve_exact(want - cap);
            let grown = open.capacity();
            self.open_capacity = self.open_capacity - cap + grown;
        }
        self.slots[s].open.push(o);
    }

    /// Heap bytes: the slots, their stacks' capacities and the map.
    pub(super) fn heap_bytes(&self) -> usize {
        self.slots.capacity() * size_of::<TaskStack>()
            + self.open_capacity * size_of::<Open>()
            + self.free.capacity() * size_of::<u32>()
            + self.map.capacity() * (size_of::<(TaskKey, u32)>() + 1)
    }

    /// The oldest live slot other than `s`, or [`NIL`].
    fn oldest_other(&self, s: usize) -> u32 {
        let o = self.oldest;
        if o as usize != s {
            return o;
        }
        self.slots[o as usize].newer
    }

    /// Evicts slot `i`: its open calls to `evicted`, its capacity freed, the slot free.
    fn evict(&mut self, i: u32, evicted: &mut impl FnMut(Open)) {
        for o in self.slots[i as usize].open.drain(..) {
            evicted(o);
        }
        self.release(i);
    }

    /// Frees slot `i` (its calls, if any, are dropped uncounted: callers give only empty or
    /// drained stacks).
    fn release(&mut self, i: u32) {
        #[cfg(test)]
        {
            self.work += 1;
        }
        let st = &mut self.slots[i as usize];
        if !st.live {
            return;
        }
        st.live = false;
        self.open_capacity -= st.open.capacity();
        st.open = Vec::new();
        let key = st.key;
        if self.map.get(&key) == Some(&i) {
            self.map.remove(&key);
        }
        self.unlink(i);
        self.free.push(i);
    }

    fn unlink(&mut self, i: u32) {
        #[cfg(test)]
        {
            self.work += 1;
        }
        let (newer, older) = {
            let st = &self.slots[i as usize];
            (st.newer, st.older)
        };
        match newer {
            NIL => self.newest = older,
            n => self.slots[n as usize].older = older,
        }
        match older {
            NIL => self.oldest = newer,
            o => self.slots[o as usize].newer = newer,
        }
        let st = &mut self.slots[i as usize];
        st.newer = NIL;
        st.older = NIL;
    }

    fn push_front(&mut self, i: u32) {
        let old = self.newest;
        {
            let st = &mut self.slots[i as usize];
            st.newer = NIL;
            st.older = old;
        }
        match old {
            NIL => self.oldest = i,
            o => self.slots[o as usize].newer = i,
        }
        self.newest = i;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(depth: u16) -> Open {
        Open {
            ip: 1,
            depth,
            cpu: 0,
            calltime: None,
            child: 0,
            path: None,
        }
    }

    /// The list holds the live slots in use order, the map agrees, the capacity adds up.
    fn check(t: &Tasks) {
        let mut seen = Vec::new();
        let mut i = t.newest;
        let mut prev = NIL;
        while i != NIL {
            let st = &t.slots[i as usize];
            assert!(st.live);
            assert_eq!(st.newer, prev);
            assert_eq!(t.map.get(&st.key), Some(&i));
            seen.push(i);
            prev = i;
            i = st.older;
        }
        assert_eq!(t.oldest, prev);
        assert_eq!(seen.len(), t.map.len());
        assert_eq!(seen.len() + t.free.len(), t.slots.len());
        let cap: usize = t.slots.iter().map(|s| s.open.capacity()).sum();
        assert_eq!(cap, t.open_capacity);
        assert!(t.open_capacity <= t.max_open_calls);
        assert!(t.slots.len() <= t.max_tasks);
    }

    #[test]
    fn the_oldest_task_is_evicted_with_its_calls() {
        let mut t = Tasks::with_limits(3, MAX_OPEN);
        let mut gone = Vec::new();
        let mut ev = |o: Open| gone.push(o.depth);
        for pid in 1..=3 {
            let s = t.lookup(TaskKey::Pid(pid), &mut ev);
            t.push(s, open(pid as u16), &mut ev);
        }
        // Task 1 is used again: task 2 is now the oldest.
        t.lookup(TaskKey::Pid(1), &mut ev);
        t.lookup(TaskKey::Pid(4), &mut ev);
        check(&t);
        assert_eq!(gone, [2]);
        assert_eq!(t.get(TaskKey::Pid(2)), None);
        assert!(t.get(TaskKey::Pid(1)).is_some());
    }

    #[test]
    fn the_open_call_budget_evicts_other_tasks() {
        let mut t = Tasks::with_limits(100, MAX_OPEN);
        let mut gone = 0;
        let mut ev = |_: Open| gone += 1;
        // Two tasks of MAX_OPEN / 2 calls fill the budget; a third task's first call evicts
        // the oldest.
        for pid in 1..=2 {
            let s = t.lookup(TaskKey::Pid(pid), &mut ev);
            for d in 0..MAX_OPEN / 2 {
                t.push(s, open(d as u16), &mut ev);
            }
        }
        check(&t);
        let s = t.lookup(TaskKey::Pid(3), &mut ev);
        t.push(s, open(0), &mut ev);
        check(&t);
        assert_eq!(gone, MAX_OPEN / 2);
        assert_eq!(t.get(TaskKey::Pid(1)), None);
        assert!(t.get(TaskKey::Pid(2)).is_some());
    }

    #[test]
    fn work_per_lookup_is_constant_past_the_limit() {
        let mut t = Tasks::with_limits(1000, MAX_OPEN * 4);
        let mut gone = 0u64;
        let mut ev = |_: Open| gone += 1;
        let rounds = 50_000u32;
        for pid in 1..=rounds {
            let s = t.lookup(TaskKey::Pid(pid), &mut ev);
            t.push(s, open(0), &mut ev);
            if pid % 4096 == 0 {
                check(&t);
            }
        }
        check(&t);
        assert_eq!(gone, u64::from(rounds) - 1000);
        // Per lookup: one list move, or one eviction (release + unlink) and a move.
        assert!(t.work <= 3 * u64::from(rounds), "{}", t.work);
    }

    #[test]
    fn rekey_frees_the_stack_it_replaces() {
        let mut t = Tasks::with_limits(10, MAX_OPEN);
        let mut ev = |_: Open| panic!("nothing is evicted");
        let cpu = t.lookup(TaskKey::Cpu(0), &mut ev);
        t.push(cpu, open(0), &mut ev);
        let other = t.lookup(TaskKey::Pid(7), &mut ev);
        t.rekey(cpu, TaskKey::Pid(7));
        check(&t);
        assert_eq!(t.get(TaskKey::Pid(7)), Some(cpu));
        assert_eq!(t.get(TaskKey::Cpu(0)), None);
        assert!(t.free.contains(&(other as u32)));
    }
}
