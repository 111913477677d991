//! A little-endian cursor over the file's bytes. Every read checks the length against what is
//! left first and reports the offset it was at, so nothing above it indexes the buffer directly.
use super::GgufError;

pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    pub fn pos(&self) -> u64 {
        self.pos as u64
    }

    pub fn remaining(&self) -> u64 {
        (self.buf.len() - self.pos) as u64
    }

    pub fn take(&mut self, n: u64, what: &'static str) -> Result<&'a [u8], GgufError> {
        let have = self.remaining();
        if n > have {
            return Err(GgufError::Truncated {
                offset: self.pos(),
                need: n,
                have,
                what,
            });
        }
        // n <= remaining <= usize::MAX, so the cast is lossless.
        let s = &self.buf[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], GgufError> {
        let s = self.take(N as u64, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    pub fn u8(&mut self, what: &'static str) -> Result<u8, GgufError> {
        Ok(self.array::<1>(what)?[0])
    }
    pub fn u16(&mut self, what: &'static str) -> Result<u16, GgufError> {
        self.array(what).map(u16::from_le_bytes)
    }
    pub fn u32(&mut self, what: &'static str) -> Result<u32, GgufError> {
        self.array(what).map(u32::from_le_bytes)
    }
    pub fn u64(&mut self, what: &'static str) -> Result<u64, GgufError> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// A GGUF string: u64 byte length, then the bytes (no terminator, any bytes).
    /// A truncation is reported from the start of the length field, so the offset named is
    /// where the string begins.
    pub fn string_bytes(&mut self, what: &'static str) -> Result<&'a [u8], GgufError> {
        let offset = self.pos();
        let len = self.u64(what)?;
        self.take(len, what).map_err(|e| match e {
            GgufError::Truncated { need, have, .. } => GgufError::Truncated {
                offset,
                need: need.saturating_add(8),
                have: have + 8,
                what,
            },
            e => e,
        })
    }

    /// A string that must be UTF-8: keys and tensor names.
    pub fn name(&mut self, what: &'static str) -> Result<String, GgufError> {
        let offset = self.pos();
        let bytes = self.string_bytes(what)?;
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| GgufError::BadString { offset, what })
    }

    /// How many of `count` items, each at least `min_size` bytes encoded, to preallocate for:
    /// an error when even the smallest encoding cannot fit, so a hostile count fails before
    /// the allocation (and before a long loop) rather than after.
    pub fn check_count(
        &self,
        count: u64,
        min_size: u64,
        offset: u64,
        what: &'static str,
    ) -> Result<usize, GgufError> {
        let have = self.remaining();
        let max = have / min_size.max(1);
        if count > max {
            return Err(GgufError::TooLarge {
                offset,
                what,
                count,
                have,
                max,
            });
        }
        // count <= remaining bytes, which fit in usize.
        Ok(count as usize)
    }

    /// A preallocation for `n` items of `T` that is never larger than the bytes left: items
    /// bigger in memory than encoded (a metadata pair, a tensor entry) grow the vector as
    /// they are actually decoded instead.
    pub fn capacity<T>(&self, n: usize) -> usize {
        let left = usize::try_from(self.remaining()).unwrap_or(usize::MAX);
        n.min(left / std::mem::size_of::<T>().max(1))
    }
}
