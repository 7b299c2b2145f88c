//! A loaded object's file as bytes, for reading its symbol tables and instrumentation
//! sections: mapped read-only, so that only the pages the reading touches come in (from the
//! page cache); read whole where the file cannot be mapped.
//!
//! Read whole, a 2 MB libc cost a profiled program's start-up about a millisecond (512
//! freshly faulted heap pages copied into) for the 100 KB of its symbol tables.
//!
//! # Invariants
//!
//! - A mapping is private and read-only, made of the file of an object the loader has
//!   mapped into this process, and unmapped once, when its [`FileBytes`] drops; no slice of
//!   it outlives that.

use std::ops::Deref;
use std::os::fd::AsRawFd;

/// A file's bytes: mapped, or read.
pub(crate) struct FileBytes(Bytes);

enum Bytes {
    /// A private read-only mapping of `len` (> 0) bytes at `ptr`.
    Mapped { ptr: *const u8, len: usize },
    /// The file read whole (an empty file, or a mapping refused).
    Read(Vec<u8>),
}

impl FileBytes {
    /// The bytes of the file at `path`, a loaded object's.
    pub(crate) fn open(path: &str) -> std::io::Result<Self> {
        let file = std::fs::File::open(path)?;
        let len = usize::try_from(file.metadata()?.len()).unwrap_or(0);
        if len > 0 {
            // SAFETY: a new private, read-only mapping of the open file's first `len` bytes
            // at an address the kernel picks, aliasing no memory of this process; `file` may
            // close after the call (the mapping keeps the file).
            let ptr = unsafe {
                libc::mmap(
                    core::ptr::null_mut(),
                    len,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE,
                    file.as_raw_fd(),
                    0,
                )
            };
            if ptr != libc::MAP_FAILED {
                let ptr = ptr.cast::<u8>().cast_const();
                return Ok(FileBytes(Bytes::Mapped { ptr, len }));
            }
        }
        std::fs::read(path).map(|data| FileBytes(Bytes::Read(data)))
    }
}

impl Deref for FileBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.0 {
            // SAFETY: the mapping is `len` readable bytes, live until `self` drops, and
            // nothing in this process writes it (read-only). It is the file of an object
            // the loader mapped for the process's code, which the process relies on not
            // changing under it as much as this reading does: a file changed in place
            // while loaded (not replaced, as installers do) breaks the program's own code.
            Bytes::Mapped { ptr, len } => unsafe { core::slice::from_raw_parts(*ptr, *len) },
            Bytes::Read(data) => data,
        }
    }
}

impl Drop for FileBytes {
    fn drop(&mut self) {
        if let Bytes::Mapped { ptr, len } = self.0 {
            // SAFETY: the mapping `open` made, unmapped once, here; every slice of it
            // borrowed `self`, so none is left.
            unsafe { libc::munmap(ptr.cast_mut().cast(), len) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_reads_as_its_bytes_mapped_or_not() {
        let dir = std::env::temp_dir().join(format!("tracestat-mapped-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (full, empty) = (dir.join("full"), dir.join("empty"));
        let bytes: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        std::fs::write(&full, &bytes).unwrap();
        std::fs::write(&empty, b"").unwrap();
        let mapped = FileBytes::open(full.to_str().unwrap()).unwrap();
        assert!(matches!(mapped.0, Bytes::Mapped { .. }));
        assert_eq!(&*mapped, &bytes[..]);
        // Nothing to map: read, empty.
        let none = FileBytes::open(empty.to_str().unwrap()).unwrap();
        assert!(matches!(none.0, Bytes::Read(_)));
        assert!(none.is_empty());
        let missing = FileBytes::open(dir.join("missing").to_str().unwrap());
        assert_eq!(
            missing.err().map(|e| e.kind()),
            Some(std::io::ErrorKind::NotFound)
        );
        // A directory opens but cannot be mapped or read: an error, as reading it was.
        assert!(FileBytes::open(dir.to_str().unwrap()).is_err());
        drop(mapped);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
