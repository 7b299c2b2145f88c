#[tracestat::traced(parse_header)]
fn parse(input: &str) -> usize {
    input.len()
}

#[tracestat::traced("a", "b")]
fn two_names() {}

fn main() {
    let _ = parse("");
    two_names();
}
