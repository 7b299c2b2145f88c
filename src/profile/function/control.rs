//! The control side: `function_profile_enabled`, the option files and `tracing_thresh`,
//! each write a transaction (parse, register or swap the new run, and only then reset the
//! records and store the option); resets and the per-thread stat files' registration.

use super::*;

/// The state lock, for a control write. Inside a callback of the profiler's hook layer the
/// write must not wait (the lock's holder may be waiting for this very callback to end, in
/// an unregister's grace period): there it is taken only if free, else the write is
/// refused with [`Error::Busy`].
pub(super) fn lock_state_for_write<'a>(
    inner: &'a Inner,
    path: &str,
) -> Result<MutexGuard<'a, State>, Error> {
    if !inner.ftrace.in_callback() {
        return Ok(inner.lock_state());
    }
    inner.state.try_lock().ok_or_else(|| Error::Busy {
        path: path.to_owned(),
        reason: "the profiler is being changed by another thread".to_owned(),
    })
}

pub(super) fn set_enabled(inner: &Arc<Inner>, on: bool) -> Result<(), Error> {
    let mut st = lock_state_for_write(inner, "function_profile_enabled")?;
    if st.enabled == on {
        return Ok(());
    }
    if on {
        let opts = inner.written_options();
        start(inner, &mut st, opts)
    } else {
        stop(inner, &mut st)
    }
}

/// Starts a run with `opts`. Transactional: the ops is registered first, and only once that
/// succeeded are the records reset (a refused start keeps the last run's records readable).
/// A call that lands between the register and the reset is one made before the enable took
/// effect, and is not counted.
pub(super) fn start(inner: &Arc<Inner>, st: &mut State, opts: ProfileOptions) -> Result<(), Error> {
    let ops = build_ops(inner, opts);
    inner.ftrace.register(&ops)?;
    reset(inner);
    st.ops = Some(ops);
    st.run = opts;
    st.enabled = true;
    inner.run_timing.store(opts.timing, Ordering::Release);
    inner.enabled.store(true, Ordering::Release);
    Ok(())
}

pub(super) fn stop(inner: &Arc<Inner>, st: &mut State) -> Result<(), Error> {
    if let Some(ops) = st.ops.take()
        && let Err(e) = inner.ftrace.unregister(&ops)
    {
        st.ops = Some(ops);
        return Err(e);
    }
    st.enabled = false;
    inner.enabled.store(false, Ordering::Release);
    Ok(())
}

/// Stores `next` as the written options; a running profiler restarts with them (and so
/// resets its records) when they changed, or always with `restart` (the API's
/// [`FunctionProfiler::set_options`]; a control file write of the current value is no
/// change, as in the kernel). Transactional: the running ops is replaced by the new one in one
/// commit of the hook layer (the new one may take over the old one's graph slot), and only
/// after that succeeded are the records reset and the options stored. On error — no free
/// graph slot, a write from inside a callback — the options, the run and the records are
/// as they were.
pub(super) fn apply_options(
    inner: &Arc<Inner>,
    next: ProfileOptions,
    path: &str,
    restart: bool,
) -> Result<(), Error> {
    change_options(inner, path, restart, |_| next)
}

/// [`apply_options`] with the new options computed from the written ones **under the state
/// lock**: an option file changes one flag, and two files written at once must both land
/// (reading the options before the lock let the second write store the first's old value).
pub(super) fn change_options(
    inner: &Arc<Inner>,
    path: &str,
    restart: bool,
    change: impl FnOnce(ProfileOptions) -> ProfileOptions,
) -> Result<(), Error> {
    let mut st = lock_state_for_write(inner, path)?;
    let written = inner.written_options();
    let next = change(written);
    if written == next && !(restart && st.enabled) {
        return Ok(());
    }
    if st.enabled {
        let ops = build_ops(inner, next);
        match &st.ops {
            Some(old) => inner.ftrace.replace(old, &ops)?,
            None => inner.ftrace.register(&ops)?,
        }
        reset(inner);
        st.ops = Some(ops);
        st.run = next;
        inner.run_timing.store(next.timing, Ordering::Release);
    }
    inner.timing.store(next.timing, Ordering::Release);
    inner.graph_time.store(next.graph_time, Ordering::Release);
    inner.sleep_time.store(next.sleep_time, Ordering::Release);
    inner.call_paths.store(next.call_paths, Ordering::Release);
    Ok(())
}

