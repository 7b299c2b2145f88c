#[tracestat::traced]
const fn answer() -> u32 {
    42
}

fn main() {
    let _ = answer();
}
