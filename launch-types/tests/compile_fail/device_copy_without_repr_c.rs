//! `#[derive(DeviceCopy)]` on a struct with Rust's own layout: refused at the struct, since the
//! compiler may reorder its fields and the device would read them where the host did not put them.

use gpukern_device::DeviceCopy;

#[derive(Clone, Copy, DeviceCopy)]
pub struct Point {
    pub x: f32,
    pub y: f32,
}

fn main() {}
