//! The stack machine's stack: items tagged with the instruction that pushed them, some of
//! them futures that are waited for only when popped (as the bindings' testers do), so an
//! error surfaces at the same instruction as in the reference tester.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use fdb_protocol::tuple::Element;

use crate::value::Fatal;

/// A future result: its element once waited for (an error becomes the packed error tuple).
pub type ItemFuture = Pin<Box<dyn Future<Output = Result<Element<'static>, Fatal>> + Send>>;

pub enum Slot {
    Waiting(ItemFuture),
    Ready(Element<'static>),
    /// Being waited for (never seen: the stack belongs to one machine).
    Taken,
}

/// A stack item: a value, or a future shared by its duplicates (`DUP`).
#[derive(Clone)]
pub enum Item {
    Value(Element<'static>),
    Future(Arc<Mutex<Slot>>),
}

impl Item {
    pub fn future(
        f: impl Future<Output = Result<Element<'static>, Fatal>> + Send + 'static,
    ) -> Item {
        Item::Future(Arc::new(Mutex::new(Slot::Waiting(Box::pin(f)))))
    }

    /// A future started now, as the reference binding's calls start when made: the fdb-api
    /// futures of `commit` and `on_error` send their request when first polled, so it is
    /// polled once here (with a waker that does nothing; the later wait polls it again).
    pub fn started(
        f: impl Future<Output = Result<Element<'static>, Fatal>> + Send + 'static,
    ) -> Item {
        let mut f: Pin<Box<dyn Future<Output = Result<Element<'static>, Fatal>> + Send>> =
            Box::pin(f);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match f.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(Ok(v)) => Item::Value(v),
            std::task::Poll::Ready(Err(e)) => Item::future(async move { Err(e) }),
            std::task::Poll::Pending => Item::Future(Arc::new(Mutex::new(Slot::Waiting(f)))),
        }
    }

    /// The item's value, waiting for it if it is a future.
    pub async fn resolve(self) -> Result<Element<'static>, Fatal> {
        let slot = match self {
            Item::Value(v) => return Ok(v),
            Item::Future(slot) => slot,
        };
        let taken = std::mem::replace(&mut *slot.lock().expect("stack slot"), Slot::Taken);
        let value = match taken {
            Slot::Ready(v) => v,
            Slot::Waiting(f) => f.await?,
            Slot::Taken => return Err(Fatal("a future was waited for twice at once".into())),
        };
        *slot.lock().expect("stack slot") = Slot::Ready(value.clone());
        Ok(value)
    }
}

/// One stack entry: the item and the number of the instruction that pushed it.
#[derive(Clone)]
pub struct Entry {
    pub index: usize,
    pub item: Item,
}

/// The stack; its top is the end of the vector.
#[derive(Default)]
pub struct Stack {
    entries: Vec<Entry>,
}

impl Stack {
    pub fn push(&mut self, index: usize, item: Item) {
        self.entries.push(Entry { index, item });
    }

    pub fn push_value(&mut self, index: usize, v: Element<'static>) {
        self.push(index, Item::Value(v));
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn clear(&mut self) {
        self.entries.clear();
    }

    pub fn top(&self) -> Result<Entry, Fatal> {
        self.entries
            .last()
            .cloned()
            .ok_or_else(|| Fatal("the stack is empty".into()))
    }

    /// Swaps the top with the item `depth` below it.
    pub fn swap(&mut self, depth: usize) -> Result<(), Fatal> {
        let n = self.entries.len();
        if depth >= n {
            return Err(Fatal(format!("SWAP {depth} on a stack of {n}")));
        }
        self.entries.swap(n - 1, n - 1 - depth);
        Ok(())
    }

    /// Pops the top entry, its future waited for.
    pub async fn pop_entry(&mut self) -> Result<(usize, Element<'static>), Fatal> {
        let e = self
            .entries
            .pop()
            .ok_or_else(|| Fatal("pop from an empty stack".into()))?;
        Ok((e.index, e.item.resolve().await?))
    }

    pub async fn pop(&mut self) -> Result<Element<'static>, Fatal> {
        Ok(self.pop_entry().await?.1)
    }

    /// Pops `n` items, top first.
    pub async fn pop_n(&mut self, n: usize) -> Result<Vec<Element<'static>>, Fatal> {
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(self.pop().await?);
        }
        Ok(out)
    }
}
