//! A counting global allocator: every allocation (and reallocation) is counted, with its
//! size, before it is handed to the system allocator. The binary installs it; the counters
//! read zero where it is not installed (unit tests).
//!
//! With the `libfdb_c` feature the counting moves one level down, to the C allocator itself:
//! libfdb_c calls `malloc` and friends directly, past any Rust global allocator, so counting
//! there is the only way to see its allocations. The binary then defines `malloc`, `calloc`,
//! `realloc`, `aligned_alloc`, `memalign` and `posix_memalign`, counts, and forwards to glibc's
//! own entry points (`__libc_malloc` …); the dynamic linker binds libfdb_c's references to
//! these definitions (glibc's supported way to replace malloc). Rust's `System` allocator
//! calls the same functions, so every arm of such a build is counted at the same level, once.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

pub struct CountingAlloc;

static ALLOCS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

#[inline]
fn count(size: usize) {
    ALLOCS.fetch_add(1, Ordering::Relaxed);
    BYTES.fetch_add(size as u64, Ordering::Relaxed);
}

/// Whether the Rust-level allocator counts (not when the C level does, see the module docs).
const COUNT_IN_RUST: bool = !cfg!(feature = "libfdb_c");

// SAFETY: every call is forwarded unchanged to `System`; the counters have no effect on it.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNT_IN_RUST {
            count(layout.size());
        }
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if COUNT_IN_RUST {
            count(layout.size());
        }
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNT_IN_RUST {
            count(new_size);
        }
        System.realloc(ptr, layout, new_size)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

/// Allocations and bytes requested so far, process-wide.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocCounts {
    pub allocs: u64,
    pub bytes: u64,
}

pub fn snapshot() -> AllocCounts {
    AllocCounts {
        allocs: ALLOCS.load(Ordering::Relaxed),
        bytes: BYTES.load(Ordering::Relaxed),
    }
}

impl std::ops::Sub for AllocCounts {
    type Output = AllocCounts;
    fn sub(self, o: AllocCounts) -> AllocCounts {
        AllocCounts {
            allocs: self.allocs.saturating_sub(o.allocs),
            bytes: self.bytes.saturating_sub(o.bytes),
        }
    }
}

/// Where allocations are counted, for the report.
pub const COUNTED_AT: &str = if COUNT_IN_RUST {
    "the Rust global allocator"
} else {
    "the C allocator (malloc and friends, which libfdb_c calls directly)"
};

/// The C allocator's entry points, counted and forwarded to glibc (see the module docs).
#[cfg(feature = "libfdb_c")]
mod c_malloc {
    use std::ffi::{c_int, c_void};

    extern "C" {
        fn __libc_malloc(size: usize) -> *mut c_void;
        fn __libc_calloc(n: usize, size: usize) -> *mut c_void;
        fn __libc_realloc(ptr: *mut c_void, size: usize) -> *mut c_void;
        fn __libc_memalign(align: usize, size: usize) -> *mut c_void;
    }

    const EINVAL: c_int = 22;
    const ENOMEM: c_int = 12;

    /// # Safety
    /// The C `malloc` contract.
    #[no_mangle]
    pub unsafe extern "C" fn malloc(size: usize) -> *mut c_void {
        super::count(size);
        __libc_malloc(size)
    }

    /// # Safety
    /// The C `calloc` contract.
    #[no_mangle]
    pub unsafe extern "C" fn calloc(n: usize, size: usize) -> *mut c_void {
        super::count(n.saturating_mul(size));
        __libc_calloc(n, size)
    }

    /// # Safety
    /// The C `realloc` contract.
    #[no_mangle]
    pub unsafe extern "C" fn realloc(ptr: *mut c_void, size: usize) -> *mut c_void {
        super::count(size);
        __libc_realloc(ptr, size)
    }

    /// # Safety
    /// The C `memalign` contract.
    #[no_mangle]
    pub unsafe extern "C" fn memalign(align: usize, size: usize) -> *mut c_void {
        super::count(size);
        __libc_memalign(align, size)
    }

    /// # Safety
    /// The C `aligned_alloc` contract.
    #[no_mangle]
    pub unsafe extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
        super::count(size);
        __libc_memalign(align, size)
    }

    /// # Safety
    /// The C `posix_memalign` contract (`out` is writable).
    #[no_mangle]
    pub unsafe extern "C" fn posix_memalign(
        out: *mut *mut c_void,
        align: usize,
        size: usize,
    ) -> c_int {
        if !align.is_power_of_two() || !align.is_multiple_of(std::mem::size_of::<usize>()) {
            return EINVAL;
        }
        super::count(size);
        let p = __libc_memalign(align, size);
        if p.is_null() {
            return ENOMEM;
        }
        *out = p;
        0
    }
}