pub(super) fn reset(inner: &Arc<Inner>) {
    inner.resets.fetch_add(1, Ordering::AcqRel);
    let mut gone = Vec::new();
    {
        let mut slots = inner.lock_slots();
        slots.retain(|s| {
            let alive = s.alive.load(Ordering::Acquire);
            if !alive {
                gone.push(s.index);
            }
            alive
        });
        slots.folded.clear();
        for s in slots.iter() {
            for r in s.counted.iter().chain(s.timed.iter()).chain(s.paths.iter()) {
                r.request_reset();
            }
            for d in s.dense_counted.iter().chain(s.dense_timed.iter()) {
                d.request_reset();
            }
        }
    }
    inner.orphans_counted.reset();
    inner.orphans_timed.reset();
    inner.cancelled.reset();
    // Exited threads' records are gone: so are their files.
    if let Some(fs) = tracefs_of(inner) {
        for index in gone {
            let _ = fs.0.stats().unregister(&format!("function{index}"));
        }
    }
}

pub(super) fn tracefs_of(inner: &Inner) -> Option<Arc<TracefsHandle>> {
    inner.fs.lock().as_ref().and_then(Weak::upgrade)
}

pub(super) fn register_thread_file(inner: &Arc<Inner>, index: usize) {
    if let Some(fs) = tracefs_of(inner) {
        let name = format!("function{index}");
        // Already there after a re-install: fine.
        let _ = fs.0.stats().register(FunctionStat {
            inner: Arc::downgrade(inner),
            which: Some(index),
            name,
        });
    }
}

/// `function_profile_enabled`.
pub(super) struct EnabledFile(pub(super) Weak<Inner>);

impl ControlFile for EnabledFile {
    fn mode(&self) -> Mode {
        Mode::ReadWrite
    }

    fn read(&self) -> String {
        let on = self
            .0
            .upgrade()
            .is_some_and(|i| i.enabled.load(Ordering::Acquire));
        format!("{}\n", u8::from(on))
    }

    fn write(&self, data: &[u8], _mode: WriteMode) -> Result<(), InputError> {
        let on = parse_bool(data)?;
        let inner = self
            .0
            .upgrade()
            .ok_or_else(|| InputError::Rejected("the profiler is gone".into()))?;
        set_enabled(&inner, on).map_err(|e| InputError::Rejected(Box::new(e)))
    }
}

#[derive(Clone, Copy)]
pub(super) enum OptionKind {
    GraphTime,
    SleepTime,
    Timing,
    CallPaths,
}

/// `options/graph-time`, `options/sleep-time`, `options/function-profile-timing`.
pub(super) struct OptionFile {
    pub(super) inner: Weak<Inner>,
    pub(super) which: OptionKind,
}

impl OptionFile {
    pub(super) fn flag<'a>(&self, inner: &'a Inner) -> &'a AtomicBool {
        match self.which {
            OptionKind::GraphTime => &inner.graph_time,
            OptionKind::SleepTime => &inner.sleep_time,
            OptionKind::Timing => &inner.timing,
            OptionKind::CallPaths => &inner.call_paths,
        }
    }

    /// The file's path, for errors.
    pub(super) fn path(&self) -> &'static str {
        match self.which {
            OptionKind::GraphTime => "options/graph-time",
            OptionKind::SleepTime => "options/sleep-time",
            OptionKind::Timing => "options/function-profile-timing",
            OptionKind::CallPaths => "options/function-profile-callpath",
        }
    }
}

impl ControlFile for OptionFile {
    fn mode(&self) -> Mode {
        Mode::ReadWrite
    }

    fn read(&self) -> String {
        let on = self
            .inner
            .upgrade()
            .is_some_and(|i| self.flag(&i).load(Ordering::Acquire));
        format!("{}\n", u8::from(on))
    }

    fn write(&self, data: &[u8], _mode: WriteMode) -> Result<(), InputError> {
        let on = crate::stat::parse_option(data)?;
        let inner = self
            .inner
            .upgrade()
            .ok_or_else(|| InputError::Rejected("the profiler is gone".into()))?;
        let which = self.which;
        change_options(&inner, self.path(), false, |mut next| {
            let flag = match which {
                OptionKind::GraphTime => &mut next.graph_time,
                OptionKind::SleepTime => &mut next.sleep_time,
                OptionKind::Timing => &mut next.timing,
                OptionKind::CallPaths => &mut next.call_paths,
            };
            *flag = on;
            next
        })
        .map_err(|e| InputError::Rejected(Box::new(e)))
    }
}
