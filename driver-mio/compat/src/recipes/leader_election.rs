//! Leader election with leases: candidates register and heartbeat, one of them holds a lease
//! on leadership and refreshes it; when the lease runs out (or the leader resigns, or, with
//! preemption, a candidate of a higher priority claims), another candidate may claim it.
//! Every call runs in the caller's transaction: FDB's serializability decides races, and
//! each claim is one read and one write of one key.
//!
//! The stored layout is foundationdb-rs 0.11's, value for value, so processes on either
//! crate can share one election during a migration. Under the election's subspace:
//! - `("config",)`: `(lease_ns, heartbeat_ns, candidate_timeout_ns, enabled, preemption)`;
//! - `("leader",)`: `(ballot, leader_id, priority, lease_expiry_ns, stamp)`, the stamp as
//!   12 plain bytes: the leader's registration versionstamp, not one of the claim;
//! - `("candidates", process_id)`: `(priority, heartbeat_ns, versionstamp)`, the
//!   versionstamp written once by the registering commit and kept by heartbeats.
//!
//! Times are nanoseconds since the Unix epoch, as the callers pass them.

use std::fmt;
use std::ops::Deref;
use std::time::Duration;

use crate::error::FdbError;
use crate::options::MutationType;
use crate::transaction::{RangeOption, Transaction};
use crate::tuple::{pack, pack_with_versionstamp, unpack, PackError, Subspace, Versionstamp};

/// Default lease: 10 s.
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(10);
/// Default heartbeat interval: 3 s.
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(3);
/// Default time after which a silent candidate is dead: 15 s.
pub const DEFAULT_CANDIDATE_TIMEOUT: Duration = Duration::from_secs(15);

/// The election's errors.
#[derive(Debug)]
pub enum LeaderElectionError {
    /// The configuration disables elections.
    ElectionDisabled,
    /// No such process.
    ProcessNotFound(String),
    /// `initialize` was not called.
    NotInitialized,
    /// Stored state makes no sense.
    InvalidState(String),
    /// The transaction failed.
    Fdb(FdbError),
    /// Stored state did not unpack.
    PackError(PackError),
    /// The process is not a registered candidate.
    UnregisteredCandidate,
}

impl fmt::Display for LeaderElectionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ElectionDisabled => write!(f, "Election is currently disabled"),
            Self::ProcessNotFound(id) => write!(f, "Process not found: {id}"),
            Self::NotInitialized => write!(f, "Global configuration not initialized"),
            Self::InvalidState(m) => write!(f, "Invalid state: {m}"),
            Self::Fdb(e) => write!(f, "Database error: {e}"),
            Self::PackError(e) => write!(f, "Pack error: {e:?}"),
            Self::UnregisteredCandidate => write!(f, "Candidate not registered"),
        }
    }
}

impl std::error::Error for LeaderElectionError {}

crate::impls::from_variants!(LeaderElectionError {
    FdbError => Fdb,
    PackError => PackError,
});

/// The election's result type.
pub type Result<T> = std::result::Result<T, LeaderElectionError>;

/// The current lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderState {
    /// The term: one more at each change of leader.
    pub ballot: u64,
    /// The leader.
    pub leader_id: String,
    /// Its priority.
    pub priority: i32,
    /// When the lease ends (ns since the epoch).
    pub lease_expiry_nanos: u64,
    /// The versionstamp of the claim (incomplete until the claiming transaction commits).
    pub versionstamp: [u8; 12],
}

impl LeaderState {
    /// Whether the lease still holds at `current_time`.
    pub fn is_lease_valid(&self, current_time: Duration) -> bool {
        current_time.as_nanos() < u128::from(self.lease_expiry_nanos)
    }

    /// What is left of the lease at `current_time`.
    pub fn remaining_lease(&self, current_time: Duration) -> Option<Duration> {
        let now = nanos(current_time);
        (now < self.lease_expiry_nanos).then(|| Duration::from_nanos(self.lease_expiry_nanos - now))
    }
}

/// A registered candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CandidateInfo {
    /// Its process id.
    pub process_id: String,
    /// Its priority (a higher one may preempt, if allowed).
    pub priority: i32,
    /// Its last heartbeat (ns since the epoch).
    pub last_heartbeat_nanos: u64,
    /// The versionstamp of its registration.
    pub versionstamp: [u8; 12],
}

impl CandidateInfo {
    /// Whether it heartbeated within `timeout` of `current_time`.
    pub fn is_alive(&self, current_time: Duration, timeout: Duration) -> bool {
        current_time.saturating_sub(Duration::from_nanos(self.last_heartbeat_nanos)) < timeout
    }
}

/// What an election cycle found.
#[derive(Debug, Clone)]
pub enum ElectionResult {
    /// This process leads.
    Leader(LeaderState),
    /// Another does, or none.
    Follower(Option<LeaderState>),
}

