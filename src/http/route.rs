//! Request routing: a pure function from a parsed request to a response.
//!
//! # Design
//!
//! [`Router::route`] takes what the connection layer parsed (method, request target, headers,
//! body) and returns a [`Response`]; it does no I/O of its own apart from what a route is
//! about (reading and writing the [`Tracefs`], waiting out a profile's window). The server
//! and the fuzz target share it, so everything a hostile request can reach is reachable
//! without a socket.
//!
//! # Invariants
//!
//! - Nothing here panics on any input: targets, headers and bodies are arbitrary bytes.
//! - A refused request changes nothing: method, path, query, permission and token are all
//!   checked before a write reaches the [`Tracefs`], whose writes parse their whole input
//!   before storing anything.
//! - Only one profile window runs at a time (`409` for the others), and its length is
//!   bounded by [`ServerBuilder::max_profile_seconds`](super::ServerBuilder::max_profile_seconds).

use crate::primitive::unmodeled::Arc;
use crate::primitive::unmodeled::atomic::{AtomicBool, AtomicU64, Ordering};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use percent_encoding::percent_decode;
use subtle::ConstantTimeEq;

use super::window;
use super::window::ProfileSource;
use crate::alloc::FunctionAlloc;
use crate::error::Error;
use crate::export::{self, Counter, Format, Profile};
use crate::stat::{DirEntry, STAT_DIR, Tracefs, WriteMode};

/// `Content-Type` of plain text responses.
const TEXT: &str = "text/plain; charset=utf-8";
/// `Content-Type` of HTML responses.
const HTML: &str = "text/html; charset=utf-8";
/// `Content-Type` of JSON responses.
const JSON: &str = "application/json";

/// The methods the endpoint answers; anything else gets `405`.
const ALLOW_ALL: &str = "GET, HEAD, PUT, POST";
/// The methods of the read-only routes.
const ALLOW_READ: &str = "GET, HEAD";

/// Most files the index lists (`GET /`); it then says how many more there are, and each
/// directory's listing (`GET /<dir>/`) has them.
pub(crate) const MAX_INDEX_FILES: usize = 1000;

/// Go's default profile length, used when `seconds` is not given.
const DEFAULT_PROFILE_SECONDS: u64 = 30;

/// An HTTP response: status, content type, extra headers and body. The connection layer
/// adds `Content-Length` and `Connection: close`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The `Content-Type` header.
    pub content_type: &'static str,
    /// Further headers (`Allow`, `WWW-Authenticate`, ...).
    pub headers: Vec<(&'static str, String)>,
    /// The body (sent for every method but `HEAD`).
    pub body: Vec<u8>,
}

impl Response {
    fn new(status: u16, content_type: &'static str, body: impl Into<Vec<u8>>) -> Self {
        Response {
            status,
            content_type,
            headers: Vec::new(),
            body: body.into(),
        }
    }

    /// A plain-text error: the message and a newline.
    pub(crate) fn error(status: u16, message: impl std::fmt::Display) -> Self {
        Response::new(status, TEXT, format!("{message}\n"))
    }

    fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    fn method_not_allowed(method: &str, allow: &'static str) -> Self {
        Response::error(
            405,
            format_args!("method {method:?} is not allowed here (allowed: {allow})"),
        )
        .with_header("Allow", allow)
    }
}

