//! One connection: read one request within the limits, route it, write the response, close.
//!
//! # Design
//!
//! `httparse` parses the request line and headers; this file only feeds it bytes and
//! enforces the limits around it:
//!
//! - the request line and headers together fit in `max_header_bytes` and at most
//!   [`MAX_HEADERS`] fields (`431` otherwise);
//! - a body comes with `Content-Length` (a `Transfer-Encoding` gets `501`) of at most
//!   `max_body_bytes` (`413`, refused before it is read);
//! - the whole request arrives within `request_timeout` of the connection's start, however
//!   the client spaces its bytes (`408`); each read waits at most the time left;
//! - the whole response is written within `request_timeout` of its first byte, however
//!   slowly the client reads: each write waits at most the time left, so a client reading
//!   a trickle cannot hold its connection (and its slot under `max_connections`) longer;
//!   past the deadline the connection is reset, so the kernel's buffered rest is dropped.
//!
//! Every connection serves exactly one request (`Connection: close`), so a client cannot
//! hold a connection beyond one request's limits. Memory per connection is bounded by
//! `max_header_bytes + max_body_bytes` plus the response.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use super::Limits;
use super::route::{Response, Router, reason};

/// Most header fields a request may carry.
pub(crate) const MAX_HEADERS: usize = 64;

/// How much of an unread request body is drained (for at most a second) after the response
/// before the socket is closed (closing with unread data makes the kernel send a reset, which can destroy the
/// response before the client read it).
const DRAIN_BYTES: usize = 256 << 10;

/// Why reading a request stopped without a request.
enum ReadFail {
    /// Answer with this and close.
    Respond(Response),
    /// The client went away or sent nothing: close without a word.
    Silent,
}

fn respond(status: u16, message: impl std::fmt::Display) -> ReadFail {
    ReadFail::Respond(Response::error(status, message))
}

/// A request as read: what [`Router::route`] takes.
struct Request {
    method: String,
    target: Vec<u8>,
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
}

/// Reads at most `max` more bytes into `buf` before `deadline`; `Ok(0)` at end of stream.
fn read_some(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    max: usize,
    deadline: Instant,
) -> Result<usize, ReadFail> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(respond(408, "the request did not arrive in time"));
    }
    stream
        .set_read_timeout(Some(left))
        .map_err(|_| ReadFail::Silent)?;
    let mut chunk = [0u8; 4096];
    let want = max.min(chunk.len());
    loop {
        match stream.read(&mut chunk[..want]) {
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                return Ok(n);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(respond(408, "the request did not arrive in time"));
            }
            Err(_) => return Err(ReadFail::Silent),
        }
    }
}

fn read_request(
    stream: &mut TcpStream,
    limits: &Limits,
    deadline: Instant,
) -> Result<Request, ReadFail> {
    let mut buf = Vec::with_capacity(1024);
    // Request line and headers.
    let (head_len, mut req) = loop {
        let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut parsed = httparse::Request::new(&mut fields);
        match parsed.parse(&buf) {
            Ok(httparse::Status::Complete(n)) => {
                let req = Request {
                    method: parsed.method.unwrap_or_default().to_owned(),
                    target: parsed.path.unwrap_or_default().as_bytes().to_vec(),
                    headers: parsed
                        .headers
                        .iter()
                        .map(|h| (h.name.to_owned(), h.value.to_vec()))
                        .collect(),
                    body: Vec::new(),
                };
                break (n, req);
            }
            Ok(httparse::Status::Partial) => {}
            Err(httparse::Error::TooManyHeaders) => {
                return Err(respond(
                    431,
                    format_args!("more than {MAX_HEADERS} header fields"),
                ));
            }
            Err(e) => return Err(respond(400, format_args!("malformed request: {e}"))),
        }
        if buf.len() >= limits.max_header_bytes {
            return Err(respond(
                431,
                format_args!(
                    "the request line and headers exceed {} bytes",
                    limits.max_header_bytes
                ),
            ));
        }
        let room = limits.max_header_bytes - buf.len();
        if read_some(stream, &mut buf, room, deadline)? == 0 {
            return Err(if buf.is_empty() {
                ReadFail::Silent
            } else {
                respond(400, "the connection closed in the middle of the request")
            });
        }
    };
    // Body: Content-Length only.
    fn values<'a>(
        headers: &'a [(String, Vec<u8>)],
        name: &'static str,
    ) -> impl Iterator<Item = &'a [u8]> + 'a {
        headers
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
    }
    let field = |name: &'static str| values(&req.headers, name);
    if field("transfer-encoding").next().is_some() {
        return Err(respond(
            501,
            "Transfer-Encoding is not supported: send the body with Content-Length",
        ));
    }
    let mut length: Option<u64> = None;
    for v in field("content-length") {
        let v = v.trim_ascii();
        let n = (!v.is_empty() && v.len() <= 19 && v.iter().all(u8::is_ascii_digit))
            .then(|| std::str::from_utf8(v).ok()?.parse::<u64>().ok())
            .flatten()
            .ok_or_else(|| respond(400, "Content-Length is not a number"))?;
        if length.is_some_and(|l| l != n) {
            return Err(respond(400, "two different Content-Length values"));
        }
        length = Some(n);
    }
    let length = length.unwrap_or(0);
    if length > limits.max_body_bytes as u64 {
        return Err(respond(
            413,
            format_args!(
                "the body has {length} bytes; this endpoint takes at most {}",
                limits.max_body_bytes
            ),
        ));
    }
    let length = length as usize;
    let expects_continue = field("expect").any(|v| v.eq_ignore_ascii_case(b"100-continue"));
    let mut body = buf.split_off(head_len);
    if body.len() < length && expects_continue {
        // curl waits a second for this before sending a body over 1 KiB.
        let _ = stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
    }
    while body.len() < length {
        let room = length - body.len();
        if read_some(stream, &mut body, room, deadline)? == 0 {
            return Err(respond(400, "the connection closed before the whole body"));
        }
    }
    // Bytes beyond the body (a pipelined request) are not served: one request per
    // connection.
    body.truncate(length);
    req.body = body;
    Ok(req)
}

