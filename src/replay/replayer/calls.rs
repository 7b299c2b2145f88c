//! The counting: each parsed event onto its task's stack of open calls and into the tables,
//! as the parent module's docs state ("Counting semantics", "Call stacks belong to tasks").

use super::super::table::Table;
use super::super::tasks::{MAX_OPEN, Open, TaskKey};
use super::{MAX_CPUS, Replay, TraceMode, Unmatched};
use crate::trace::task_pid;
use crate::trace::{Context, Event};

impl Replay {
    /// Replays one event.
    pub fn event(&mut self, ev: Event<'_>) {
        if self.finished {
            return;
        }
        match ev {
            Event::Function { ctx, func, parent } => {
                self.recognised = true;
                let Some(cpu) = self.start(TraceMode::Function, ctx) else {
                    return;
                };
                let ip = self.interner.intern(func);
                self.hit(cpu, ip);
                if self.hooks.has_active_ops() {
                    let parent = parent.map_or(0, |p| self.interner.intern(p));
                    self.hooks.dispatch_ip(ip, parent);
                }
            }
            Event::GraphEntry { ctx, depth, func } => {
                self.recognised = true;
                if let Some(cpu) = self.start(TraceMode::FunctionGraph, ctx) {
                    let ip = self.interner.intern(func);
                    self.entry(cpu, ctx, depth, ip, None);
                }
            }
            Event::GraphLeaf {
                ctx,
                depth,
                func,
                duration_ns,
            } => {
                self.recognised = true;
                if let Some(cpu) = self.start(TraceMode::FunctionGraph, ctx) {
                    let ip = self.interner.intern(func);
                    self.entry(cpu, ctx, depth, ip, Some(duration_ns));
                }
            }
            Event::GraphExit {
                ctx,
                depth,
                func,
                duration_ns,
            } => {
                // A bare `}` alone is not evidence of a trace; with a column it is.
                let columns = ctx != Context::default() || duration_ns.is_some();
                self.recognised |= columns || func.is_some();
                if let Some(cpu) = self.start(TraceMode::FunctionGraph, ctx) {
                    let named = func.map(|f| self.interner.intern(f));
                    self.exit(cpu, ctx, depth, named, duration_ns);
                }
            }
            Event::ContextSwitch { cpu, prev, next } => {
                self.recognised = true;
                self.switch(cpu.unwrap_or(0), prev, next);
            }
            Event::BufferStarted { cpu } | Event::Lost { cpu, .. } => {
                self.recognised = true;
                self.resync(cpu);
            }
            Event::TraceEvent { name, .. } => {
                self.recognised = true;
                self.events.add(name);
                self.event_lines += 1;
            }
            Event::IrqEnter { .. } | Event::IrqExit { .. } => self.recognised = true,
        }
    }

    /// Settles the mode on the first function event and returns the event's CPU, or `None`
    /// (counted) if the event is not replayed.
    fn start(&mut self, mode: TraceMode, ctx: Context<'_>) -> Option<u32> {
        match self.mode {
            Some(m) if m == mode => {}
            Some(_) => {
                self.unmatched.ignored += 1;
                return None;
            }
            None => self.mode = Some(mode),
        }
        let cpu = ctx.cpu.unwrap_or(0);
        if cpu >= MAX_CPUS {
            self.unmatched.ignored += 1;
            return None;
        }
        Some(cpu)
    }

    /// CPU `cpu`'s table, created on first use (`cpu < MAX_CPUS`); `None` without per-CPU
    /// tables.
    fn cpu_table(&mut self, cpu: u32) -> Option<&mut Table> {
        if !self.opts.per_cpu {
            return None;
        }
        let i = cpu as usize;
        if self.cpu_tables.len() <= i {
            self.cpu_tables.resize_with(i + 1, || None);
        }
        Some(self.cpu_tables[i].get_or_insert_with(|| Table::new(false)))
    }

    /// A call of `ip` entered on `cpu`.
    fn hit(&mut self, cpu: u32, ip: usize) {
        self.calls += 1;
        self.table.hit(ip);
        if self.interner.is_other(ip) {
            self.folded += 1;
        }
        if let Some(t) = self.cpu_table(cpu) {
            t.hit(ip);
        }
    }

    /// A function_graph hit of `ip` on task stack `s`, to the hook interface's ops (if any):
    /// its parent is the task's innermost open call.
    #[inline]
    fn dispatch(&self, s: usize, ip: usize) {
        if self.hooks.has_active_ops() {
            let parent = self.tasks.stack(s).open.last().map_or(0, |o| o.ip);
            self.hooks.dispatch_ip(ip, parent);
        }
    }

