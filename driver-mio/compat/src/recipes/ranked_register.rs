//! A ranked register (Chockler and Malkhi's, the building block of Paxos-like protocols)
//! in one key: a read at rank r promises to refuse later writes below r; a write at rank r
//! succeeds unless a read or write of rank >= r came first. Each call runs in the caller's
//! transaction, so FDB's serializability makes the register linearizable.
//!
//! The state is foundationdb-rs's, so both read each other's registers: the key
//! `subspace.pack(("state",))`, the value `pack((max_read_rank, max_write_rank, has_value,
//! value))`.

use std::fmt;
use std::ops::Deref;

use crate::error::FdbError;
use crate::transaction::Transaction;
use crate::tuple::{pack, unpack, PackError, Subspace};

/// The register's errors.
#[derive(Debug)]
pub enum RankedRegisterError {
    /// The transaction failed.
    Fdb(FdbError),
    /// The stored state did not unpack.
    PackError(PackError),
    /// The stored state makes no sense.
    InvalidState(String),
}

impl fmt::Display for RankedRegisterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Fdb(e) => write!(f, "Database error: {e}"),
            Self::PackError(e) => write!(f, "Pack error: {e:?}"),
            Self::InvalidState(m) => write!(f, "Invalid state: {m}"),
        }
    }
}

impl std::error::Error for RankedRegisterError {}

crate::impls::from_variants!(RankedRegisterError {
    FdbError => Fdb,
    PackError => PackError,
});

/// The register's result type.
pub type Result<T> = std::result::Result<T, RankedRegisterError>;

/// A rank: a sequence number in the high 32 bits, the process id as the tie-breaker in the
/// low ones, so ranks of different processes never tie.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Rank(u64);

impl Rank {
    /// The lowest rank.
    pub const ZERO: Rank = Rank(0);

    /// The rank of `process_id`'s `sequence`-th attempt.
    pub fn new(process_id: u32, sequence: u32) -> Self {
        Rank((u64::from(sequence) << 32) | u64::from(process_id))
    }

    /// The process part.
    pub fn process_id(&self) -> u32 {
        (self.0 & 0xffff_ffff) as u32
    }

    /// The sequence part.
    pub fn sequence(&self) -> u32 {
        (self.0 >> 32) as u32
    }

    /// The rank as stored.
    pub fn as_u64(&self) -> u64 {
        self.0
    }
}

impl From<u64> for Rank {
    fn from(v: u64) -> Self {
        Rank(v)
    }
}

impl fmt::Display for Rank {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Rank(seq={}, pid={})",
            self.sequence(),
            self.process_id()
        )
    }
}

/// The register's stored state.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RegisterState {
    max_read_rank: Rank,
    max_write_rank: Rank,
    value: Option<Vec<u8>>,
}

impl RegisterState {
    /// The highest rank read at.
    pub fn max_read_rank(&self) -> Rank {
        self.max_read_rank
    }

    /// The rank of the value written.
    pub fn max_write_rank(&self) -> Rank {
        self.max_write_rank
    }

    /// The value written, if any.
    pub fn value(&self) -> Option<&[u8]> {
        self.value.as_deref()
    }
}

/// What a read saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadResult {
    write_rank: Rank,
    value: Option<Vec<u8>>,
}

impl ReadResult {
    /// The rank the value was written at.
    pub fn write_rank(&self) -> Rank {
        self.write_rank
    }

    /// The value, if any.
    pub fn value(&self) -> Option<&[u8]> {
        self.value.as_deref()
    }

    /// The value, owned.
    pub fn into_value(self) -> Option<Vec<u8>> {
        self.value
    }
}

/// Whether a write took effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteResult {
    /// It did.
    Committed,
    /// A read or write of a rank as high came first.
    Aborted,
}

impl WriteResult {
    /// Whether it took effect.
    pub fn is_committed(&self) -> bool {
        *self == WriteResult::Committed
    }
}

/// A ranked register under a subspace.
#[derive(Clone, Debug)]
pub struct RankedRegister {
    subspace: Subspace,
}

impl RankedRegister {
    /// The register stored under `subspace`.
    pub fn new(subspace: Subspace) -> Self {
        RankedRegister { subspace }
    }

    /// Its subspace.
    pub fn subspace(&self) -> &Subspace {
        &self.subspace
    }

    fn key(&self) -> Vec<u8> {
        self.subspace.pack(&("state",))
    }

    async fn load(&self, txn: &Transaction) -> Result<RegisterState> {
        let Some(raw) = txn.get(&self.key(), false).await? else {
            return Ok(RegisterState::default());
        };
        let (read, write, has_value, value): (u64, u64, bool, Vec<u8>) = unpack(&raw)?;
        Ok(RegisterState {
            max_read_rank: Rank(read),
            max_write_rank: Rank(write),
            value: has_value.then_some(value),
        })
    }

    fn store(&self, txn: &Transaction, s: &RegisterState) {
        let value: &[u8] = s.value.as_deref().unwrap_or_default();
        let packed = pack(&(
            s.max_read_rank.0,
            s.max_write_rank.0,
            s.value.is_some(),
            value,
        ));
        txn.set(&self.key(), &packed);
    }

    /// Reads at `rank`: the value and its rank, and a promise to abort later writes below
    /// `rank`.
    pub async fn read<T>(&self, txn: &T, rank: Rank) -> Result<ReadResult>
    where
        T: Deref<Target = Transaction>,
    {
        let mut s = self.load(txn).await?;
        if rank > s.max_read_rank {
            s.max_read_rank = rank;
            self.store(txn, &s);
        }
        Ok(ReadResult {
            write_rank: s.max_write_rank,
            value: s.value,
        })
    }

    /// Writes `value` at `rank`, unless a read at a higher rank or a write at one as high
    /// came first.
    pub async fn write<T>(&self, txn: &T, rank: Rank, value: &[u8]) -> Result<WriteResult>
    where
        T: Deref<Target = Transaction>,
    {
        let mut s = self.load(txn).await?;
        if rank < s.max_read_rank || rank <= s.max_write_rank {
            return Ok(WriteResult::Aborted);
        }
        s.max_write_rank = rank;
        s.value = Some(value.to_vec());
        self.store(txn, &s);
        Ok(WriteResult::Committed)
    }

    /// The value, without a rank.
    pub async fn value<T>(&self, txn: &T) -> Result<Option<Vec<u8>>>
    where
        T: Deref<Target = Transaction>,
    {
        Ok(self.load(txn).await?.value)
    }
}
