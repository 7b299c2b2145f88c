//! A thread's return stack: room for [`DEPTH`] frames, allocated when the thread's state is
//! made and never grown, its frames reached by pointer.
//!
//! # Why not a `Vec`
//!
//! The hooks push, read and pop its top at every call. Kept as a pointer one past the top
//! frame, the top frame is one displacement from one register, and a push or pop one
//! pointer step; a `Vec` keeps a length, which each of those turns into an address again
//! (a load of the buffer, a multiply by the frame's size): a dozen instructions a timed
//! call, which the timed path, bound by its instruction count, pays in time.
//!
//! # Invariants
//!
//! - `base <= top <= end = base + DEPTH`, all in (or one past) one allocation of `DEPTH`
//!   frames; the places `base..top` hold live frames, those above `top` nothing.
//! - Only the owning thread touches it (it lives in that thread's state), and the hooks'
//!   busy flag keeps a signal handler's hooks off it while a hook uses it.

use core::mem::MaybeUninit;

use crate::{DEPTH, Frame};

pub(crate) struct ReturnStack {
    /// One past the top frame.
    top: *mut Frame,
    /// The bottom frame's place.
    base: *mut Frame,
    /// One past the last place.
    end: *mut Frame,
}

impl ReturnStack {
    /// An empty stack with room for [`DEPTH`] frames.
    pub(crate) fn new() -> Self {
        let places: Box<[MaybeUninit<Frame>]> = Box::new_uninit_slice(DEPTH);
        let base = Box::into_raw(places).cast::<Frame>();
        ReturnStack {
            top: base,
            base,
            // SAFETY: one past the end of the allocation of `DEPTH` frames.
            end: unsafe { base.add(DEPTH) },
        }
    }

    /// Whether there is no room for another frame.
    #[inline(always)]
    pub(crate) fn is_full(&self) -> bool {
        self.top == self.end
    }

    /// The top frame, if any.
    #[inline(always)]
    pub(crate) fn last(&self) -> Option<&Frame> {
        // SAFETY: below a `top` above `base` is a live frame (the invariants), borrowed with
        // `self`.
        (self.top != self.base).then(|| unsafe { &*self.top.sub(1) })
    }

    /// Takes the top frame off, if any.
    #[inline(always)]
    pub(crate) fn pop(&mut self) -> Option<Frame> {
        if self.top == self.base {
            return None;
        }
        // SAFETY: the top frame is live (the invariants); lowering `top` past it first makes
        // its place empty, so it is read out exactly once.
        unsafe {
            self.top = self.top.sub(1);
            Some(self.top.read())
        }
    }

    /// The place one past the top frame, where a push writes: a frame written there whole
    /// (its every field) becomes the top with [`pushed`](Self::pushed).
    ///
    /// # Safety
    ///
    /// The stack is not full.
    #[inline(always)]
    pub(crate) unsafe fn next_place(&mut self) -> *mut Frame {
        debug_assert!(!self.is_full());
        self.top
    }

    /// Makes the frame written whole at [`next_place`](Self::next_place) the top.
    ///
    /// # Safety
    ///
    /// The stack was not full, and the place one past its top holds a whole frame, written
    /// since the stack last changed.
    #[inline(always)]
    pub(crate) unsafe fn pushed(&mut self) {
        debug_assert!(!self.is_full());
        // SAFETY: below `end` (the contract), so at most `end`.
        self.top = unsafe { self.top.add(1) };
    }

    /// Pushes `frame`, written in place.
    ///
    /// # Safety
    ///
    /// The stack is not full.
    #[inline(always)]
    pub(crate) unsafe fn push_unchecked(&mut self, frame: Frame) {
        // SAFETY: not full (the contract): the place past the top is in the allocation and
        // holds nothing; written whole, it becomes the top.
        unsafe {
            self.next_place().write(frame);
            self.pushed();
        }
    }

    /// Takes the top frame off a stack known not to be empty.
    ///
    /// # Safety
    ///
    /// The stack holds at least one frame.
    #[inline(always)]
    pub(crate) unsafe fn pop_unchecked(&mut self) -> Frame {
        debug_assert!(self.top != self.base);
        // SAFETY: as in `pop`, the top frame live (the contract).
        unsafe {
            self.top = self.top.sub(1);
            self.top.read()
        }
    }

    /// The frames, bottom first.
    fn as_slice(&self) -> &[Frame] {
        // SAFETY: `base..top` are live frames of one allocation (the invariants), borrowed
        // with `self`.
        unsafe { core::slice::from_raw_parts(self.base, self.top.offset_from_unsigned(self.base)) }
    }

    /// The frames, bottom first, mutably.
    fn as_mut_slice(&mut self) -> &mut [Frame] {
        // SAFETY: as in `as_slice`, borrowed mutably with `self`.
        unsafe {
            core::slice::from_raw_parts_mut(self.base, self.top.offset_from_unsigned(self.base))
        }
    }
}

/// The frames as a slice, bottom first (what the hooks' rarer paths walk and index).
impl core::ops::Deref for ReturnStack {
    type Target = [Frame];

    fn deref(&self) -> &[Frame] {
        self.as_slice()
    }
}

impl core::ops::DerefMut for ReturnStack {
    fn deref_mut(&mut self) -> &mut [Frame] {
        self.as_mut_slice()
    }
}

impl Drop for ReturnStack {
    fn drop(&mut self) {
        // Frames left (none where the thread's state ends them first) end bottom first, as a
        // `Vec`'s would; then the places go.
        // SAFETY: `base..top` are live frames, dropped once here; the places are the
        // allocation `new` made of `DEPTH` of them, freed once.
        unsafe {
            core::ptr::drop_in_place(self.as_mut_slice());
            drop(Box::from_raw(core::ptr::slice_from_raw_parts_mut(
                self.base.cast::<MaybeUninit<Frame>>(),
                DEPTH,
            )));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame told apart by `n`.
    fn frame(n: usize) -> Frame {
        crate::cyg_frame(n, 1_000_000 - n, n)
    }

    /// Last in, first out, to `DEPTH` frames and back; the slice view bottom first; a stack
    /// dropped with frames left frees them.
    #[test]
    fn frames_push_and_pop_in_order_to_the_depth() {
        let mut stack = ReturnStack::new();
        assert!(stack.last().is_none() && stack.pop().is_none() && stack.is_empty());
        for n in 0..DEPTH {
            assert!(!stack.is_full());
            // SAFETY: not full (just checked).
            unsafe { stack.push_unchecked(frame(n)) };
            assert_eq!(stack.last().map(|f| f.func), Some(n));
        }
        assert!(stack.is_full());
        assert_eq!(stack.len(), DEPTH);
        assert!(
            stack
                .iter()
                .enumerate()
                .all(|(i, f)| f.func == i && f.sp == i)
        );
        stack.last_mut().unwrap().sp = 7;
        assert_eq!(stack[DEPTH - 1].sp, 7);
        for n in (1..DEPTH).rev() {
            // SAFETY: `n + 1` frames are on the stack.
            assert_eq!(unsafe { stack.pop_unchecked() }.func, n);
            assert!(!stack.is_full());
        }
        assert_eq!(stack.pop().map(|f| f.func), Some(0));
        assert!(stack.pop().is_none());
        for n in 0..3 {
            // SAFETY: far from full.
            unsafe { stack.push_unchecked(frame(n)) };
        }
        drop(stack);
    }
}
