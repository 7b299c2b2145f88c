//! The HTTP endpoint (feature `http`): every stat file, control file, metric and profile of
//! a process, served on a background thread.
//!
//! ```no_run
//! // Serves Tracefs::global() and the global function profiler until `server` is dropped.
//! let server = tracestat::http::Server::bind("127.0.0.1:9099").serve()?;
//! println!("serving http://{}/", server.local_addr());
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Routes
//!
//! | request | response |
//! | --- | --- |
//! | `GET /` | an index of every file: HTML when `Accept` has `text/html`, else one path a line |
//! | `GET /<path>` | the file, byte for byte what [`Tracefs::read`] returns; a directory lists its entries (`name` or `name/` a line) |
//! | `GET /<path>?format=json` | a stat file's typed data (`tracestat.stat_typed`, or text rows for providers without typed data), a control file's content (`tracestat.file`), a directory (`tracestat.directory`); see [`crate::export`] |
//! | `PUT /<path>` | `echo body > path` ([`Tracefs::write`]): `204`, or the error |
//! | `POST /<path>?append=1` | `echo body >> path` ([`Tracefs::append`]) |
//! | `GET /metrics` | the function profiler as Prometheus text 0.0.4, or OpenMetrics 1.0 when `Accept` has `application/openmetrics-text` |
//! | `GET /debug/pprof/` | the profile index |
//! | `GET /debug/pprof/allocs` | a gzipped pprof of each traced function's own allocations (`alloc_objects`, `alloc_space`) since the allocation stats were last reset ([`FunctionAlloc`]); cumulative, as Go's |
//! | `GET /debug/pprof/profile?seconds=N` | a gzipped pprof of the calls made in the next N seconds (default 30): the difference of the profiler's records after and before; `409` while another runs or while the profiler is off |
//!
//! The other paths under `/debug/pprof/` (`goroutine`, `mutex`, `block`, ...) answer `404`
//! with a text body: fleet scrapers (Grafana Alloy's `pyroscope.scrape`, Parca) poll Go's
//! five default paths and take `profile` and `allocs` from here. `/metrics` also carries
//! the allocation stats' own counts (`tracestat_function_alloc_*_total{function=...}`).
//!
//! `HEAD` is answered as `GET` without the body. `/metrics` and `/debug/pprof/...` shadow
//! tracefs files of those names.
//!
//! # Status codes
//!
//! `400` malformed request, bad path (not UTF-8 after decoding, a control character, a `.`
//! or `..` component), bad query value, or a write the file refused (the body is the typed
//! error's message and nothing changed); `401` a write without the token; `403` writes
//! disabled, or a read-only file; `404` no such file; `405` another method (with `Allow`);
//! `408` the request did not arrive in time; `409` a profile is already running; `413` body
//! too large; `431` headers too large or too many; `501` a `Transfer-Encoding`; `503` over
//! the connection limit, or shutting down during a profile.
//!
//! # Security (the invariants)
//!
//! The control surface changes what the process does, so:
//!
//! - [`ServerBuilder::serve`] refuses an address that is not loopback unless
//!   [`allow_remote`](ServerBuilder::allow_remote) says otherwise;
//! - writes are refused with `403` unless [`allow_writes`](ServerBuilder::allow_writes);
//!   with a [`token`](ServerBuilder::token) they also need `Authorization: Bearer <token>`,
//!   compared in constant time (the token's length is not secret);
//! - each request's line and headers, body, and time to arrive are bounded
//!   ([`max_header_bytes`](ServerBuilder::max_header_bytes),
//!   [`max_body_bytes`](ServerBuilder::max_body_bytes),
//!   [`request_timeout`](ServerBuilder::request_timeout)), so is the number of connections
//!   served at once ([`max_connections`](ServerBuilder::max_connections); those over it get
//!   a `503` and are counted in `tracestat_http_connections_refused_total`), and so is a
//!   profile's length ([`max_profile_seconds`](ServerBuilder::max_profile_seconds));
//! - a response is written within `request_timeout` as a whole, so a client that reads a
//!   trickle holds its connection no longer than one that reads nothing; its size is
//!   bounded ([`max_response_bytes`](ServerBuilder::max_response_bytes); the index lists at
//!   most 1000 files);
//! - reading changes nothing: a `GET` of any path, a profile window included, never
//!   switches, resets or reconfigures anything, so a client without write permission
//!   changes no state.
//!
//! # Map
//!
//! Synchronous and small: one accept thread (this file, with the [`ServerBuilder`]) and one
//! short-lived thread per connection (at most `max_connections`), each serving exactly one
//! request.
//!
//! - `conn.rs`: one connection — `httparse` parses the request, the file enforces the limits
//!   around it and writes the response against its deadline.
//! - `route.rs`: [`Router::route`], a pure function of the parsed request (shared with the
//!   fuzz target). Reads take the same snapshots as the library's own readers, so a request
//!   never blocks the profiled threads (but one that forks: it waits for the requests at
//!   work, see `fork.rs`).
//! - `window.rs`: the profile windows of `/debug/pprof/profile`, differences of the records.
//! - `fork.rs`: a fork waits for the requests in progress, so that a child never inherits a
//!   lock a request held.
//!
//! Dropping the [`Server`] stops the accept thread and ends a running profile window early;
//! requests in flight finish within their limits.

