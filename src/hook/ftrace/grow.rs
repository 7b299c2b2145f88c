//! Sites added, retired and taken back while the instance runs: a shared object's
//! functions at its load, a function met at its first call, an object unloaded and the same
//! file loaded again. Each change goes through the instance's one commit (or, for a new
//! site, is published before the site's record is), so a site is never seen half covered.

use super::*;

impl Ftrace {
    /// Adds sites while the instance runs (the functions of a shared object loaded now, or a
    /// function met at its first call), indexed after every existing one; their indices.
    /// Each is covered at once by every registered ops whose filter selects all functions
    /// (an empty filter) and whose notrace does not name it: a filter written before a site
    /// existed does not name it (as the kernel's filters do not name the functions of a
    /// module loaded after them) until it is written again. Errors, with nothing added:
    /// [`Error::Busy`] from inside a callback of this instance, or if two `IPMODIFY` ops
    /// would cover a new site.
    pub fn add_sites(
        &self,
        defs: impl IntoIterator<Item = SiteDef>,
    ) -> Result<core::ops::Range<usize>, Error> {
        self.add_sites_with(defs, None)
    }

    /// [`add_sites`](Self::add_sites) for sites whose code `switch` owns: it is told when
    /// each one's coverage goes from no ops to some ([`SiteSwitch::enable`], before the
    /// covering state is published) and back ([`SiteSwitch::disable`], after the grace
    /// period); a new site covered at once is enabled before it is added. Errors: those of
    /// `add_sites`, and the switch's refusal to enable a new covered site, with nothing
    /// added.
    pub fn add_switched_sites(
        &self,
        defs: impl IntoIterator<Item = SiteDef>,
        switch: std::sync::Arc<dyn SiteSwitch>,
    ) -> Result<core::ops::Range<usize>, Error> {
        self.add_sites_with(defs, Some(switch))
    }

    fn add_sites_with(
        &self,
        defs: impl IntoIterator<Item = SiteDef>,
        switch: Option<std::sync::Arc<dyn SiteSwitch>>,
    ) -> Result<core::ops::Range<usize>, Error> {
        const PATH: &str = "available_filter_functions";
        self.check_not_in_callback(PATH)?;
        let _st = self.lock();
        let defs: Vec<SiteDef> = defs.into_iter().collect();
        // SAFETY: the published list is replaced (and the old one freed) only by a commit,
        // which needs the update lock this thread holds; it is never null.
        let published = unsafe { &*self.published.load(Ordering::Acquire) };
        let start = self.sites.len();
        let mut words = Vec::with_capacity(defs.len());
        for (k, def) in defs.iter().enumerate() {
            words.push(site_word(&published.entries, start + k, &def.name, false)?);
        }
        if let Some(switch) = &switch {
            let covered: Vec<usize> = (0..)
                .zip(&words)
                .filter(|(_, w)| w.0 != 0)
                .map(|(i, _)| i)
                .collect();
            if !covered.is_empty() {
                switch.enable(&covered)?;
            }
        }
        self.sites.reserve(defs.len());
        for (def, (word, direct)) in defs.into_iter().zip(words) {
            // The word before the site is published: a reader that finds it finds it
            // covered.
            let site = Box::new(Site::owned(def));
            let (entries, enabled) = (&published.entries, published.enabled);
            store_site(&site, word, direct, entries, enabled, self.general);
            self.sites.push(SiteRef::Owned(site));
        }
        if let Some(switch) = switch {
            self.switches.lock().add(start..self.sites.len(), switch);
        }
        Ok(start..self.sites.len())
    }

    /// Retires the sites at `indices` (their shared object is unloaded): no ops covers them
    /// while they are retired, and when this returns none of their callbacks is running or
    /// is called again until they are [revived](Self::revive_sites). Their records stay
    /// (with their index and their line in `available_filter_functions`), so nothing
    /// holding one dangles. Errors, with nothing changed: [`Error::NotFound`] for an index
    /// past the table, [`Error::Busy`] from inside a callback of this instance.
    pub fn retire_sites(&self, indices: impl IntoIterator<Item = usize>) -> Result<(), Error> {
        const PATH: &str = "available_filter_functions";
        self.check_not_in_callback(PATH)?;
        let mut st = self.lock();
        let indices: Vec<usize> = indices.into_iter().collect();
        if indices.iter().any(|&i| i >= self.sites.len()) {
            return Err(Error::NotFound {
                path: PATH.to_owned(),
            });
        }
        for &i in &indices {
            self.sites.retire(i);
        }
        let next = st.clone();
        self.commit(&mut st, next, None)
    }

    /// Takes back the retired sites at `indices` (their shared object is loaded again, as
    /// it was): each is covered again by every registered ops whose hashes select it (an
    /// empty filter, or one written while it was live that names it), and `switch` (the
    /// code of the object as loaded now, or none) switches the sites of `indices`, as
    /// [`add_switched_sites`](Self::add_switched_sites) would, in place of the one they had.
    /// Their records, index and line are the ones they had, so a profile's row of a
    /// function counts its calls across loads, and an object loaded and unloaded any
    /// number of times keeps one set of sites. Errors, with nothing changed:
    /// [`Error::NotFound`] for an index past the table or not retired, [`Error::Busy`] from
    /// inside a callback of this instance or if two `IPMODIFY` ops would cover one, and the
    /// switch's refusal to enable a covered site.
    pub fn revive_sites(
        &self,
        indices: core::ops::Range<usize>,
        switch: Option<std::sync::Arc<dyn SiteSwitch>>,
    ) -> Result<(), Error> {
        const PATH: &str = "available_filter_functions";
        self.check_not_in_callback(PATH)?;
        let mut st = self.lock();
        if indices.end > self.sites.len() || !indices.clone().all(|i| self.sites.is_retired(i)) {
            return Err(Error::NotFound {
                path: PATH.to_owned(),
            });
        }
        let old = self.switches.lock().replace(indices.clone(), switch);
        for i in indices.clone() {
            self.sites.revive(i);
        }
        let next = st.clone();
        let result = self.commit(&mut st, next, None);
        if result.is_err() {
            // The commit refused before publishing anything: undo the two changes above.
            for i in indices.clone() {
                self.sites.retire(i);
            }
            self.switches.lock().replace(indices, old);
        }
        result
    }

    /// Whether the site at `index` is retired (see [`retire_sites`](Self::retire_sites)).
    pub fn is_retired(&self, index: usize) -> bool {
        self.sites.is_retired(index)
    }
}
