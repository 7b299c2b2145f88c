//! A program stopped by a signal under `tracestat record`: Ctrl-C at the terminal (`SIGINT`
//! to the whole group), `kill` of the program, `kill` of `tracestat record` itself (passed
//! on): the profile is printed all the same and the program's death by the signal said; a
//! program handling the signal itself, a forked child killed by one, and a signal ignored
//! from the start (`nohup`) behave as without `tracestat record`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::{build_source, hits_of, scratch, tracestat_command};

/// `spin MARKER`: calls `f` until a signal ends it, writing its pid to MARKER after 1,000
/// calls; `handled MARKER`: the same with a `SIGINT` handler that ends the loop, then
/// returns; `child`: forks a child that spins, kills it with `SIGINT`, says how it died and
/// makes 10 calls; `hup MARKER`: as `spin`, and says whether `SIGHUP` is ignored.
const SPINNER: &str = r#"
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
static volatile sig_atomic_t stop;
__attribute__((noinline)) int f(int x) { return x + 1; }
__attribute__((noinline)) void on_int(int sig) { (void)sig; stop = 1; }
static void spin(const char *marker) {
  long s = 0;
  for (long i = 0; !stop; i++) {
    s += f((int)i);
    if (i == 1000 && marker) {
      FILE *m = fopen(marker, "w");
      if (m) { fprintf(m, "%d\n", (int)getpid()); fclose(m); }
    }
    if (i % 1000 == 0) usleep(100);
  }
}
int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "child")) {
    pid_t c = fork();
    if (c == 0) { spin(0); _exit(0); }
    usleep(100000);
    kill(c, SIGINT);
    int st;
    waitpid(c, &st, 0);
    printf("child %s\n", WIFSIGNALED(st) && WTERMSIG(st) == SIGINT ? "killed by SIGINT" : "survived");
    for (int i = 0; i < 10; i++) f(i);
    return 0;
  }
  if (argc > 1 && !strcmp(argv[1], "handled")) signal(SIGINT, on_int);
  if (argc > 1 && !strcmp(argv[1], "hup")) {
    struct sigaction old;
    sigaction(SIGHUP, 0, &old);
    printf("SIGHUP %s\n", old.sa_handler == SIG_IGN ? "ignored" : "not ignored");
    fflush(stdout);
  }
  spin(argc > 2 ? argv[2] : 0);
  puts("returned");
  return 0;
}
"#;

/// A scratch directory `name`, [`SPINNER`] built with `-finstrument-functions` in it, and
/// the path of its marker.
fn spinner(name: &str) -> (PathBuf, PathBuf, PathBuf) {
    let dir = scratch(name);
    let prog = build_source(&dir, "spinner", SPINNER, &["-finstrument-functions"]);
    let marker = dir.join("pid");
    (dir, prog, marker)
}

/// `tracestat record --timing 0 -- PROG ARGS...` in a process group of its own, its output
/// piped, with the stopping signals at their default whatever this process inherited (a
/// test run under `nohup` ignores `SIGHUP`, which `tracestat record` would then leave
/// ignored, as it must); `prepare` adjusts the command after that.
fn start(prog: &Path, args: &[&str], prepare: impl FnOnce(&mut Command)) -> Child {
    use std::os::unix::process::CommandExt as _;
    let mut cmd = tracestat_command();
    cmd.args(["record", "--timing", "0", "--"])
        .arg(prog)
        .args(args)
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: `signal` is async-signal-safe, as a `pre_exec` closure must be.
    unsafe {
        cmd.pre_exec(|| {
            for sig in [libc::SIGINT, libc::SIGQUIT, libc::SIGTERM, libc::SIGHUP] {
                libc::signal(sig, libc::SIG_DFL);
            }
            Ok(())
        });
    }
    prepare(&mut cmd);
    cmd.spawn().unwrap()
}

