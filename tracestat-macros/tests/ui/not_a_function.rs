#[tracestat::traced]
struct Request {
    len: usize,
}

fn main() {
    let _ = Request { len: 0 }.len;
}