mod conn;
mod fork;
mod route;
mod window;

use crate::primitive::unmodeled::Arc;
use crate::primitive::unmodeled::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::thread::JoinHandle;
use std::time::Duration;

pub use route::{Response, Router};

use crate::alloc::FunctionAlloc;
use crate::export::Profile;
use crate::profile::{FunctionProfiler, ProfilerHandle};
use crate::stat::Tracefs;

/// The limits of one connection.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) max_header_bytes: usize,
    pub(crate) max_body_bytes: usize,
    pub(crate) request_timeout: Duration,
}

/// Options of a [`Server`], from [`Server::bind`].
pub struct ServerBuilder {
    addrs: io::Result<Vec<SocketAddr>>,
    fs: Option<Arc<Tracefs>>,
    profiler: Option<window::ProfileSource>,
    allocations: Option<&'static FunctionAlloc>,
    allow_writes: bool,
    token: Option<Vec<u8>>,
    allow_remote: bool,
    max_connections: usize,
    limits: Limits,
    max_profile_seconds: u64,
    max_response_bytes: usize,
    hints: Hints,
}

/// How refusals name the switches that lift them (see [`ServerBuilder::refusal_hints`]).
#[derive(Debug, Clone)]
pub(crate) struct Hints {
    pub(crate) writes: String,
    pub(crate) remote: String,
}

impl Default for Hints {
    fn default() -> Self {
        Hints {
            writes: "the embedding program enables them with ServerBuilder::allow_writes"
                .to_owned(),
            remote: "the endpoint serves other hosts only when the embedding program allows \
                     it with ServerBuilder::allow_remote"
                .to_owned(),
        }
    }
}

impl std::fmt::Debug for ServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token stays out of logs.
        f.debug_struct("ServerBuilder")
            .field("addrs", &self.addrs)
            .field("allow_writes", &self.allow_writes)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("allow_remote", &self.allow_remote)
            .field("max_connections", &self.max_connections)
            .field("limits", &self.limits)
            .field("max_profile_seconds", &self.max_profile_seconds)
            .field("max_response_bytes", &self.max_response_bytes)
            .finish_non_exhaustive()
    }
}

/// A running endpoint; dropping it shuts it down.
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    /// The listening socket, owned by the accept thread.
    #[cfg(unix)]
    fd: std::os::fd::RawFd,
    stop: Arc<AtomicBool>,
    refused: Arc<AtomicU64>,
    accept: Option<JoinHandle<()>>,
}

impl Server {
    /// Options for an endpoint on `addr` (`"127.0.0.1:9099"`, or port 0 for any free
    /// port); [`ServerBuilder::serve`] starts it. By default it serves [`Tracefs::global`]
    /// with [`FunctionProfiler::global`] and the branch profiler's files
    /// ([`BranchCounts::register_stats`](crate::profile::BranchCounts::register_stats)) on it, read-only.
    pub fn bind(addr: impl ToSocketAddrs) -> ServerBuilder {
        ServerBuilder {
            addrs: addr.to_socket_addrs().map(Iterator::collect),
            fs: None,
            profiler: None,
            allocations: None,
            allow_writes: false,
            token: None,
            allow_remote: false,
            max_connections: 64,
            limits: Limits {
                max_header_bytes: 16 << 10,
                max_body_bytes: 64 << 10,
                request_timeout: Duration::from_secs(10),
            },
            max_profile_seconds: 60,
            max_response_bytes: 16 << 20,
            hints: Hints::default(),
        }
    }

    /// The address the endpoint listens on (with the port chosen for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections closed unserved so far because the connection limit was reached.
    pub fn connections_refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Stops accepting connections and waits for the accept thread; what [`Drop`] does.
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        let Some(accept) = self.accept.take() else {
            return;
        };
        self.stop.store(true, Ordering::Release);
        // Wake the blocking accept with a connection of our own.
        let ip = match self.addr.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        let woke = TcpStream::connect_timeout(
            &SocketAddr::new(ip, self.addr.port()),
            Duration::from_secs(1),
        );
        if woke.is_ok() {
            let _ = accept.join();
        }
        // Otherwise the thread ends at its next connection; it holds nothing of ours.
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// The listening socket's descriptor, which stays the server's: for a process that forks,
/// whose child closes its copy so as not to keep the port bound (the accept thread does not
/// survive a fork; `exec` closes it anyway, it is close-on-exec).
#[cfg(unix)]
impl std::os::fd::AsRawFd for Server {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.fd
    }
}

