//! The tracefs-style control surface: paths, permissions, listings, and every bad write the
//! kernel's `kstrtoul` refuses — each with a typed error naming the file, and no state change.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tracestat::stat::{
    BoolControl, ControlFile, DirEntry, Mode, ReadOnlyFile, StatTracer, Tracefs, UlongControl,
    WriteMode,
};
use tracestat::{Access, Error, InputError};

struct One;
impl StatTracer for One {
    type Entry = u8;
    fn name(&self) -> &str {
        "one"
    }
    fn start(&self) -> Option<u8> {
        Some(1)
    }
    fn next(&self, _: &u8, _: usize) -> Option<u8> {
        None
    }
    fn show(&self, e: &u8, out: &mut dyn fmt::Write) -> fmt::Result {
        writeln!(out, "entry {e}")
    }
}

fn populated() -> (Tracefs, Arc<BoolControl>, Arc<UlongControl>) {
    let fs = Tracefs::new();
    let enabled = BoolControl::new(false);
    let thresh = UlongControl::new(0, 0, u64::MAX);
    fs.add_file("function_profile_enabled", Arc::clone(&enabled))
        .unwrap();
    fs.add_file("tracing_thresh", Arc::clone(&thresh)).unwrap();
    fs.add_file("options/graph-time", BoolControl::new(true))
        .unwrap();
    fs.add_file(
        "available_filter_functions",
        ReadOnlyFile::new(|| "a\nb\n".to_owned()),
    )
    .unwrap();
    fs.stats().register(One).unwrap();
    (fs, enabled, thresh)
}

#[test]
fn boolean_controls_accept_kernel_forms_and_store_double_bang() {
    let (fs, enabled, _) = populated();
    for (input, expected) in [
        (&b"1"[..], true),
        (b"0", false),
        (b"1\n", true),
        (b"0\n", false),
        (b"7", true),
        (b"+1", true),
    ] {
        fs.write("function_profile_enabled", input).unwrap();
        assert_eq!(enabled.get(), expected, "{input:?}");
        let shown = if expected { "1\n" } else { "0\n" };
        assert_eq!(fs.read("function_profile_enabled").unwrap(), shown);
    }
    // `>>` is the same for a boolean.
    fs.append("function_profile_enabled", b"1").unwrap();
    assert!(enabled.get());
}

#[test]
fn bad_writes_are_typed_errors_naming_the_file_and_change_nothing() {
    let (fs, enabled, thresh) = populated();
    fs.write("function_profile_enabled", b"1").unwrap();
    fs.write("tracing_thresh", b"100").unwrap();
    let too_long = vec![b'1'; 65];
    type Check = fn(&InputError) -> bool;
    let cases: Vec<(&[u8], Check)> = vec![
        (b"", |e| matches!(e, InputError::Empty)),
        (b"abc", |e| {
            matches!(e, InputError::InvalidDigit { pos: 0, found: 'a' })
        }),
        (b"1x", |e| {
            matches!(e, InputError::InvalidDigit { pos: 1, found: 'x' })
        }),
        (b"-1", |e| matches!(e, InputError::Negative)),
        (&too_long, |e| {
            matches!(e, InputError::TooLong { len: 65, max: 64 })
        }),
        (b"\xff\xfe", |e| {
            matches!(e, InputError::NotUtf8 { valid_up_to: 0 })
        }),
        (b"0\n\n", |e| matches!(e, InputError::InvalidDigit { .. })),
        (b"99999999999999999999", |e| {
            matches!(e, InputError::Overflow)
        }),
    ];
    for path in ["function_profile_enabled", "tracing_thresh"] {
        for (input, check) in &cases {
            let before = fs.read(path).unwrap();
            let err = fs.write(path, input).unwrap_err();
            match &err {
                Error::InvalidInput { path: p, reason } => {
                    assert_eq!(p, path);
                    assert!(check(reason), "{path} {input:?}: wrong reason {reason:?}");
                    // The message names the file and the reason.
                    let msg = err.to_string();
                    assert!(msg.starts_with(path), "{msg}");
                    assert!(msg.contains(&reason.to_string()), "{msg}");
                }
                other => panic!("{path} {input:?}: {other:?}"),
            }
            assert_eq!(
                fs.read(path).unwrap(),
                before,
                "{path} {input:?} changed state"
            );
        }
    }
    assert!(enabled.get());
    assert_eq!(thresh.get(), 100);
}

#[test]
fn ranges_are_enforced() {
    let fs = Tracefs::new();
    let size = UlongControl::new(2048, 128, 131072);
    fs.add_file("size", Arc::clone(&size)).unwrap();
    let err = fs.write("size", b"127").unwrap_err();
    assert!(matches!(
        err,
        Error::InvalidInput {
            reason: InputError::OutOfRange {
                value: 127,
                min: 128,
                max: 131072
            },
            ..
        }
    ));
    assert_eq!(size.get(), 2048);
    fs.write("size", b"4096\n").unwrap();
    assert_eq!(size.get(), 4096);
}

