//! The `waited!` macro: the blocking twin of an async method, written once. The blocking
//! transaction (`blocking.rs`) and its snapshot view (`snapshot.rs`) both list their plain
//! methods in it; it sits in a module of its own, below both, so that neither imports the
//! other for it.

/// Blocking methods that wait for their async twin on `self.inner`: each is listed with the
/// twin's signature and its `Ok` type, and waits with `self.wait`, so that body is written
/// once for the transaction and its snapshot view.
macro_rules! waited {
    ($($(#[$doc:meta])* pub fn $name:ident(&self $(, $arg:ident: $ty:ty)* $(,)?) -> $ok:ty;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(&self $(, $arg: $ty)*) -> Result<$ok, Error> {
                self.wait(self.inner.$name($($arg),*))
            }
        )*
    };
}
pub(crate) use waited;
