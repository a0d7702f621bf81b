//! `solo` as a library: [`Engine`], the engine of `solo serve` inside a program (no HTTP), and
//! what the `solo` command shares with it (the built-in demo checkpoint, finding checkpoints).
//! libsolo (crate `solo-capi`) is the C ABI over it.

pub mod demo;
pub mod engine;
pub mod locate;

pub use engine::{gate_check, Backend, Canceller, Engine, Error, ErrorKind, Options, Poll, Stream};
