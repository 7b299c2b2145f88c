//! The writers and readers of an instance's control files: per-ops and global filter and
//! notrace hashes, the pid list, the function-tracing switch, and the listings
//! (`available_filter_functions`, `enabled_functions`, the hash files). Every write goes
//! through the instance's one commit.

use super::*;

impl Ftrace {
    /// Writes `ops`' filter hash with the `set_ftrace_filter` syntax (`ftrace_set_filter`),
    /// resolved against this instance's sites; allowed before registration. Errors, with
    /// nothing changed: [`Error::InvalidInput`] wrapping a
    /// [`FilterError`], [`Error::Busy`] for an `IPMODIFY` conflict.
    pub fn set_filter(
        &self,
        ops: &Arc<FtraceOps>,
        text: &str,
        mode: WriteMode,
    ) -> Result<(), Error> {
        self.set_ops_hash(ops, Which::Filter, text, mode)
    }

    /// Writes `ops`' notrace hash (`ftrace_set_notrace`); as [`set_filter`](Self::set_filter).
    pub fn set_notrace(
        &self,
        ops: &Arc<FtraceOps>,
        text: &str,
        mode: WriteMode,
    ) -> Result<(), Error> {
        self.set_ops_hash(ops, Which::Notrace, text, mode)
    }

    fn new_hashes(
        &self,
        current: &Hashes,
        which: Which,
        text: &str,
        mode: WriteMode,
    ) -> Result<Hashes, FilterError> {
        let mut next = current.clone();
        let target = match which {
            Which::Filter => &mut next.filter,
            Which::Notrace => &mut next.notrace,
        };
        let names = self.sites().map(|s| (s.name(), s.module()));
        *target = filter::apply_write(target, text, mode, names)?;
        Ok(next)
    }

    fn set_ops_hash(
        &self,
        ops: &Arc<FtraceOps>,
        which: Which,
        text: &str,
        mode: WriteMode,
    ) -> Result<(), Error> {
        let path = which.file();
        self.check_not_in_callback(path)?;
        let mut st = self.lock();
        let owner = ops.owner.load(Ordering::Acquire);
        if owner != 0 && owner != self.id() {
            return Err(busy(path, "ops is registered in another Ftrace instance"));
        }
        let current = {
            let guard = ops.hashes.lock();
            if guard.0 == self.id() {
                Hashes::clone(&guard.1)
            } else {
                self.empty_hashes()
            }
        };
        let hashes = Arc::new(
            self.new_hashes(&current, which, text, mode)
                .map_err(|e| rejected(path, e))?,
        );
        if st.ops.iter().any(|o| Arc::ptr_eq(o, ops)) && !ops.global_filter {
            let next = st.clone();
            self.commit(&mut st, next, Some((ops, Arc::clone(&hashes))))?;
        }
        *ops.hashes.lock() = (self.id(), hashes);
        Ok(())
    }

    fn empty_hashes(&self) -> Hashes {
        Hashes {
            filter: FilterHash::empty(self.sites.len()),
            notrace: FilterHash::empty(self.sites.len()),
        }
    }

    /// Writes the global filter (the `set_ftrace_filter` file), which ops built with
    /// `global_filter()` follow. Errors as [`set_filter`](Self::set_filter).
    pub fn set_global_filter(&self, text: &str, mode: WriteMode) -> Result<(), Error> {
        self.set_global_hash(Which::Filter, text, mode)
    }

    /// Writes the global notrace hash (the `set_ftrace_notrace` file).
    pub fn set_global_notrace(&self, text: &str, mode: WriteMode) -> Result<(), Error> {
        self.set_global_hash(Which::Notrace, text, mode)
    }

    pub(crate) fn set_global_hash(
        &self,
        which: Which,
        text: &str,
        mode: WriteMode,
    ) -> Result<(), Error> {
        let path = which.file();
        self.check_not_in_callback(path)?;
        let mut st = self.lock();
        let hashes = self
            .new_hashes(&st.global, which, text, mode)
            .map_err(|e| rejected(path, e))?;
        if hashes == *st.global {
            // Nothing changes, so nothing is committed (a commit passes over every site: a
            // profiled program's start writes its empty filter and notrace).
            return Ok(());
        }
        let mut next = st.clone();
        next.global = Arc::new(hashes);
        self.commit(&mut st, next, None)
    }

