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
//! - at most [`MAX_TABLE_BYTES`] (256 MiB) per table;
//! - at most [`MAX_PROCESS_TABLE_BYTES`] (1 GiB) for all bounded tables alive in the process.
//!
//! A table over either is refused with a [`BudgetError`] that gives both figures, before
//! anything is allocated; through a spec (a trigger write, a `tracestat hist --spec`) that is
//! [`SpecErrorKind::OverBudget`](super::SpecErrorKind::OverBudget). The cost is the worst case: cells are allocated as keys
//! arrive, so a table usually uses far less. A table gives its share back when dropped.
//!
//! # Invariants
//!
//! - [`TableBudget::reserved`] is the sum of the costs of the bounded tables alive, and
//!   never exceeds [`MAX_PROCESS_TABLE_BYTES`] (reservations are one compare-and-swap).

use core::fmt;
use core::sync::atomic::{AtomicUsize, Ordering};

/// The most bytes of cells one bounded table may need (`size` × cell bytes).
pub const MAX_TABLE_BYTES: usize = 256 << 20;

/// The most bytes of cells all bounded tables alive in the process may need together.
pub const MAX_PROCESS_TABLE_BYTES: usize = 1 << 30;

/// Bytes reserved by the bounded tables alive.
static RESERVED: AtomicUsize = AtomicUsize::new(0);

/// A bounded table refused for its memory: what it would need, and the limit it is over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetError {
    /// Bytes of one cell.
    pub cell_bytes: usize,
    /// The table's `size` (cells).
    pub size: usize,
    /// Bytes already reserved by the other tables alive (0 when the table alone is over).
    pub reserved: usize,
    /// The limit exceeded: [`MAX_TABLE_BYTES`] or [`MAX_PROCESS_TABLE_BYTES`].
    pub limit: usize,
}

impl BudgetError {
    /// The table's cost, `cell_bytes × size`.
    pub fn bytes(&self) -> u128 {
        self.cell_bytes as u128 * self.size as u128
    }
}

impl fmt::Display for BudgetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.limit == MAX_TABLE_BYTES {
            write!(
                f,
                "table needs {} bytes ({}-byte cells x size={}), over the {} MiB a table may use",
                self.bytes(),
                self.cell_bytes,
                self.size,
                MAX_TABLE_BYTES >> 20
            )
        } else {
            write!(
                f,
                "table needs {} bytes ({}-byte cells x size={}) and {} are in use, over the {} MiB all tables may use",
                self.bytes(),
                self.cell_bytes,
                self.size,
                self.reserved,
                MAX_PROCESS_TABLE_BYTES >> 20
            )
        }
    }
}

impl std::error::Error for BudgetError {}

/// The process-wide account of bounded tables' memory (see the module docs).
#[derive(Debug)]
pub struct TableBudget(());

impl TableBudget {
    /// Bytes reserved now by the bounded tables alive.
    pub fn reserved() -> usize {
        RESERVED.load(Ordering::Relaxed)
    }

    /// Checks what a table of `size` cells of `cell_bytes` costs against both limits, and
    /// reserves it.
    pub(crate) fn reserve(cell_bytes: usize, size: usize) -> Result<Reservation, BudgetError> {
        let over = |reserved, limit| BudgetError {
            cell_bytes,
            size,
            reserved,
            limit,
        };
        let bytes = match cell_bytes.checked_mul(size) {
            Some(b) if b <= MAX_TABLE_BYTES => b,
            _ => return Err(over(0, MAX_TABLE_BYTES)),
        };
        let mut now = RESERVED.load(Ordering::Relaxed);
        loop {
            if now + bytes > MAX_PROCESS_TABLE_BYTES {
                return Err(over(now, MAX_PROCESS_TABLE_BYTES));
            }
            match RESERVED.compare_exchange_weak(
                now,
                now + bytes,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(Reservation(bytes)),
                Err(seen) => now = seen,
            }
        }
    }
}

/// A table's share of the budget, given back when dropped.
#[derive(Debug)]
pub(crate) struct Reservation(usize);

impl Drop for Reservation {
    fn drop(&mut self) {
        RESERVED.fetch_sub(self.0, Ordering::Relaxed);
    }
}