impl ServerBuilder {
    /// Serves `fs` instead of [`Tracefs::global`] (and then no profiler unless
    /// [`profiler`](Self::profiler) names one).
    pub fn tracefs(mut self, fs: &Arc<Tracefs>) -> Self {
        self.fs = Some(Arc::clone(fs));
        self
    }

    /// The function profiler behind `/metrics` and `/debug/pprof/profile` (see
    /// [`FunctionProfiler::handle`]).
    pub fn profiler(mut self, profiler: ProfilerHandle) -> Self {
        self.profiler = Some(window::ProfileSource::Profiler(profiler));
        self
    }

    /// Serves `/metrics` and `/debug/pprof/profile` from `read`, which returns cumulative
    /// records that another part of the program keeps (a replay's tables, a profile it
    /// assembles): each profile window is the difference of two reads, and nothing is
    /// switched or reset. Replaces [`profiler`](Self::profiler).
    pub fn profile_from(mut self, read: impl Fn() -> Profile + Send + Sync + 'static) -> Self {
        self.profiler = Some(window::ProfileSource::Read(Arc::new(read)));
        self
    }

    /// The per-function allocation stats behind `/debug/pprof/allocs` and the
    /// `tracestat_function_alloc_*` metrics (by default, with the global surface,
    /// [`FunctionAlloc::global`]; with [`tracefs`](Self::tracefs), none unless named here).
    pub fn allocations(mut self, stats: &'static FunctionAlloc) -> Self {
        self.allocations = Some(stats);
        self
    }

    /// Whether `PUT` and `POST` may write control files (default `false`: `403`).
    pub fn allow_writes(mut self, allow: bool) -> Self {
        self.allow_writes = allow;
        self
    }