    /// The global filter and notrace hashes.
    pub fn global_hashes(&self) -> Arc<Hashes> {
        Arc::clone(&self.lock().global)
    }

    /// The id `set_ftrace_pid` knows the calling thread by (its kernel thread id).
    #[inline]
    pub fn current_tid() -> u32 {
        thread::current_tid()
    }

    /// Writes `set_ftrace_pid` (thread ids; see [`current_tid`](Self::current_tid)).
    /// Errors, with nothing changed: [`Error::InvalidInput`] wrapping a [`FilterError`]
    /// (`NotAThreadId`, `ThreadIdOutOfRange`).
    pub fn set_pids(&self, text: &str, mode: WriteMode) -> Result<(), Error> {
        const PATH: &str = "set_ftrace_pid";
        self.check_not_in_callback(PATH)?;
        let mut st = self.lock();
        let pids =
            pid::parse_pids(&st.pids, text, mode).map_err(|e: FilterError| rejected(PATH, e))?;
        let mut next = st.clone();
        next.pids = pids;
        self.commit(&mut st, next, None)
    }

    /// The `set_ftrace_pid` list (sorted; empty means all threads).
    pub fn pids(&self) -> Vec<u32> {
        self.lock().pids.clone()
    }

    /// The `ftrace_enabled` switch: off, no callback runs (sites keep their refcounts).
    /// Switching off fails with [`Error::Busy`] while a `PERMANENT` ops is registered.
    pub fn set_function_tracing(&self, on: bool) -> Result<(), Error> {
        const PATH: &str = "ftrace_enabled";
        self.check_not_in_callback(PATH)?;
        let mut st = self.lock();
        if !on
            && st
                .ops
                .iter()
                .any(|o| o.flags().contains(OpsFlags::PERMANENT))
        {
            return Err(busy(PATH, "a PERMANENT ops is registered"));
        }
        let mut next = st.clone();
        next.enabled = on;
        self.commit(&mut st, next, None)
    }

    /// Whether function tracing is on.
    pub fn function_tracing(&self) -> bool {
        self.lock().enabled
    }

    /// The content of `available_filter_functions`: one `name [module]` line per site.
    pub fn available_filter_functions(&self) -> String {
        let mut out = String::new();
        for site in self.sites() {
            let _ = writeln!(out, "{} [{}]", site.name(), site.module());
        }
        out
    }

    /// The content of `enabled_functions`: each covered site as `name [module] (N)` and the
    /// kernel's flag columns, `" R"` (registers saved) and `" I"` (IPMODIFY), two spaces each
    /// when unset.
    pub fn enabled_functions(&self) -> String {
        let _st = self.lock(); // a consistent view: no commit in between
        let mut out = String::new();
        for site in self.sites() {
            let n = site.refcount();
            if n == 0 {
                continue;
            }
            let _ = writeln!(
                out,
                "{} [{}] ({n}){}{}",
                site.name(),
                site.module(),
                if site.wants_regs() { " R" } else { "  " },
                if site.is_ipmodify() { " I" } else { "  " },
            );
        }
        out
    }

    /// The content of `set_ftrace_filter` / `set_ftrace_notrace` for the global hashes.
    pub(crate) fn hash_listing(&self, which: Which) -> String {
        let global = self.global_hashes();
        let hash = match which {
            Which::Filter => &global.filter,
            Which::Notrace => &global.notrace,
        };
        if which == Which::Filter && hash.is_empty() {
            return "#### all functions enabled ####\n".to_owned();
        }
        let mut out = String::new();
        for i in hash.iter() {
            if let Some(site) = self.site(i) {
                let _ = writeln!(out, "{} [{}]", site.name(), site.module());
            }
        }
        out
    }
}