impl ElectionResult {
    /// Whether this process leads.
    pub fn is_leader(&self) -> bool {
        matches!(self, ElectionResult::Leader(_))
    }

    /// The lease, whoever holds it.
    pub fn leader_state(&self) -> Option<&LeaderState> {
        match self {
            ElectionResult::Leader(s) | ElectionResult::Follower(Some(s)) => Some(s),
            ElectionResult::Follower(None) => None,
        }
    }
}

/// The election's configuration.
#[derive(Debug, Clone)]
pub struct ElectionConfig {
    /// How long a claim or refresh holds.
    pub lease_duration: Duration,
    /// How often candidates should heartbeat.
    pub heartbeat_interval: Duration,
    /// How long a silent candidate stays alive.
    pub candidate_timeout: Duration,
    /// Whether candidates may register and claim.
    pub election_enabled: bool,
    /// Whether a higher priority takes over a valid lease.
    pub allow_preemption: bool,
}

impl Default for ElectionConfig {
    fn default() -> Self {
        ElectionConfig {
            lease_duration: DEFAULT_LEASE_DURATION,
            heartbeat_interval: DEFAULT_HEARTBEAT_INTERVAL,
            candidate_timeout: DEFAULT_CANDIDATE_TIMEOUT,
            election_enabled: true,
            allow_preemption: true,
        }
    }
}

