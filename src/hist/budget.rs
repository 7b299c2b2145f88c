//! The memory budget of bounded tables: what a `size=` may cost, per table and per process.
//!
//! # Design
//!
//! A bounded table ([`HashHist::bounded`](super::HashHist::bounded), every hist trigger and
//! every `tracestat hist` spec) can hold `size` cells, and a cell's size depends on its
//! layout: 16 bytes for a plain counter, about 32 KiB for `hist=v.lhist(0,4096,1)`. The
//! kernel's `tracing_map` bounds its maps by `size` alone (at most 2^17 entries); with
//! bucket histograms in the cells that bound is not enough (131,072 cells of 32 KiB are
//! 4 GiB), so a table's *cost*, its cell bytes times `size`, is checked when it is built:
//!
//! - at most 256 MiB per table;
//! - at most 1 GiB for all bounded tables alive in the process
//!
//! (the two limits of [`TableBudget::global`], as its [`limits`](TableBudget::limits) give them).
//!
//! A table over either is refused with a [`HistError::Budget`](super::HistError::Budget)
//! that gives both figures, before
//! anything is allocated; through a spec (a trigger write, a `tracestat hist --spec`) that is
//! [`SpecErrorKind::OverBudget`](super::SpecErrorKind::OverBudget). The cost is the worst case: cells are allocated as keys
//! arrive, so a table usually uses far less. A table gives its share back when dropped.
//!
//! # Invariants
//!
//! - A budget's [`reserved`](TableBudget::reserved) is the sum of the costs of the bounded
//!   tables alive on it and never exceeds its limit for all tables (a reservation is one
//!   compare-and-swap; a dropped table gives its cost back).

use core::fmt;
use core::sync::atomic::{AtomicUsize, Ordering};

/// The most bytes of cells one bounded table may need (`size` × cell bytes).
const MAX_TABLE_BYTES: usize = 256 << 20;

/// The most bytes of cells all bounded tables alive in the process may need together.
const MAX_PROCESS_TABLE_BYTES: usize = 1 << 30;

/// The budget every [`HashHist`](super::HashHist) reserves from.
static GLOBAL: TableBudget = TableBudget::new(MAX_TABLE_BYTES, MAX_PROCESS_TABLE_BYTES);

/// A bounded table refused for its memory: what it would need, and the limit it is over
/// (the fields of [`HistError::Budget`](super::HistError::Budget)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BudgetError {
    /// Bytes of one cell.
    pub(crate) cell_bytes: usize,
    /// The table's `size` (cells).
    pub(crate) size: usize,
    /// Bytes already reserved by the other tables alive (0 when the table alone is over).
    pub(crate) reserved: usize,
    /// The limit exceeded: the per-table one ([`MAX_TABLE_BYTES`]) or, when `all_tables`,
    /// the one for all tables ([`MAX_PROCESS_TABLE_BYTES`]).
    pub(crate) limit: usize,
    /// Whether the limit exceeded is the one for all tables together.
    pub(crate) all_tables: bool,
}

impl BudgetError {
    /// The table's cost, `cell_bytes × size`.
    pub(crate) fn bytes(&self) -> u128 {
        self.cell_bytes as u128 * self.size as u128
    }
}

impl fmt::Display for BudgetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "table needs {} bytes ({}-byte cells x size={})",
            self.bytes(),
            self.cell_bytes,
            self.size
        )?;
        if self.all_tables {
            write!(
                f,
                " and {} are in use, over the {} MiB all tables may use",
                self.reserved,
                self.limit >> 20
            )
        } else {
            write!(f, ", over the {} MiB a table may use", self.limit >> 20)
        }
    }
}

/// An account of bounded tables' memory (see the module docs): [`TableBudget::global`] is
/// the process's.
#[derive(Debug)]
pub struct TableBudget {
    per_table: usize,
    all_tables: usize,
    reserved: AtomicUsize,
}

impl TableBudget {
    const fn new(per_table: usize, all_tables: usize) -> Self {
        TableBudget {
            per_table,
            all_tables,
            reserved: AtomicUsize::new(0),
        }
    }

    /// The process's budget, which every bounded [`HashHist`](super::HashHist) reserves from.
    pub fn global() -> &'static TableBudget {
        &GLOBAL
    }

    /// Bytes reserved now by the bounded tables alive.
    pub fn reserved(&self) -> usize {
        self.reserved.load(Ordering::Relaxed)
    }

    /// `(per table, all tables)`: the two limits, in bytes.
    pub fn limits(&self) -> (usize, usize) {
        (self.per_table, self.all_tables)
    }

    /// Checks what a table of `size` cells of `cell_bytes` costs against both limits, and
    /// reserves it.
    pub(crate) fn reserve(
        &'static self,
        cell_bytes: usize,
        size: usize,
    ) -> Result<Reservation, BudgetError> {
        let over = |reserved, limit, all_tables| BudgetError {
            cell_bytes,
            size,
            reserved,
            limit,
            all_tables,
        };
        let bytes = match cell_bytes.checked_mul(size) {
            Some(b) if b <= self.per_table => b,
            _ => return Err(over(0, self.per_table, false)),
        };
        let mut now = self.reserved.load(Ordering::Relaxed);
        loop {
            if now.saturating_add(bytes) > self.all_tables {
                return Err(over(now, self.all_tables, true));
            }
            match self.reserved.compare_exchange_weak(
                now,
                now + bytes,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    return Ok(Reservation {
                        budget: self,
                        bytes,
                    });
                }
                Err(seen) => now = seen,
            }
        }
    }
}

/// A table's share of a budget, given back when dropped.
#[derive(Debug)]
pub(crate) struct Reservation {
    budget: &'static TableBudget,
    bytes: usize,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget
            .reserved
            .fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a budget of its own (the global one is shared by every test of the binary).
    #[test]
    fn tables_share_the_budget_and_give_it_back() {
        static B: TableBudget = TableBudget::new(1000, 2500);
        let e = B.reserve(11, 100).unwrap_err();
        assert_eq!((e.limit, e.all_tables, e.reserved), (1000, false, 0));
        assert!(
            B.reserve(usize::MAX, 2).is_err(),
            "an overflowing cost is over"
        );
        let a = B.reserve(10, 100).unwrap();
        let b = B.reserve(10, 100).unwrap();
        assert_eq!(B.reserved(), 2000);
        let e = B.reserve(8, 100).unwrap_err();
        assert_eq!((e.limit, e.all_tables, e.reserved), (2500, true, 2000));
        assert!(e.to_string().contains("2000 are in use"), "{e}");
        let c = B.reserve(5, 100).unwrap();
        assert_eq!(B.reserved(), 2500);
        drop((a, c));
        assert_eq!(B.reserved(), 1000);
        assert!(B.reserve(10, 100).is_ok());
        drop(b);
        assert_eq!(B.reserved(), 0);
    }
}
