//! The client's own `tracing` events into the trace file. The core and the mio driver log
//! through `tracing`; the databases' loop threads, where they run, get a subscriber of
//! their own that writes each event at info level and above to the trace file and passes
//! every event on to the subscriber the program had (its global one), so turning trace
//! files on takes nothing from the program's own logging.
//!
//! An event becomes an FDB event named after its message in CamelCase (`connection
//! failed` → `ConnectionFailed`), its fields details named the same way (`addr` → `Addr`).

use std::fmt;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::{DefaultGuard, Interest};
use tracing::{Dispatch, Event, Level, Metadata, Subscriber};

use super::Severity;

/// Makes the calling thread's events go to the trace file too, for as long as the guard
/// lives. The program's subscriber at this moment keeps getting every event.
pub(crate) fn install_on_this_thread() -> DefaultGuard {
    let program = tracing::dispatcher::get_default(Dispatch::clone);
    tracing::subscriber::set_default(Bridge { program })
}

struct Bridge {
    program: Dispatch,
}

/// The events the trace file takes: those at info level and above (libfdb_c's file takes
/// `SevInfo` and above).
fn written(m: &Metadata<'_>) -> bool {
    m.is_event() && *m.level() <= Level::INFO
}

impl Subscriber for Bridge {
    fn register_callsite(&self, m: &'static Metadata<'static>) -> Interest {
        let program = self.program.register_callsite(m);
        if written(m) {
            Interest::always()
        } else {
            program
        }
    }

    fn enabled(&self, m: &Metadata<'_>) -> bool {
        written(m) || self.program.enabled(m)
    }

    fn event(&self, event: &Event<'_>) {
        let m = event.metadata();
        if written(m) {
            let mut fields = Fields::default();
            event.record(&mut fields);
            let severity = match *m.level() {
                Level::ERROR => Severity::Error,
                Level::WARN => Severity::WarnAlways,
                _ => Severity::Info,
            };
            super::client_event(severity, camel(&fields.message), fields.details);
        }
        if self.program.enabled(m) {
            self.program.event(event);
        }
    }

    // Spans belong to the program's subscriber (the client opens none).
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        self.program.new_span(span)
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        self.program.record(span, values)
    }

    fn record_follows_from(&self, span: &Id, follows: &Id) {
        self.program.record_follows_from(span, follows)
    }

    fn enter(&self, span: &Id) {
        self.program.enter(span)
    }

    fn exit(&self, span: &Id) {
        self.program.exit(span)
    }

    fn clone_span(&self, id: &Id) -> Id {
        self.program.clone_span(id)
    }

    fn try_close(&self, id: Id) -> bool {
        self.program.try_close(id)
    }
}

/// An event's message and its other fields, as text.
#[derive(Default)]
struct Fields {
    message: String,
    details: Vec<(String, String)>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, format!("{value:?}"));
    }
}

impl Fields {
    fn put(&mut self, field: &Field, value: String) {
        if field.name() == "message" {
            self.message = value;
        } else {
            self.details.push((camel(field.name()), value));
        }
    }
}

/// `connection failed` and `connection_string` → `ConnectionFailed`, `ConnectionString`:
/// words start with a capital, and only letters and digits are kept (an apostrophe joins).
fn camel(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut up = true;
    for c in s.chars() {
        if c == '\'' {
            continue;
        }
        if c.is_ascii_alphanumeric() {
            if up {
                out.push(c.to_ascii_uppercase());
            } else {
                out.push(c);
            }
            up = false;
        } else {
            up = true;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_camel_case() {
        assert_eq!(camel("connection failed"), "ConnectionFailed");
        assert_eq!(camel("connection_string"), "ConnectionString");
        assert_eq!(
            camel("the cluster's protocol changed"),
            "TheClustersProtocolChanged"
        );
        assert_eq!(camel("addr"), "Addr");
    }
}
