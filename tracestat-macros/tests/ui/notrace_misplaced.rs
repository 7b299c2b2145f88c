// #[notrace] only means something to a #[traced] container around it; anywhere else it
// would do nothing, so it is refused.
#[tracestat::notrace]
fn alone() {}

struct Request;

#[tracestat::traced]
impl Request {
    // A const is never instrumented: there is nothing to exclude.
    #[tracestat::notrace]
    const LIMIT: usize = 4;

    fn len(&self) -> usize {
        // Items inside a function body are not the container's.
        #[tracestat::notrace]
        fn helper() -> usize {
            4
        }
        helper().min(Self::LIMIT)
    }
}

fn main() {
    alone();
    let _ = Request.len();
}