#[test]
fn paths_permissions_and_listings() {
    let (fs, enabled, _) = populated();
    // Unknown paths.
    for p in [
        "nope",
        "options/nope",
        "trace_stat/nope",
        "a/../b",
        "options//graph-time",
    ] {
        assert!(matches!(fs.read(p), Err(Error::NotFound { .. })), "{p}");
        assert!(
            matches!(fs.write(p, b"1"), Err(Error::NotFound { .. })),
            "{p}"
        );
    }
    // Read-only files: stat files and the filter list.
    let err = fs.write("trace_stat/one", b"1").unwrap_err();
    assert!(matches!(
        err,
        Error::PermissionDenied {
            access: Access::Write,
            ..
        }
    ));
    assert_eq!(err.path(), "trace_stat/one");
    assert!(matches!(
        fs.write("available_filter_functions", b"a"),
        Err(Error::PermissionDenied { .. })
    ));
    // Directories.
    assert!(matches!(
        fs.read("options"),
        Err(Error::IsADirectory { .. })
    ));
    assert!(matches!(
        fs.write("trace_stat", b"1"),
        Err(Error::IsADirectory { .. })
    ));
    assert!(matches!(
        fs.list("tracing_thresh"),
        Err(Error::NotADirectory { .. })
    ));
    assert!(matches!(
        fs.list("trace_stat/one"),
        Err(Error::NotADirectory { .. })
    ));
    // Reads, with or without a leading slash.
    assert_eq!(fs.read("/trace_stat/one").unwrap(), "entry 1\n");
    assert_eq!(fs.read("available_filter_functions").unwrap(), "a\nb\n");
    // Listings.
    assert_eq!(
        fs.list("").unwrap(),
        vec![
            DirEntry::Dir("options".into()),
            DirEntry::Dir("trace_stat".into()),
            DirEntry::File("available_filter_functions".into()),
            DirEntry::File("function_profile_enabled".into()),
            DirEntry::File("tracing_thresh".into()),
        ]
    );
    assert_eq!(
        fs.list("trace_stat/").unwrap(),
        vec![DirEntry::File("one".into())]
    );
    assert_eq!(
        fs.list("options").unwrap(),
        vec![DirEntry::File("graph-time".into())]
    );
    assert!(!enabled.get());
}

#[test]
fn file_registration_is_checked() {
    let (fs, ..) = populated();
    let f = || BoolControl::new(false);
    assert!(matches!(
        fs.add_file("tracing_thresh", f()),
        Err(Error::AlreadyExists { .. })
    ));
    assert!(matches!(
        fs.add_file("options", f()),
        Err(Error::AlreadyExists { .. })
    ));
    for bad in [
        "",
        "/",
        "a//b",
        "./a",
        "a/..",
        "trace_stat/x",
        "tracing_thresh/x",
        "dir/",
    ] {
        assert!(
            matches!(fs.add_file(bad, f()), Err(Error::InvalidName { .. })),
            "{bad:?}"
        );
    }
    fs.remove_file("tracing_thresh").unwrap();
    assert!(matches!(
        fs.read("tracing_thresh"),
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        fs.remove_file("tracing_thresh"),
        Err(Error::NotFound { .. })
    ));
}

/// A write-only file that records the mode of every write, to check `>` versus `>>`.
struct Recorder {
    truncates: AtomicUsize,
    appends: AtomicUsize,
}
impl ControlFile for Recorder {
    fn mode(&self) -> Mode {
        Mode::WriteOnly
    }
    fn read(&self) -> String {
        unreachable!("the surface refuses reads of a write-only file")
    }
    fn write(&self, _: &[u8], mode: WriteMode) -> Result<(), InputError> {
        match mode {
            WriteMode::Truncate => &self.truncates,
            WriteMode::Append => &self.appends,
        }
        .fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

#[test]
fn write_modes_reach_the_file_and_write_only_files_refuse_reads() {
    let fs = Tracefs::new();
    let rec = Arc::new(Recorder {
        truncates: AtomicUsize::new(0),
        appends: AtomicUsize::new(0),
    });
    fs.add_file("sink", Arc::clone(&rec)).unwrap();
    fs.write("sink", b"x").unwrap();
    fs.append("sink", b"y").unwrap();
    fs.append("sink", b"z").unwrap();
    assert_eq!(rec.truncates.load(Ordering::Relaxed), 1);
    assert_eq!(rec.appends.load(Ordering::Relaxed), 2);
    assert!(matches!(
        fs.read("sink"),
        Err(Error::PermissionDenied {
            access: Access::Read,
            ..
        })
    ));
}

#[test]
fn a_hook_can_refuse_a_write() {
    let fs = Tracefs::new();
    let ctl = BoolControl::with_hook(false, |v| {
        if v {
            Err(InputError::Rejected("not now".into()))
        } else {
            Ok(())
        }
    });
    fs.add_file("guarded", Arc::clone(&ctl)).unwrap();
    let err = fs.write("guarded", b"1").unwrap_err();
    assert_eq!(err.to_string(), "guarded: invalid write: not now");
    assert!(!ctl.get());
}

#[test]
fn global_surface_is_one_instance() {
    assert!(std::ptr::eq(Tracefs::global(), Tracefs::global()));
}

/// A file whose writes conflict with the current state, as the profiler's do while another
/// thread changes it.
struct AlwaysBusy;
impl ControlFile for AlwaysBusy {
    fn mode(&self) -> Mode {
        Mode::ReadWrite
    }
    fn read(&self) -> String {
        "0\n".to_owned()
    }
    fn write(&self, _: &[u8], _: WriteMode) -> Result<(), InputError> {
        Err(InputError::Rejected(Box::new(Error::Busy {
            path: "switch".to_owned(),
            reason: "being changed by another thread".to_owned(),
        })))
    }
}

#[test]
fn a_busy_write_is_a_busy_error_naming_its_file_once() {
    let fs = Tracefs::new();
    fs.add_file("switch", Arc::new(AlwaysBusy)).unwrap();
    let e = fs.write("switch", b"1").unwrap_err();
    assert!(matches!(e, Error::Busy { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        "switch: busy: being changed by another thread"
    );
    assert_eq!(fs.read("switch").unwrap(), "0\n");
}
