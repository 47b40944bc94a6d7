//! The operations on one key (`OperationStack`, `RYWMutation`) and how a new one coalesces
//! over them (`WriteMap::coalesce`, `coalesceOver`, `coalesceUnder`).

use bytes::Bytes;
use smallvec::SmallVec;

use crate::atomic;
use crate::keys::mutation_type as mt;

/// One operation on a key (`RYWMutation`): `value` is `None` only for a set that clears.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RywMutation {
    pub(crate) value: Option<Bytes>,
    pub(crate) kind: u8,
}

impl RywMutation {
    pub(super) fn new(kind: u8, value: Option<Bytes>) -> Self {
        RywMutation { value, kind }
    }
}

/// `MutationRef::ATOMIC_MASK`: every single-key op but set (versionstamps included).
pub(super) fn is_atomic_kind(kind: u8) -> bool {
    atomic::is_atomic_op(kind)
        || kind == mt::SET_VERSIONSTAMPED_KEY
        || kind == mt::SET_VERSIONSTAMPED_VALUE
}

/// `isNonAssociativeOp`: ops that combine only when their operands have one length.
fn is_non_associative(kind: u8) -> bool {
    matches!(
        kind,
        mt::ADD_VALUE
            | mt::OR
            | mt::XOR
            | mt::MAX
            | mt::MIN
            | mt::SET_VERSIONSTAMPED_KEY
            | mt::SET_VERSIONSTAMPED_VALUE
            | mt::MIN_V2
            | mt::COMPARE_AND_CLEAR
    )
}

/// The operations on one key, oldest first (`OperationStack`). One operation needs no
/// allocation of its own.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct OpStack(SmallVec<[RywMutation; 1]>);

impl OpStack {
    pub(super) fn one(m: RywMutation) -> Self {
        let mut s = SmallVec::new();
        s.push(m);
        OpStack(s)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn ops(&self) -> &[RywMutation] {
        &self.0
    }

    /// Depends on the stored value: the oldest operation is an atomic op.
    pub(crate) fn is_dependent(&self) -> bool {
        self.0.first().is_some_and(|m| {
            !matches!(
                m.kind,
                mt::SET_VALUE
                    | mt::CLEAR_RANGE
                    | mt::SET_VERSIONSTAMPED_VALUE
                    | mt::SET_VERSIONSTAMPED_KEY
            )
        })
    }

    pub(super) fn push(&mut self, m: RywMutation) {
        self.0.push(m);
    }

    fn replace_top(&mut self, m: RywMutation) {
        match self.0.last_mut() {
            Some(top) => *top = m,
            None => self.0.push(m),
        }
    }

    /// `coalesceOver`: a new operation on top, merged with the newest one where FDB merges.
    pub(super) fn coalesce_over(&mut self, new: RywMutation) {
        let Some(top) = self.0.last() else {
            self.0.push(new);
            return;
        };
        let merge = if top.kind == new.kind && new.kind != mt::COMPARE_AND_CLEAR {
            !(is_non_associative(top.kind)
                && top
                    .value
                    .as_ref()
                    .is_some_and(|v| v.len() != new.value.as_ref().map_or(0, Bytes::len)))
        } else {
            !(is_atomic_kind(new.kind) && is_atomic_kind(top.kind))
        };
        match merge.then(|| coalesce(top, &new)).flatten() {
            Some(m) => self.replace_top(m),
            None => self.push(new),
        }
    }

    /// `coalesceUnder`: the key's value given the stored one.
    pub(crate) fn value_over(&self, stored: Option<&Bytes>) -> Option<Bytes> {
        if !self.is_dependent() && self.0.len() == 1 {
            return self.0[0].value.clone();
        }
        let mut cur = RywMutation::new(mt::SET_VALUE, stored.cloned());
        for m in &self.0 {
            if let Some(next) = coalesce(&cur, m) {
                cur = next;
            }
        }
        cur.value
    }
}

/// `WriteMap::coalesce`: one operation equivalent to `new` applied after `existing`; `None`
/// where FDB fails (`operation_failed`), which its callers never reach.
fn coalesce(existing: &RywMutation, new: &RywMutation) -> Option<RywMutation> {
    let param = new.value.as_deref().unwrap_or(&[]);
    match new.kind {
        mt::SET_VALUE | mt::SET_VERSIONSTAMPED_VALUE => Some(new.clone()),
        mt::COMPARE_AND_CLEAR => match existing.kind {
            mt::SET_VALUE => {
                let kept = atomic::apply(new.kind, existing.value.as_deref(), param).is_some();
                Some(if kept {
                    existing.clone()
                } else {
                    RywMutation::new(mt::SET_VALUE, None)
                })
            }
            _ => None,
        },
        k if atomic::is_atomic_op(k) => {
            // Over a set the result is a set; over the same op, the combined operand.
            if existing.kind != mt::SET_VALUE && existing.kind != k {
                return None;
            }
            let v = atomic::apply(k, existing.value.as_deref(), param).map(Bytes::from);
            Some(RywMutation::new(existing.kind, v))
        }
        _ => None,
    }
}