impl ElectionConfig {
    /// A configuration around `lease_duration`: heartbeats at a third of it, candidates
    /// dead after one and a half.
    pub fn with_lease_duration(lease_duration: Duration) -> Self {
        ElectionConfig {
            lease_duration,
            heartbeat_interval: lease_duration / 3,
            candidate_timeout: lease_duration + lease_duration / 2,
            election_enabled: true,
            allow_preemption: true,
        }
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A leader election under a subspace.
#[derive(Clone, Debug)]
pub struct LeaderElection {
    subspace: Subspace,
}

/// The leader record; the stamp is plain bytes here (a tuple `Bytes`), as foundationdb-rs
/// writes it, while candidate records hold a tuple `Versionstamp`.
type LeaderRecord = (u64, String, i32, u64, Vec<u8>);
type CandidateRecord = (i32, u64, Versionstamp);

impl LeaderElection {
    /// The election stored under `subspace`.
    pub fn new(subspace: Subspace) -> Self {
        LeaderElection { subspace }
    }

    fn config_key(&self) -> Vec<u8> {
        self.subspace.pack(&("config",))
    }

    fn leader_key(&self) -> Vec<u8> {
        self.subspace.pack(&("leader",))
    }

    fn candidates(&self) -> Subspace {
        self.subspace.subspace(&("candidates",))
    }

    fn candidate_key(&self, process_id: &str) -> Vec<u8> {
        self.candidates().pack(&(process_id,))
    }

    /// Writes the default configuration unless one exists.
    pub async fn initialize<T: Deref<Target = Transaction>>(&self, txn: &T) -> Result<()> {
        self.initialize_with_config(txn, ElectionConfig::default())
            .await
    }

    /// Writes `config` unless a configuration exists (an existing one is kept, as in
    /// foundationdb-rs; [`write_config`](Self::write_config) replaces it).
    pub async fn initialize_with_config<T: Deref<Target = Transaction>>(
        &self,
        txn: &T,
        config: ElectionConfig,
    ) -> Result<()> {
        if txn.get(&self.config_key(), false).await?.is_none() {
            self.write_config(txn, &config).await?;
        }
        Ok(())
    }

    // foundationdb-rs's recipe methods: each keeps its own public signature.
    /// Replaces the configuration.
    pub async fn write_config<T: Deref<Target = Transaction>>(
        &self,
        txn: &T,
        config: &ElectionConfig,
    ) -> Result<()> {
        let value = pack(&(
            nanos(config.lease_duration),
            nanos(config.heartbeat_interval),
            nanos(config.candidate_timeout),
            config.election_enabled,
            config.allow_preemption,
        ));
        txn.set(&self.config_key(), &value);
        Ok(())
    }

    /// The configuration (`NotInitialized` without one).
    pub async fn read_config<T: Deref<Target = Transaction>>(
        &self,
        txn: &T,
    ) -> Result<ElectionConfig> {
        let raw = txn
            .get(&self.config_key(), false)
            .await?
            .ok_or(LeaderElectionError::NotInitialized)?;
        let (lease, heartbeat, timeout, enabled, preemption): (u64, u64, u64, bool, bool) =
            unpack(&raw)?;
        Ok(ElectionConfig {
            lease_duration: Duration::from_nanos(lease),
            heartbeat_interval: Duration::from_nanos(heartbeat),
            candidate_timeout: Duration::from_nanos(timeout),
            election_enabled: enabled,
            allow_preemption: preemption,
        })
    }

    async fn enabled_config<T: Deref<Target = Transaction>>(
        &self,
        txn: &T,
    ) -> Result<ElectionConfig> {
        let config = self.read_config(txn).await?;
        if !config.election_enabled {
            return Err(LeaderElectionError::ElectionDisabled);
        }
        Ok(config)
    }

    // The public methods keep foundationdb-rs's signatures, alike by design.
    /// Registers (or re-registers, with a new versionstamp) a candidate, heartbeating now.
    pub async fn register_candidate<T: Deref<Target = Transaction>>(
        &self,
        txn: &T,
        process_id: &str,
        priority: i32,
        current_time: Duration,
    ) -> Result<()> {
        self.enabled_config(txn).await?;
        let value =
            pack_with_versionstamp(&(priority, nanos(current_time), Versionstamp::incomplete(0)));
        txn.atomic_op(
            &self.candidate_key(process_id),
            &value,
            MutationType::SetVersionstampedValue,
        );
        Ok(())
    }

    /// A registered candidate's heartbeat (and its priority now); its registration
    /// versionstamp is kept. `ProcessNotFound` when it is not registered.
    pub async fn heartbeat_candidate<T: Deref<Target = Transaction>>(
        &self,
        txn: &T,
        process_id: &str,
        priority: i32,
        current_time: Duration,
    ) -> Result<()> {
        self.enabled_config(txn).await?;
        let key = self.candidate_key(process_id);
        let raw = txn
            .get(&key, false)
            .await?
            .ok_or_else(|| LeaderElectionError::ProcessNotFound(process_id.to_string()))?;
        let (_, _, stamp): CandidateRecord = unpack(&raw)?;
        txn.set(&key, &pack(&(priority, nanos(current_time), stamp)));
        Ok(())
    }

    /// Removes a candidate.
    pub async fn unregister_candidate<T: Deref<Target = Transaction>>(
        &self,
        txn: &T,
        process_id: &str,
    ) -> Result<()> {
        txn.clear(&self.candidate_key(process_id));
        Ok(())
    }

    /// A candidate, if registered.
    pub async fn get_candidate<T: Deref<Target = Transaction>>(
        &self,
        txn: &T,
        process_id: &str,
    ) -> Result<Option<CandidateInfo>> {
        let Some(raw) = txn.get(&self.candidate_key(process_id), false).await? else {
            return Ok(None);
        };
        Ok(Some(candidate(process_id.to_string(), &raw)?))
    }

    async fn all_candidates<T: Deref<Target = Transaction>>(
        &self,
        txn: &T,
    ) -> Result<Vec<CandidateInfo>> {
        let candidates = self.candidates();
        let mut out = Vec::new();
        let mut opt = Some(RangeOption::from(&candidates));
        let mut iteration = 1;
        while let Some(o) = opt {
            let batch = txn.get_range(&o, iteration, false).await?;
            for kv in batch.iter() {
                let (id,): (String,) = candidates.unpack(kv.key())?;
                out.push(candidate(id, kv.value())?);
            }
            iteration += 1;
            opt = o.next_range(&batch);
        }
        Ok(out)
    }

    /// The candidates alive at `current_time`, in order of registration (versionstamp).
    pub async fn list_candidates<T: Deref<Target = Transaction>>(
        &self,
        txn: &T,
        current_time: Duration,
    ) -> Result<Vec<CandidateInfo>> {
        let timeout = self.read_config(txn).await?.candidate_timeout;
        let mut all = self.all_candidates(txn).await?;
        all.retain(|c| c.is_alive(current_time, timeout));
        all.sort_by_key(|c| c.versionstamp);
        Ok(all)
    }

    /// Removes the candidates dead at `current_time`; how many.
    pub async fn evict_dead_candidates<T: Deref<Target = Transaction>>(
        &self,
        txn: &T,
        current_time: Duration,
    ) -> Result<usize> {
        let timeout = self.read_config(txn).await?.candidate_timeout;
        let mut n = 0;
        for c in self.all_candidates(txn).await? {
            if !c.is_alive(current_time, timeout) {
                txn.clear(&self.candidate_key(&c.process_id));
                n += 1;
            }
        }
        Ok(n)
    }

    /// Takes (or keeps) the lease when there is none, it ran out, this process holds it,
    /// or (with preemption) this process's priority is higher than the leader's; every
    /// claim moves the ballot on by one. Only a registered candidate may claim
    /// (`UnregisteredCandidate`). `None`: another process holds a valid lease.
    pub async fn try_claim_leadership<T: Deref<Target = Transaction>>(
        &self,
        txn: &T,
        process_id: &str,
        priority: i32,
        current_time: Duration,
    ) -> Result<Option<LeaderState>> {
        let config = self.enabled_config(txn).await?;
        let me = self
            .get_candidate(txn, process_id)
            .await?
            .ok_or(LeaderElectionError::UnregisteredCandidate)?;
        let current = self.get_leader_raw(txn).await?;
        let may_claim = current.as_ref().is_none_or(|l| {
            l.leader_id == process_id
                || !l.is_lease_valid(current_time)
                || (config.allow_preemption && priority > l.priority)
        });
        if !may_claim {
            return Ok(None);
        }
        let state = LeaderState {
            ballot: current.map_or(1, |l| l.ballot + 1),
            leader_id: process_id.to_string(),
            priority,
            lease_expiry_nanos: nanos(current_time + config.lease_duration),
            versionstamp: me.versionstamp,
        };
        self.write_leader(txn, &state);
        Ok(Some(state))
    }

    /// Extends the lease of the leader `process_id` (moving the ballot on by one), if the
    /// stored leader is still `process_id`; as in foundationdb-rs, an expired lease of the
    /// same process is extended too.
    pub async fn refresh_lease<T: Deref<Target = Transaction>>(
        &self,
        txn: &T,
        process_id: &str,
        current_time: Duration,
    ) -> Result<Option<LeaderState>> {
        let config = self.read_config(txn).await?;
        match self.get_leader_raw(txn).await? {
            Some(mut state) if state.leader_id == process_id => {
                state.ballot += 1;
                state.lease_expiry_nanos = nanos(current_time + config.lease_duration);
                self.write_leader(txn, &state);
                Ok(Some(state))
            }
            _ => Ok(None),
        }
    }

    fn write_leader<T: Deref<Target = Transaction>>(&self, txn: &T, state: &LeaderState) {
        let record = (
            state.ballot,
            state.leader_id.as_str(),
            state.priority,
            state.lease_expiry_nanos,
            state.versionstamp.to_vec(),
        );
        txn.set(&self.leader_key(), &pack(&record));
    }

    /// Gives the lease up, if `process_id` holds it; whether it did.
    pub async fn resign_leadership<T: Deref<Target = Transaction>>(
        &self,
        txn: &T,
        process_id: &str,
    ) -> Result<bool> {
        match self.get_leader_raw(txn).await? {
            Some(l) if l.leader_id == process_id => {
                txn.clear(&self.leader_key());
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Whether `process_id` holds a valid lease at `current_time`.
    pub async fn is_leader<T: Deref<Target = Transaction>>(
        &self,
        txn: &T,
        process_id: &str,
        current_time: Duration,
    ) -> Result<bool> {
        self.enabled_config(txn).await?;
        Ok(self
            .get_leader(txn, current_time)
            .await?
            .is_some_and(|l| l.leader_id == process_id))
    }

    /// The lease, if valid at `current_time`.
    pub async fn get_leader<T: Deref<Target = Transaction>>(
        &self,
        txn: &T,
        current_time: Duration,
    ) -> Result<Option<LeaderState>> {
        Ok(self
            .get_leader_raw(txn)
            .await?
            .filter(|l| l.is_lease_valid(current_time)))
    }

    /// The stored lease, valid or not.
    pub async fn get_leader_raw<T: Deref<Target = Transaction>>(
        &self,
        txn: &T,
    ) -> Result<Option<LeaderState>> {
        let Some(raw) = txn.get(&self.leader_key(), false).await? else {
            return Ok(None);
        };
        let (ballot, leader_id, priority, expiry, stamp): LeaderRecord = unpack(&raw)?;
        let versionstamp = <[u8; 12]>::try_from(stamp.as_slice())
            .map_err(|_| LeaderElectionError::InvalidState("versionstamp length".into()))?;
        Ok(Some(LeaderState {
            ballot,
            leader_id,
            priority,
            lease_expiry_nanos: expiry,
            versionstamp,
        }))
    }

    /// One round for a registered `process_id`: its heartbeat (`ProcessNotFound` if it
    /// never registered), then a claim, which also refreshes its own lease.
    pub async fn run_election_cycle<T: Deref<Target = Transaction>>(
        &self,
        txn: &T,
        process_id: &str,
        priority: i32,
        current_time: Duration,
    ) -> Result<ElectionResult> {
        self.heartbeat_candidate(txn, process_id, priority, current_time)
            .await?;
        match self
            .try_claim_leadership(txn, process_id, priority, current_time)
            .await?
        {
            Some(s) => Ok(ElectionResult::Leader(s)),
            None => Ok(ElectionResult::Follower(
                self.get_leader(txn, current_time).await?,
            )),
        }
    }
}

fn candidate(process_id: String, raw: &[u8]) -> Result<CandidateInfo> {
    let (priority, heartbeat, stamp): CandidateRecord = unpack(raw)?;
    Ok(CandidateInfo {
        process_id,
        priority,
        last_heartbeat_nanos: heartbeat,
        versionstamp: *stamp.as_bytes(),
    })
}
