//! foundationdb-rs's raw option enums to the core's typed ones.

use crate::options::StreamingMode as Raw;
use fdb_protocol::StreamingMode;

pub(crate) fn streaming_mode(m: Raw) -> StreamingMode {
    match m {
        Raw::WantAll => StreamingMode::WantAll,
        Raw::Iterator => StreamingMode::Iterator,
        Raw::Exact => StreamingMode::Exact,
        Raw::Small => StreamingMode::Small,
        Raw::Medium => StreamingMode::Medium,
        Raw::Large => StreamingMode::Large,
        Raw::Serial => StreamingMode::Serial,
    }
}