    /// A call of `ip` returned on `cpu` after `total` ns, `child` of them in its callees.
    fn time(&mut self, cpu: u32, ip: usize, total: u64, child: u64, path: Option<u32>) {
        let t = if self.opts.graph_time {
            total
        } else {
            total.saturating_sub(child)
        };
        self.table.time(ip, t);
        if let Some(tab) = self.cpu_table(cpu) {
            tab.time(ip, t);
        }
        if let Some(p) = &mut self.paths {
            p.time(path, total, total.saturating_sub(child));
        }
    }

    /// The stack of the task a line belongs to (module docs). A new task that finds the
    /// table full evicts the least recently seen one (its open calls count as open at the
    /// end, [`Unmatched::evicted`]).
    fn stack(&mut self, cpu: u32, ctx: &Context<'_>) -> usize {
        let key = match ctx.pid {
            Some(pid) => TaskKey::of(cpu, pid),
            None => self
                .cpu_task
                .get(cpu as usize)
                .copied()
                .flatten()
                .unwrap_or(TaskKey::Cpu(cpu)),
        };
        let i = match self.last {
            Some((k, i)) if k == key => i,
            _ => {
                let (table, cpu_tables, unmatched) =
                    (&mut self.table, &mut self.cpu_tables, &mut self.unmatched);
                let i = self
                    .tasks
                    .lookup(key, &mut |o| evicted(table, cpu_tables, unmatched, o));
                self.last = Some((key, i));
                i
            }
        };
        self.tasks.stack_mut(i).cpu = cpu;
        i
    }

    /// Pushes `o` on stack `s`, within the budget of open calls (the oldest tasks' calls
    /// evicted to make room).
    fn push(&mut self, s: usize, o: Open) {
        let (table, cpu_tables, unmatched) =
            (&mut self.table, &mut self.cpu_tables, &mut self.unmatched);
        self.tasks
            .push(s, o, &mut |o| evicted(table, cpu_tables, unmatched, o));
    }

    /// The call path of `ip` called from the top of stack `s` (paths recorded only).
    fn path(&mut self, s: usize, ip: usize) -> Option<u32> {
        let trie = self.paths.as_mut()?;
        let parent = match self.tasks.stack(s).open.last() {
            Some(o) => o.path,
            None => Some(super::super::table::ROOT),
        };
        trie.child(parent, ip)
    }

    /// An entry `func() {` (`leaf: None`), or a leaf `func();` with its duration.
    fn entry(
        &mut self,
        cpu: u32,
        ctx: Context<'_>,
        depth: u16,
        ip: usize,
        leaf: Option<Option<u64>>,
    ) {
        let s = self.stack(cpu, &ctx);
        // An entry at this depth means the open entries at it or deeper returned unseen; a
        // leaf, those deeper. A leaf at the depth of an open call (printed so with filters or
        // across a preemption) leaves it open: its exit, named or not, still closes it, and
        // the call is not counted twice.
        let st = self.tasks.stack_mut(s);
        let closes = |o: &Open| match leaf {
            None => o.depth >= depth,
            Some(_) => o.depth > depth,
        };
        let keep = st.open.iter().take_while(|o| !closes(o)).count();
        self.unmatched.abandoned += (st.open.len() - keep) as u64;
        st.open.truncate(keep);
        let path = self.path(s, ip);
        self.hit(cpu, ip);
        self.dispatch(s, ip);
        if let Some(p) = &mut self.paths {
            p.hit(path);
        }
        match leaf {
            Some(duration) => {
                if let Some(d) = duration {
                    self.time(cpu, ip, d, 0, path);
                    self.add_child(s, d);
                }
            }
            None => {
                if self.tasks.stack(s).open.len() >= MAX_OPEN {
                    self.unmatched.overruns += 1;
                    return;
                }
                let o = Open {
                    ip,
                    depth,
                    cpu,
                    calltime: ctx.ts_ns,
                    child: 0,
                    path,
                };
                self.push(s, o);
            }
        }
    }

    /// Adds a returned call's duration to the child time of the open call on top of stack
    /// `s`.
    fn add_child(&mut self, s: usize, d: u64) {
        if let Some(parent) = self.tasks.stack_mut(s).open.last_mut() {
            parent.child = parent.child.saturating_add(d);
        }
    }

