//! Shrinking a program that differs: drop steps (then initial rows) while it still differs,
//! larger chunks first, so a regression case keeps only what the difference needs.

use super::program::Program;

/// The smallest program found from `p` for which `differs` still holds, trying at most
/// `budget` candidates (each one is a run on every side).
pub fn shrink(p: &Program, budget: usize, mut differs: impl FnMut(&Program) -> bool) -> Program {
    let mut best = p.clone();
    let mut tries = 0;
    for field in [Field::Steps, Field::Init] {
        let mut chunk = field.len(&best).div_ceil(2).max(1);
        loop {
            let mut i = 0;
            while i < field.len(&best) {
                if tries >= budget {
                    return best;
                }
                let mut c = best.clone();
                field.remove(&mut c, i, chunk);
                tries += 1;
                if differs(&c) {
                    best = c; // keep i: the next chunk moved into place
                } else {
                    i += chunk;
                }
            }
            if chunk == 1 {
                break;
            }
            chunk = chunk.div_ceil(2);
        }
    }
    best
}

#[derive(Clone, Copy)]
enum Field {
    Steps,
    Init,
}

impl Field {
    fn len(self, p: &Program) -> usize {
        match self {
            Field::Steps => p.steps.len(),
            Field::Init => p.init.len(),
        }
    }
    fn remove(self, p: &mut Program, at: usize, n: usize) {
        match self {
            Field::Steps => {
                let end = (at + n).min(p.steps.len());
                p.steps.drain(at..end);
            }
            Field::Init => {
                let end = (at + n).min(p.init.len());
                p.init.drain(at..end);
            }
        }
    }
}