/// The pid the spinning program wrote to `marker` (waiting for it, 30 s at most).
fn spinning(marker: &Path, child: &mut Child) -> i32 {
    let start = Instant::now();
    loop {
        if let Some(pid) = std::fs::read_to_string(marker)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            return pid;
        }
        if start.elapsed() > Duration::from_secs(30) || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            panic!(
                "the program did not start spinning: {:?}",
                child_output(child)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `child`'s output once it has exited (30 s at most, else its process group is killed and
/// the test failed, saying what of the group was still running, thread by thread, and what
/// it had written: a hang is diagnosed from the failure alone).
fn child_output(child: &mut Child) -> Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(30) {
            let group = child.id().to_string();
            let ps = Command::new("ps")
                .args(["-eL", "-o", "pgid=,pid=,lwp=,stat=,wchan:32=,comm="])
                .output()
                .map(|o| {
                    let all = String::from_utf8_lossy(&o.stdout).into_owned();
                    let of_group = all
                        .lines()
                        .filter(|l| l.split_whitespace().next() == Some(&group));
                    of_group.map(|l| format!("{l}\n")).collect::<String>()
                })
                .unwrap_or_else(|e| format!("(ps: {e})"));
            kill(-(child.id() as i32), libc::SIGKILL);
            let out = collected(child);
            panic!("tracestat record still ran 30 s after the signal; its group:\n{ps}{out:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    collected(child)
}

/// What the exited `child` wrote, and its status.
fn collected(child: &mut Child) -> Output {
    let mut out = Vec::new();
    let mut err = Vec::new();
    use std::io::Read as _;
    child.stdout.take().unwrap().read_to_end(&mut out).unwrap();
    child.stderr.take().unwrap().read_to_end(&mut err).unwrap();
    Output {
        status: child.wait().unwrap(),
        stdout: out,
        stderr: err,
    }
}

/// Sends `sig` to `pid` (a negative pid: its process group).
fn kill(pid: i32, sig: i32) {
    // SAFETY: kill has no memory preconditions.
    assert_eq!(unsafe { libc::kill(pid, sig) }, 0, "kill({pid}, {sig})");
}

/// The profile (count only) of a run, checked: `f` counted past the marker's 1,000 calls,
/// `main` once, and the program's death by `name` said.
fn stopped_by(out: &Output, name: &str) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let table = stdout
        .strip_prefix("==> trace_stat/functions <==\n")
        .unwrap_or_else(|| panic!("no profile: {stdout} {stderr}"));
    let hits = hits_of(table);
    assert!(hits.get("f") > Some(&1000), "{table}");
    assert_eq!(hits.get("main"), Some(&1), "{table}");
    assert!(
        stderr.contains(&format!("failed: signal: {name}")),
        "{stderr}"
    );
}

#[test]
#[ignore = "needs gcc and the preload library"]
fn a_program_stopped_by_a_signal_still_prints_its_profile() {
    let (dir, prog, marker) = spinner("signals");
    // Ctrl-C at the terminal: SIGINT to the whole group (tracestat record and the program).
    let _ = std::fs::remove_file(&marker);
    let mut child = start(&prog, &["spin", marker.to_str().unwrap()], |_| ());
    spinning(&marker, &mut child);
    kill(-(child.id() as i32), libc::SIGINT);
    stopped_by(&child_output(&mut child), "2 (SIGINT)");
    // The program alone killed.
    let _ = std::fs::remove_file(&marker);
    let mut child = start(&prog, &["spin", marker.to_str().unwrap()], |_| ());
    let pid = spinning(&marker, &mut child);
    kill(pid, libc::SIGTERM);
    stopped_by(&child_output(&mut child), "15 (SIGTERM)");
    // tracestat record alone killed: it passes the signal on and prints the profile.
    for (sig, name) in [
        (libc::SIGTERM, "15 (SIGTERM)"),
        (libc::SIGHUP, "1 (SIGHUP)"),
    ] {
        let _ = std::fs::remove_file(&marker);
        let mut child = start(&prog, &["spin", marker.to_str().unwrap()], |_| ());
        spinning(&marker, &mut child);
        kill(child.id() as i32, sig);
        stopped_by(&child_output(&mut child), name);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "needs gcc and the preload library"]
fn signals_the_program_handles_or_ignores_are_left_to_it() {
    let (dir, prog, marker) = spinner("signals-own");
    // Its own SIGINT handler: the loop ends, the program returns.
    let mut child = start(&prog, &["handled", marker.to_str().unwrap()], |_| ());
    let pid = spinning(&marker, &mut child);
    kill(pid, libc::SIGINT);
    let out = child_output(&mut child);
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("returned\n"), "{stdout}");
    // The handler's one call: traced, or, where the signal landed inside a hook (the loop
    // is mostly hooks), counted in the note of calls not traced.
    let hits = hits_of(stdout.split_once("<==\n").unwrap().1);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let untraced = stderr.contains("1 calls made by signal handlers while a hook");
    assert_eq!(
        hits.get("on_int").copied().unwrap_or(0) + u64::from(untraced),
        1,
        "{stdout} {stderr}"
    );
    // A forked child killed by SIGINT dies of it; the program goes on.
    let mut child = start(&prog, &["child"], |_| ());
    let out = child_output(&mut child);
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("child killed by SIGINT\n"), "{stdout}");
    let hits = hits_of(stdout.split_once("<==\n").unwrap().1);
    assert_eq!(hits.get("f"), Some(&10), "{stdout}");
    // SIGHUP ignored from the start (`nohup`) stays ignored in the program; SIGTERM ends it.
    let _ = std::fs::remove_file(&marker);
    let mut child = start(&prog, &["hup", marker.to_str().unwrap()], |cmd| {
        use std::os::unix::process::CommandExt as _;
        // SAFETY: `signal` is async-signal-safe, as a `pre_exec` closure must be.
        unsafe {
            cmd.pre_exec(|| {
                libc::signal(libc::SIGHUP, libc::SIG_IGN);
                Ok(())
            });
        }
    });
    let pid = spinning(&marker, &mut child);
    kill(pid, libc::SIGHUP);
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        child.try_wait().unwrap().is_none(),
        "SIGHUP ended the program"
    );
    kill(pid, libc::SIGTERM);
    let out = child_output(&mut child);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("SIGHUP ignored\n"), "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}