    /// Requires `Authorization: Bearer <token>` on writes. An empty token is refused by
    /// [`serve`](Self::serve).
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into().into_bytes());
        self
    }

    /// Whether an address that is not loopback may be served (default `false`: only
    /// `127.0.0.0/8` and `::1`).
    pub fn allow_remote(mut self, allow: bool) -> Self {
        self.allow_remote = allow;
        self
    }

    /// Most connections served at once (default 64, at least 1); more get `503`.
    pub fn max_connections(mut self, n: usize) -> Self {
        self.max_connections = n.max(1);
        self
    }

    /// Most bytes of request line and headers (default 16 KiB); more get `431`.
    pub fn max_header_bytes(mut self, n: usize) -> Self {
        self.limits.max_header_bytes = n.max(64);
        self
    }

    /// Most bytes of a request body (default 64 KiB); more get `413`.
    pub fn max_body_bytes(mut self, n: usize) -> Self {
        self.limits.max_body_bytes = n;
        self
    }

    /// Time for a request to arrive, and again for its whole response to be written
    /// (default 10 s); a request not in by then gets `408`, a response not read by then is
    /// cut off (the connection closes).
    pub fn request_timeout(mut self, d: Duration) -> Self {
        self.limits.request_timeout = d.max(Duration::from_millis(1));
        self
    }

    /// Longest profile a request may ask for (default 60 s); longer gets `400`. 0 disables
    /// profile requests.
    pub fn max_profile_seconds(mut self, s: u64) -> Self {
        self.max_profile_seconds = s;
        self
    }

    /// Most bytes of a response body (default 16 MiB); a larger one is answered with `500`
    /// and a message naming this limit. The index (`GET /`) lists at most 1000 files and
    /// then says how many more there are.
    pub fn max_response_bytes(mut self, n: usize) -> Self {
        self.max_response_bytes = n.max(4096);
        self
    }

    /// How refusals name the switches that lift them, in the terms of the program that
    /// embeds the endpoint (a command line names its flags): `writes` ends the `403` of a
    /// write while writes are disabled ("writes are disabled on this endpoint: {writes}"),
    /// `remote` the error of [`serve`](Self::serve) for an address that is not loopback.
    /// By default they name [`allow_writes`](Self::allow_writes) and
    /// [`allow_remote`](Self::allow_remote).
    pub fn refusal_hints(mut self, writes: impl Into<String>, remote: impl Into<String>) -> Self {
        self.hints = Hints {
            writes: writes.into(),
            remote: remote.into(),
        };
        self
    }

    fn build_router(&self, stop: Arc<AtomicBool>, refused: Arc<AtomicU64>) -> Router {
        let (fs, profiler, allocations) = match &self.fs {
            Some(fs) => (Arc::clone(fs), self.profiler.clone(), self.allocations),
            None => {
                let global = FunctionProfiler::global().handle();
                // The branch profiler's files too, once per process.
                static BRANCH_FILES: crate::primitive::unmodeled::OnceLock<()> =
                    crate::primitive::unmodeled::OnceLock::new();
                Tracefs::global_instance(
                    &BRANCH_FILES,
                    || (),
                    |(), fs| crate::profile::BranchCounts::register_stats(fs),
                );
                (
                    Arc::clone(Tracefs::global()),
                    Some(
                        self.profiler
                            .clone()
                            .unwrap_or(window::ProfileSource::Profiler(global)),
                    ),
                    Some(self.allocations.unwrap_or_else(FunctionAlloc::global)),
                )
            }
        };
        Router {
            fs,
            profiler,
            allocations,
            allow_writes: self.allow_writes,
            token: self.token.clone(),
            max_profile_seconds: self.max_profile_seconds,
            max_response_bytes: self.max_response_bytes,
            writes_hint: self.hints.writes.clone(),
            profiling: AtomicBool::new(false),
            stop,
            refused,
        }
    }

    /// The routes alone, without a socket: for mounting them in another server, or for
    /// tests.
    pub fn router(self) -> Router {
        self.build_router(Arc::default(), Arc::default())
    }

    /// Binds and starts serving on a background thread.
    ///
    /// Fails with [`io::ErrorKind::PermissionDenied`] for an address that is not loopback
    /// without [`allow_remote`](Self::allow_remote), [`io::ErrorKind::InvalidInput`] for an
    /// empty token or an address that does not resolve, and with the socket's error when
    /// binding fails.
    pub fn serve(self) -> io::Result<Server> {
        let addrs = match &self.addrs {
            Ok(a) if !a.is_empty() => a.clone(),
            Ok(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "the address resolves to nothing",
                ));
            }
            Err(e) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("bad address: {e}"),
                ));
            }
        };
        if let Some(a) = addrs.iter().find(|a| !a.ip().is_loopback())
            && !self.allow_remote
        {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{a} is not a loopback address: {}", self.hints.remote),
            ));
        }
        if self.token.as_ref().is_some_and(Vec::is_empty) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the token is empty",
            ));
        }
        #[cfg(unix)]
        fork::install()?;
        let listener = TcpListener::bind(&addrs[..])?;
        let addr = listener.local_addr()?;
        #[cfg(unix)]
        let fd = std::os::fd::AsRawFd::as_raw_fd(&listener);
        let stop = Arc::new(AtomicBool::new(false));
        let refused = Arc::new(AtomicU64::new(0));
        let router = Arc::new(self.build_router(Arc::clone(&stop), Arc::clone(&refused)));
        let limits = self.limits;
        let max = self.max_connections;
        let stop2 = Arc::clone(&stop);
        let refused2 = Arc::clone(&refused);
        let accept = std::thread::Builder::new()
            .name("tracestat-http".into())
            .spawn(move || accept_loop(listener, router, limits, max, stop2, refused2))?;
        Ok(Server {
            addr,
            #[cfg(unix)]
            fd,
            stop,
            refused,
            accept: Some(accept),
        })
    }
}

/// Decrements the count of active connections when a connection thread ends.
struct Active(Arc<AtomicUsize>);

impl Drop for Active {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

fn accept_loop(
    listener: TcpListener,
    router: Arc<Router>,
    limits: Limits,
    max: usize,
    stop: Arc<AtomicBool>,
    refused: Arc<AtomicU64>,
) {
    let active = Arc::new(AtomicUsize::new(0));
    loop {
        let accepted = listener.accept();
        if stop.load(Ordering::Acquire) {
            return;
        }
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(_) => {
                // Out of file descriptors and the like: let it pass rather than spin.
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        if active.fetch_add(1, Ordering::AcqRel) >= max {
            active.fetch_sub(1, Ordering::AcqRel);
            refused.fetch_add(1, Ordering::Relaxed);
            conn::refuse(stream);
            continue;
        }
        let guard = Active(Arc::clone(&active));
        let router = Arc::clone(&router);
        let spawned = std::thread::Builder::new()
            .name("tracestat-http-conn".into())
            .stack_size(1 << 20)
            .spawn(move || {
                let _guard = guard;
                conn::serve(stream, &router, &limits);
            });
        if spawned.is_err() {
            // The guard went back with the closure; the stream was dropped with it.
            refused.fetch_add(1, Ordering::Relaxed);
        }
    }
}
