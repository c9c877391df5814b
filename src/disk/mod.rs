//! A sandbox's folders on this disk, as both backends' file tools and the local guest see
//! them: the bytes they may hold ([`quota`]) and reading their files through a `cap_std` folder
//! handle, links refused and FIFOs never blocking ([`dir_read`]).

pub mod dir_read;
pub mod quota;
