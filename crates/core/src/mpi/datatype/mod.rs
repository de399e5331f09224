//! Derived datatypes: a type's layout in memory built by MPI's type
//! constructors (`layout`, the array ones in `array`), and packing between
//! that layout and the contiguous bytes of a message (`pack`). The Python
//! layer keeps what MPI says about a type (names, envelopes, contents);
//! this keeps the arithmetic and moves the bytes.

mod array;
mod layout;
mod pack;

pub use layout::Layout;
