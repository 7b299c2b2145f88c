// What a container's #[traced] refuses, each with a message naming why.
trait Encode {
    fn encode(&self) -> u8;
}

// A type that is not a path has no name to qualify its methods with.
#[tracestat::traced]
impl Encode for [u8] {
    fn encode(&self) -> u8 {
        self.len() as u8
    }
}

struct Frame;

#[tracestat::traced]
impl Frame {
    // One mark per item.
    #[tracestat::traced]
    #[tracestat::notrace]
    fn both(&self) {}

    #[tracestat::notrace(reason)]
    fn with_argument(&self) {}

    // Asked for by name, a const fn is refused as on its own.
    #[tracestat::traced]
    const fn fixed() -> u8 {
        1
    }

    #[tracestat::traced = "frame_len"]
    fn len(&self) -> usize {
        0
    }
}

#[tracestat::traced]
trait Handler {
    // Asked for by name, a required method (no body) is refused as on its own.
    #[tracestat::traced]
    fn handle(&self);
}

#[tracestat::traced(Frames)]
mod frames {}

#[tracestat::traced]
#[tracestat::traced]
mod twice {}

fn main() {}
