//! `#[derive(DeviceCopy)]` on a `#[repr(C)]` struct with padding (a `u8` before an `f64`: 7 bytes
//! the device would see undefined): refused at the struct.

use gpukern_device::DeviceCopy;

#[derive(Clone, Copy, DeviceCopy)]
#[repr(C)]
pub struct Tagged {
    pub tag: u8,
    pub value: f64,
}

fn main() {}