/// The standard reason phrase of a status this endpoint sends.
pub(crate) fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// The routes of the endpoint over one [`Tracefs`] and (optionally) one function profiler.
///
/// Built by [`ServerBuilder::router`](super::ServerBuilder::router) (or, inside a running
/// [`Server`](super::Server), by [`ServerBuilder::serve`](super::ServerBuilder::serve)); use
/// it directly to mount the routes in another HTTP server.
pub struct Router {
    pub(crate) fs: Arc<Tracefs>,
    pub(crate) profiler: Option<ProfileSource>,
    /// The per-function allocation stats behind `/debug/pprof/allocs`.
    pub(crate) allocations: Option<&'static FunctionAlloc>,
    pub(crate) allow_writes: bool,
    pub(crate) token: Option<Vec<u8>>,
    pub(crate) max_profile_seconds: u64,
    /// Most bytes of a response body; a larger one is answered with `500` instead.
    pub(crate) max_response_bytes: usize,
    /// The end of the `403` of a write while writes are disabled: how to enable them.
    pub(crate) writes_hint: String,
    /// Set while a profile window runs.
    pub(crate) profiling: AtomicBool,
    /// Set when the server shuts down: a profile window ends early with `503`.
    pub(crate) stop: Arc<AtomicBool>,
    /// Connections closed unserved because the connection limit was reached.
    pub(crate) refused: Arc<AtomicU64>,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router")
            .field("allow_writes", &self.allow_writes)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("max_profile_seconds", &self.max_profile_seconds)
            .finish_non_exhaustive()
    }
}

/// The decoded query parameters the routes know.
#[derive(Default)]
struct Query {
    json: bool,
    append: Option<bool>,
    seconds: Option<u64>,
}

fn decode(bytes: &[u8], what: &str) -> Result<String, Response> {
    percent_decode(bytes)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| Response::error(400, format_args!("{what} is not valid UTF-8")))
}

fn parse_query(raw: &[u8]) -> Result<Query, Response> {
    let mut q = Query::default();
    for pair in raw.split(|&b| b == b'&').filter(|p| !p.is_empty()) {
        let (k, v) = match pair.iter().position(|&b| b == b'=') {
            Some(i) => (&pair[..i], &pair[i + 1..]),
            None => (pair, &[][..]),
        };
        // `+` is a space in a query (forms); none of our values has one, so it only matters
        // for the error message.
        let k = decode(k, "a query parameter name")?;
        let v = decode(v, "a query parameter value")?.replace('+', " ");
        let bad = |what: &str| {
            Response::error(
                400,
                format_args!("query parameter {k}={v:?}: expected {what}"),
            )
        };
        match k.as_str() {
            "format" => match v.as_str() {
                "json" => q.json = true,
                "text" => q.json = false,
                _ => return Err(bad("json or text")),
            },
            "append" => match v.as_str() {
                "1" | "true" => q.append = Some(true),
                "0" | "false" => q.append = Some(false),
                _ => return Err(bad("0 or 1")),
            },
            "seconds" => {
                let n = (!v.is_empty() && v.len() <= 20 && v.bytes().all(|b| b.is_ascii_digit()))
                    .then(|| v.parse::<u64>().ok())
                    .flatten()
                    .ok_or_else(|| bad("a whole number of seconds"))?;
                q.seconds = Some(n);
            }
            // Unknown parameters are ignored, as Go's handlers do (scrapers add their own).
            _ => {}
        }
    }
    Ok(q)
}

/// Decodes the path of a request target (`/a/b`) and refuses what cannot name a file.
fn parse_path(raw: &[u8]) -> Result<String, Response> {
    if raw.first() != Some(&b'/') {
        return Err(Response::error(
            400,
            "the request target must be a path starting with '/'",
        ));
    }
    let path = decode(raw, "the path")?;
    if path.chars().any(char::is_control) {
        return Err(Response::error(
            400,
            "the path contains a control character",
        ));
    }
    if path.split('/').any(|c| c == ".." || c == ".") {
        return Err(Response::error(
            400,
            "the path contains a '.' or '..' component",
        ));
    }
    Ok(path)
}

/// The value of header `name` (case-insensitive), the first one if repeated.
fn header<'a>(headers: &[(&str, &'a [u8])], name: &str) -> Option<&'a [u8]> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| *v)
}

/// Whether any `Accept` header mentions `media` (case-insensitive).
fn accepts(headers: &[(&str, &[u8])], media: &str) -> bool {
    headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("accept"))
        .any(|(_, v)| {
            v.windows(media.len())
                .any(|w| w.eq_ignore_ascii_case(media.as_bytes()))
        })
}

fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Percent-encodes what a path component may not carry as is (for links in the index).
fn href(path: &str) -> String {
    const SET: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
        .add(b' ')
        .add(b'"')
        .add(b'#')
        .add(b'%')
        .add(b'<')
        .add(b'>')
        .add(b'?')
        .add(b'`')
        .add(b'{')
        .add(b'}')
        .add(b'\'');
    percent_encoding::utf8_percent_encode(path, SET).to_string()
}

/// The status for an error of the control surface.
fn status_of(e: &Error) -> u16 {
    match e {
        Error::NotFound { .. } | Error::NotADirectory { .. } => 404,
        Error::PermissionDenied { .. } => 403,
        Error::InvalidInput { .. } | Error::InvalidName { .. } | Error::IsADirectory { .. } => 400,
        Error::Format { .. } => 500,
        _ => 409,
    }
}

impl Router {
    /// Answers one request.
    ///
    /// `method` is the request method as sent (`HEAD` is answered as `GET`; the connection
    /// layer leaves the body out), `target` the request target as sent (path and query,
    /// percent-encoded), `headers` the header fields, `body` the request body.
    pub fn route(
        &self,
        method: &str,
        target: &[u8],
        headers: &[(&str, &[u8])],
        body: &[u8],
    ) -> Response {
        // The request's work, which a fork waits for (see `fork.rs`).
        let _section = super::fork::Section::enter();
        let r = match self.try_route(method, target, headers, body) {
            Ok(r) | Err(r) => r,
        };
        if r.body.len() > self.max_response_bytes {
            return Response::error(
                500,
                format_args!(
                    "the response would have {} bytes; this endpoint sends at most {} \
                     (max_response_bytes)",
                    r.body.len(),
                    self.max_response_bytes
                ),
            );
        }
        r
    }

    fn try_route(
        &self,
        method: &str,
        target: &[u8],
        headers: &[(&str, &[u8])],
        body: &[u8],
    ) -> Result<Response, Response> {
        let (raw_path, raw_query) = match target.iter().position(|&b| b == b'?') {
            Some(i) => (&target[..i], &target[i + 1..]),
            None => (target, &[][..]),
        };
        let path = parse_path(raw_path)?;
        let query = parse_query(raw_query)?;
        let read = matches!(method, "GET" | "HEAD");
        let write = matches!(method, "PUT" | "POST");
        if !read && !write {
            return Err(Response::method_not_allowed(method, ALLOW_ALL));
        }
        let fixed = match path.as_str() {
            "/" => Some(Fixed::Index),
            "/metrics" => Some(Fixed::Metrics),
            "/debug/pprof" | "/debug/pprof/" => Some(Fixed::PprofIndex),
            "/debug/pprof/profile" => Some(Fixed::Profile),
            "/debug/pprof/allocs" => Some(Fixed::Allocs),
            p if p.starts_with("/debug/pprof/") => {
                return Err(Response::error(
                    404,
                    format_args!(
                        "{p}: no such profile (this endpoint serves 'profile' and 'allocs')"
                    ),
                ));
            }
            _ => None,
        };
        if let Some(fixed) = fixed {
            if !read {
                return Err(Response::method_not_allowed(method, ALLOW_READ));
            }
            return Ok(match fixed {
                Fixed::Index => self.index(headers),
                Fixed::Metrics => self.metrics(headers),
                Fixed::PprofIndex => pprof_index(headers),
                Fixed::Profile => self.profile(query.seconds)?,
                Fixed::Allocs => self.allocs(query.seconds)?,
            });
        }
        let file = &path[1..];
        if read {
            self.read_file(file, &query)
        } else {
            self.write_file(method, file, &query, headers, body)
        }
    }

