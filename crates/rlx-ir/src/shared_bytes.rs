//! Read-only bytes owned elsewhere and shared without a copy: a tensor's range of a
//! memory-mapped model file, kept alive as long as any executor holds it.
use std::fmt;
use std::ops::{Deref, Range};
use std::sync::Arc;

/// What a [`SharedBytes`] borrows from: any read-only byte owner (a `memmap2::Mmap`, a
/// `Vec<u8>`) that can be shared across threads.
pub type ByteOwner = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// A range of an owner's bytes.
#[derive(Clone)]
pub struct SharedBytes {
    owner: ByteOwner,
    start: usize,
    len: usize,
}

impl SharedBytes {
    /// `range` of `owner`'s bytes; `None` when the range lies outside them.
    pub fn new(owner: ByteOwner, range: Range<usize>) -> Option<SharedBytes> {
        let all: &[u8] = (*owner).as_ref();
        all.get(range.clone())?;
        Some(SharedBytes {
            start: range.start,
            len: range.len(),
            owner,
        })
    }

    /// A copy the caller owns.
    pub fn to_vec(&self) -> Vec<u8> {
        self.as_ref().to_vec()
    }
}

impl AsRef<[u8]> for SharedBytes {
    fn as_ref(&self) -> &[u8] {
        &(*self.owner).as_ref()[self.start..self.start + self.len]
    }
}

impl Deref for SharedBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_ref()
    }
}

impl PartialEq for SharedBytes {
    fn eq(&self, other: &SharedBytes) -> bool {
        self.as_ref() == other.as_ref()
    }
}

impl fmt::Debug for SharedBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SharedBytes({} bytes at {})", self.len, self.start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_views_its_owner_and_outlives_the_handle_it_came_from() {
        let owner: ByteOwner = Arc::new((0u8..100).collect::<Vec<u8>>());
        let s = SharedBytes::new(owner.clone(), 10..20).unwrap();
        drop(owner);
        assert_eq!(&*s, &(10u8..20).collect::<Vec<u8>>()[..]);
        assert_eq!(s.to_vec().len(), 10);
        assert_eq!(s.clone(), s);
    }

    #[test]
    fn a_range_past_the_owner_is_refused() {
        let owner: ByteOwner = Arc::new(vec![0u8; 8]);
        assert!(SharedBytes::new(owner.clone(), 4..9).is_none());
        assert!(SharedBytes::new(owner.clone(), 9..9).is_none());
        assert!(SharedBytes::new(owner, 8..8).is_some_and(|s| s.is_empty()));
    }
}
