//! Impls foundationdb-rs's types repeat, written once: its lists of rows and keys (each
//! reads as a slice of its items, iterates by reference, and iterates owned through its own
//! iterator type yielding its own owned newtype), its newtypes' views of what they wrap, and
//! its errors' `From` their causes.

/// For a list `$list` holding `$field: Vec<$item>`, an owned iterator `$iter`
/// (`vec::IntoIter<$item>` in a newtype) and an owned item `$owned` (`$item` in a newtype):
/// the slice view, both iterations, and the owned item's view of its `$item`.
macro_rules! item_list {
    ($list:ident, $field:ident, $item:ty, $iter:ident, $owned:ident) => {
        impl std::ops::Deref for $list {
            type Target = [$item];
            fn deref(&self) -> &[$item] {
                &self.$field
            }
        }

        impl AsRef<[$item]> for $list {
            fn as_ref(&self) -> &[$item] {
                &self.$field
            }
        }

        impl<'a> IntoIterator for &'a $list {
            type Item = &'a $item;
            type IntoIter = std::slice::Iter<'a, $item>;
            fn into_iter(self) -> Self::IntoIter {
                self.$field.iter()
            }
        }

        impl IntoIterator for $list {
            type Item = $owned;
            type IntoIter = $iter;
            fn into_iter(self) -> $iter {
                $iter(self.$field.into_iter())
            }
        }

        impl Iterator for $iter {
            type Item = $owned;
            fn next(&mut self) -> Option<$owned> {
                self.0.next().map($owned)
            }
            fn size_hint(&self) -> (usize, Option<usize>) {
                self.0.size_hint()
            }
            fn nth(&mut self, n: usize) -> Option<$owned> {
                self.0.nth(n).map($owned)
            }
        }

        impl ExactSizeIterator for $iter {}

        impl DoubleEndedIterator for $iter {
            fn next_back(&mut self) -> Option<$owned> {
                self.0.next_back().map($owned)
            }
        }

        $crate::impls::view_as!($owned => $item);
    };
}

pub(crate) use item_list;

/// `Deref` and `AsRef` to `$target` for the newtype `$wrapper`, through its field.
macro_rules! view_as {
    ($wrapper:ident => $target:ty) => {
        impl std::ops::Deref for $wrapper {
            type Target = $target;
            fn deref(&self) -> &$target {
                &self.0
            }
        }

        impl AsRef<$target> for $wrapper {
            fn as_ref(&self) -> &$target {
                &self.0
            }
        }
    };
}

pub(crate) use view_as;

/// `From<$cause>` for the error enum `$error`, each wrapping the cause in its `$variant`.
macro_rules! from_variants {
    ($error:ident { $($cause:ty => $variant:ident),* $(,)? }) => {
        $(impl From<$cause> for $error {
            fn from(e: $cause) -> Self {
                Self::$variant(e)
            }
        })*
    };
}

pub(crate) use from_variants;