    fn read_file(&self, file: &str, query: &Query) -> Result<Response, Response> {
        let listing = file.is_empty() || file.ends_with('/');
        if !listing {
            match self.fs.read(file) {
                Ok(text) => {
                    if !query.json {
                        return Ok(Response::new(200, TEXT, text));
                    }
                    return self.file_json(file, text);
                }
                Err(Error::IsADirectory { .. }) => {}
                Err(e) => return Err(Response::error(status_of(&e), e)),
            }
        }
        let entries = self
            .fs
            .list(file)
            .map_err(|e| Response::error(status_of(&e), e))?;
        let dir = file.trim_end_matches('/');
        if query.json {
            let entries: Vec<_> = entries
                .iter()
                .map(
                    |e| serde_json::json!({"name": e.name(), "dir": matches!(e, DirEntry::Dir(_))}),
                )
                .collect();
            let doc = serde_json::json!({
                "schema": "tracestat.directory",
                "version": export::SCHEMA_VERSION,
                "path": dir,
                "entries": entries,
            });
            return Ok(json_response(&doc));
        }
        let mut out = String::new();
        for e in &entries {
            match e {
                DirEntry::Dir(n) => out.push_str(&format!("{n}/\n")),
                DirEntry::File(n) => out.push_str(&format!("{n}\n")),
            }
        }
        Ok(Response::new(200, TEXT, out))
    }

    /// `?format=json` of a file: a stat file's typed data (or text rows), a control file's
    /// content.
    fn file_json(&self, file: &str, text: String) -> Result<Response, Response> {
        let key = file.trim_start_matches('/');
        if let Some(name) = key.strip_prefix(STAT_DIR).and_then(|r| r.strip_prefix('/')) {
            let mut out = Vec::new();
            return match export::registry_stat_to_json_typed(self.fs.stats(), name, &mut out) {
                Ok(()) => Ok(Response::new(200, JSON, out)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Response::error(
                    404,
                    format_args!("{STAT_DIR}/{name}: not found"),
                )),
                Err(e) => Err(Response::error(500, e)),
            };
        }
        let doc = serde_json::json!({
            "schema": "tracestat.file",
            "version": export::SCHEMA_VERSION,
            "path": key,
            "content": text,
        });
        Ok(json_response(&doc))
    }

    fn write_file(
        &self,
        method: &str,
        file: &str,
        query: &Query,
        headers: &[(&str, &[u8])],
        body: &[u8],
    ) -> Result<Response, Response> {
        let mode = match (method, query.append) {
            ("PUT", None | Some(false)) => WriteMode::Truncate,
            ("PUT", Some(true)) => {
                return Err(Response::error(
                    400,
                    "PUT replaces the content (echo > file): use POST with ?append=1 to append",
                ));
            }
            (_, Some(true)) => WriteMode::Append,
            _ => {
                return Err(Response::error(
                    400,
                    "POST appends (echo >> file) and needs ?append=1; PUT replaces the content",
                ));
            }
        };
        if !self.allow_writes {
            return Err(Response::error(
                403,
                format_args!("writes are disabled on this endpoint: {}", self.writes_hint),
            ));
        }
        if let Some(token) = &self.token {
            let given = header(headers, "authorization")
                .and_then(bearer_credentials)
                .map(<[u8]>::trim_ascii);
            let ok = given.is_some_and(|g| bool::from(g.ct_eq(token)));
            if !ok {
                return Err(Response::error(
                    401,
                    "writes need the endpoint's token: Authorization: Bearer <token>",
                )
                .with_header("WWW-Authenticate", "Bearer"));
            }
        }
        if file.is_empty() || file.ends_with('/') {
            return Err(Response::error(400, "a directory cannot be written"));
        }
        self.fs
            .write_mode(file, body, mode)
            .map_err(|e| Response::error(status_of(&e), e))?;
        Ok(Response::new(204, TEXT, Vec::new()))
    }