    fn exit(
        &mut self,
        cpu: u32,
        ctx: Context<'_>,
        depth: u16,
        named: Option<usize>,
        duration: Option<u64>,
    ) {
        let s = self.stack(cpu, &ctx);
        // The exit closes the open call at its depth (the entries deeper returned unseen).
        // One that names a function closes that function's call, the innermost one open on
        // the task's stack, even at another depth (a trace captured with filters or across a
        // preemption): a call is never counted again as exit-only while it is open.
        let st = self.tasks.stack_mut(s);
        let keep = st.open.iter().take_while(|o| o.depth <= depth).count();
        let at_depth = keep
            .checked_sub(1)
            .map(|i| st.open[i])
            .is_some_and(|o| o.depth == depth && named.is_none_or(|ip| ip == o.ip));
        let cut = match named {
            Some(ip) if !at_depth => st
                .open
                .iter()
                .rposition(|o| o.ip == ip)
                .map_or(keep, |k| k + 1),
            _ => keep,
        };
        self.unmatched.abandoned += (st.open.len() - cut) as u64;
        st.open.truncate(cut);
        let top = st.open.last().copied();
        let closes = |o: &Open| match named {
            Some(ip) => ip == o.ip && (o.depth == depth || !at_depth),
            None => o.depth == depth,
        };
        match top {
            Some(o) if closes(&o) => {
                st.open.pop();
                let total = duration.or_else(|| ctx.ts_ns?.checked_sub(o.calltime?));
                if let Some(total) = total {
                    self.time(cpu, o.ip, total, o.child, o.path);
                    self.add_child(s, total);
                }
            }
            _ => match named {
                Some(ip) => {
                    // Exit-only: the call's entry lies before the window.
                    self.unmatched.exit_only += 1;
                    let path = self.path(s, ip);
                    self.hit(cpu, ip);
                    self.dispatch(s, ip);
                    if let Some(p) = &mut self.paths {
                        p.hit(path);
                    }
                    if let Some(d) = duration {
                        self.time(cpu, ip, d, 0, path);
                        self.add_child(s, d);
                    }
                }
                None => self.unmatched.exits += 1,
            },
        }
    }

    /// ` cpu) prev-PID => next-PID `: the lines after it on `cpu` belong to `next`; the
    /// lines before the CPU's first switch belonged to `prev`.
    fn switch(&mut self, cpu: u32, prev: &str, next: &str) {
        if cpu >= MAX_CPUS {
            self.unmatched.ignored += 1;
            return;
        }
        let key = |s: &str| task_pid(s).map(|(_, pid)| TaskKey::of(cpu, pid));
        let i = cpu as usize;
        if self.cpu_task.len() <= i {
            self.cpu_task.resize(i + 1, None);
        }
        if self.cpu_task[i].is_none()
            && let Some(prev) = key(prev)
            && let Some(s) = self.tasks.get(TaskKey::Cpu(cpu))
        {
            let taken = self
                .tasks
                .get(prev)
                .is_some_and(|p| !self.tasks.stack(p).open.is_empty());
            if !taken {
                self.tasks.rekey(s, prev);
            }
        }
        self.cpu_task[i] = key(next);
        self.last = None;
    }

    /// `[LOST N EVENTS]` or `buffer started` on `cpu`: the open calls of the tasks last seen
    /// there may have lost their exits.
    fn resync(&mut self, cpu: u32) {
        let mut dropped = 0;
        for st in self.tasks.stacks_mut() {
            if st.cpu == cpu {
                dropped += st.open.len() as u64;
                st.open.clear();
            }
        }
        self.unmatched.dropped_at_resync += dropped;
    }
}

/// A call still open at the end of the trace (or evicted before it): a hit without time, in
/// its function's row of the merged table and of its entry's CPU.
pub(super) fn open_at_end(table: &mut Table, cpu_tables: &mut [Option<Table>], o: Open) {
    table.open_at_end(o.ip);
    if let Some(Some(t)) = cpu_tables.get_mut(o.cpu as usize) {
        t.open_at_end(o.ip);
    }
}

/// An open call evicted from the task table (over `MAX_TASKS` tasks or `MAX_OPEN_CALLS` open
/// calls, `tasks.rs`): counted as open at the end now.
fn evicted(
    table: &mut Table,
    cpu_tables: &mut [Option<Table>],
    unmatched: &mut Unmatched,
    o: Open,
) {
    unmatched.evicted += 1;
    unmatched.open_at_eof += 1;
    open_at_end(table, cpu_tables, o);
}
