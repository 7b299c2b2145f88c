trait Handler {
    #[tracestat::traced]
    fn handle(&self, req: &[u8]) -> usize;
}

fn main() {}