    /// Every file, recursively, in listing order.
    fn all_files(&self) -> Vec<String> {
        let mut files = Vec::new();
        let mut dirs = vec![String::new()];
        while let Some(dir) = dirs.pop() {
            let Ok(entries) = self.fs.list(&dir) else {
                continue;
            };
            let mut sub = Vec::new();
            for e in entries {
                let path = if dir.is_empty() {
                    e.name().to_owned()
                } else {
                    format!("{dir}/{}", e.name())
                };
                match e {
                    DirEntry::Dir(_) => sub.push(path),
                    DirEntry::File(_) => files.push(path),
                }
            }
            // Depth first, in name order.
            dirs.extend(sub.into_iter().rev());
        }
        files.sort();
        files
    }

    fn index(&self, headers: &[(&str, &[u8])]) -> Response {
        let mut files = self.all_files();
        let more = files.len().saturating_sub(MAX_INDEX_FILES);
        files.truncate(MAX_INDEX_FILES);
        let more_line = (more > 0).then(|| {
            format!(
                "{more} more files are not listed here (at most {MAX_INDEX_FILES}): each directory's listing has them"
            )
        });
        if accepts(headers, "text/html") {
            let mut out = String::from(
                "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>tracestat</title></head><body>\n<h1>tracestat</h1>\n<ul>\n<li><a href=\"/metrics\">metrics</a></li>\n<li><a href=\"/debug/pprof/\">debug/pprof/</a></li>\n</ul>\n<h2>files</h2>\n<ul>\n",
            );
            for f in &files {
                let (h, t) = (href(f), html_escape(f));
                let _ = write!(out, "<li><a href=\"/{h}\">{t}</a>");
                if f.starts_with("trace_stat/") {
                    let _ = write!(out, " (<a href=\"/{h}?format=json\">json</a>)");
                }
                out.push_str("</li>\n");
            }
            if let Some(line) = &more_line {
                let _ = writeln!(out, "<li>{}</li>", html_escape(line));
            }
            out.push_str("</ul>\n</body></html>\n");
            return Response::new(200, HTML, out);
        }
        let mut out = String::from("metrics\ndebug/pprof/\n");
        for f in &files {
            out.push_str(f);
            out.push('\n');
        }
        if let Some(line) = &more_line {
            out.push_str("# ");
            out.push_str(line);
            out.push('\n');
        }
        Response::new(200, TEXT, out)
    }

    fn metrics(&self, headers: &[(&str, &[u8])]) -> Response {
        let mut profile = self
            .profiler
            .as_ref()
            .and_then(ProfileSource::to_profile)
            .unwrap_or_default();
        if let Some(fa) = self.allocations {
            profile
                .counters
                .extend(Profile::from_allocations(&fa.to_stats(false)).counters);
        }
        profile.counters.push(Counter {
            name: "http_connections_refused".to_owned(),
            help: "Connections closed unserved because the HTTP endpoint's connection limit was reached".to_owned(),
            labels: Default::default(),
            value: self.refused.load(Ordering::Relaxed),
        });
        let open = accepts(headers, "application/openmetrics-text");
        let mut out = Vec::new();
        let (written, content_type) = if open {
            (
                export::to_openmetrics(&profile, &mut out),
                Format::OpenMetrics.content_type(),
            )
        } else {
            (
                export::to_prometheus_text(&profile, &mut out),
                Format::Prometheus.content_type(),
            )
        };
        match written {
            Ok(()) => Response::new(200, content_type, out),
            Err(e) => Response::error(500, format_args!("cannot write the metrics: {e}")),
        }
    }

