//! The HTTP endpoint, end to end over real sockets.