/// Bytes handed to one `write` call: small enough that the deadline is checked often.
const WRITE_CHUNK: usize = 64 << 10;

/// Writes all of `bytes` before `deadline` (`TimedOut` after it).
fn write_by(stream: &mut TcpStream, bytes: &[u8], deadline: Instant) -> io::Result<()> {
    for chunk in bytes.chunks(WRITE_CHUNK) {
        let mut rest = chunk;
        while !rest.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the response was not read in time",
                ));
            }
            stream.set_write_timeout(Some(left))?;
            match stream.write(rest) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => rest = &rest[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

fn write_response(
    stream: &mut TcpStream,
    response: &Response,
    head_only: bool,
    timeout: Duration,
) -> io::Result<()> {
    let deadline = Instant::now() + timeout;
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n",
        response.status,
        reason(response.status),
        response.content_type,
        response.body.len()
    );
    for (name, value) in &response.headers {
        // Values come from this crate, never from the request; keep them one line anyway.
        let value: String = value.chars().filter(|c| !c.is_control()).collect();
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    write_by(stream, head.as_bytes(), deadline)?;
    if !head_only {
        write_by(stream, &response.body, deadline)?;
    }
    stream.flush()
}

/// Serves one connection: one request, one response, then close.
pub(crate) fn serve(mut stream: TcpStream, router: &Router, limits: &Limits) {
    let start = Instant::now();
    let _ = stream.set_nodelay(true);
    let deadline = start + limits.request_timeout;
    let (response, head_only) = match read_request(&mut stream, limits, deadline) {
        Ok(req) => {
            let headers: Vec<(&str, &[u8])> = req
                .headers
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_slice()))
                .collect();
            let head = req.method == "HEAD";
            let method = if head { "GET" } else { req.method.as_str() };
            (router.route(method, &req.target, &headers, &req.body), head)
        }
        Err(ReadFail::Respond(r)) => (r, false),
        Err(ReadFail::Silent) => return,
    };
    if let Err(e) = write_response(&mut stream, &response, head_only, limits.request_timeout) {
        if e.kind() == io::ErrorKind::TimedOut || e.kind() == io::ErrorKind::WouldBlock {
            abort(&stream);
        }
        return;
    }
    let _ = stream.shutdown(Shutdown::Write);
    // Drain what the client still sends (an unread body), briefly, so the close is clean.
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    let drain_end = Instant::now() + Duration::from_secs(1);
    let mut drained = 0;
    let mut chunk = [0u8; 4096];
    while drained < DRAIN_BYTES && Instant::now() < drain_end {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => drained += n,
        }
    }
}

/// Closes `stream` with a reset, discarding what the kernel still buffers for it: a client
/// too slow to read its response in time gets no more of it, and holds no memory of ours.
fn abort(stream: &TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: the descriptor is the stream's own, open while `stream` lives; `linger` is a
    // valid `struct linger` for the size passed.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&raw const linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

/// Answers a connection over the limit with `503` without blocking: the response is small
/// enough for the socket's send buffer, and a client that does not read loses it.
pub(crate) fn refuse(stream: TcpStream) {
    let body = "too many connections: retry later\n";
    let msg = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\nRetry-After: 1\r\n\r\n{body}",
        body.len()
    );
    if stream.set_nonblocking(true).is_ok() {
        let mut s = &stream;
        let _ = s.write_all(msg.as_bytes());
    }
    let _ = stream.shutdown(Shutdown::Both);
}