    fn profile(&self, seconds: Option<u64>) -> Result<Response, Response> {
        let seconds = seconds.unwrap_or(DEFAULT_PROFILE_SECONDS);
        if seconds == 0 || seconds > self.max_profile_seconds {
            return Err(Response::error(
                400,
                format_args!(
                    "seconds={seconds}: a profile lasts 1 to {} seconds on this endpoint",
                    self.max_profile_seconds
                ),
            ));
        }
        let Some(profiler) = &self.profiler else {
            return Err(Response::error(
                404,
                "this endpoint serves no function profiler",
            ));
        };
        if self
            .profiling
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(Response::error(
                409,
                "another profile is being taken: retry when it is done",
            ));
        }
        struct Release<'a>(&'a AtomicBool);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                self.0.store(false, Ordering::Release);
            }
        }
        let _release = Release(&self.profiling);
        let window = window::take(profiler, || self.wait(Duration::from_secs(seconds)))
            .map_err(|r| Response::error(r.status, r.message))?;
        let mut out = Vec::new();
        export::to_pprof_commented(&window.profile, &window.comments, &mut out)
            .map_err(|e| Response::error(500, format_args!("cannot write the profile: {e}")))?;
        Ok(Response::new(200, "application/octet-stream", out)
            .with_header("Content-Disposition", "attachment; filename=\"profile\""))
    }

    /// `/debug/pprof/allocs`: every traced function's own allocations since the stats were
    /// last reset (cumulative, as Go's: scrapers take the differences).
    fn allocs(&self, seconds: Option<u64>) -> Result<Response, Response> {
        if let Some(n) = seconds {
            return Err(Response::error(
                400,
                format_args!(
                    "seconds={n}: the allocation profile is cumulative here (since \
                     options/function-profile-alloc was last set to 1); take differences"
                ),
            ));
        }
        let Some(fa) = self.allocations else {
            return Err(Response::error(
                404,
                "this endpoint serves no allocation stats",
            ));
        };
        let mut out = Vec::new();
        export::allocs_to_pprof(&fa.to_stats(false), &mut out)
            .map_err(|e| Response::error(500, format_args!("cannot write the profile: {e}")))?;
        Ok(Response::new(200, "application/octet-stream", out)
            .with_header("Content-Disposition", "attachment; filename=\"allocs\""))
    }

    /// Sleeps `d`, in short steps so a shutdown ends the wait; `false` when it did. Outside
    /// the request's section: a fork need not wait for a window.
    fn wait(&self, d: Duration) -> bool {
        let end = Instant::now() + d;
        super::fork::outside(|| {
            loop {
                if self.stop.load(Ordering::Acquire) {
                    return false;
                }
                let now = Instant::now();
                if now >= end {
                    return true;
                }
                std::thread::sleep((end - now).min(Duration::from_millis(50)));
            }
        })
    }
}

enum Fixed {
    Index,
    Metrics,
    PprofIndex,
    Profile,
    Allocs,
}

fn json_response(doc: &serde_json::Value) -> Response {
    let mut out = serde_json::to_vec(doc).unwrap_or_default();
    out.push(b'\n');
    Response::new(200, JSON, out)
}

fn pprof_index(headers: &[(&str, &[u8])]) -> Response {
    const WHAT: &str = "the function profiler's calls and time over N seconds (gzipped profile.proto; go tool pprof reads it)";
    const ALLOCS: &str = "each traced function's own allocations and bytes since the allocation stats were last reset (gzipped profile.proto)";
    if accepts(headers, "text/html") {
        return Response::new(
            200,
            HTML,
            format!(
                "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>/debug/pprof/</title></head><body>\n<h1>/debug/pprof/</h1>\n<ul>\n<li><a href=\"profile?seconds={DEFAULT_PROFILE_SECONDS}\">profile</a>: {}</li>\n<li><a href=\"allocs\">allocs</a>: {}</li>\n</ul>\n</body></html>\n",
                html_escape(WHAT),
                html_escape(ALLOCS)
            ),
        );
    }
    Response::new(
        200,
        TEXT,
        format!("profile?seconds=N: {WHAT}\nallocs: {ALLOCS}\n"),
    )
}

/// The credentials of an `Authorization: Bearer <token>` header value. The scheme name is
/// case-insensitive (RFC 7235, section 2.1: `bearer`, `BEARER` are `Bearer`); `None` for
/// another scheme or no credentials.
fn bearer_credentials(value: &[u8]) -> Option<&[u8]> {
    let value = value.trim_ascii_start();
    let end = value.iter().position(|&b| b == b' ' || b == b'\t')?;
    let (scheme, rest) = value.split_at(end);
    scheme.eq_ignore_ascii_case(b"Bearer").then_some(rest)
}
