//! `foundationdb_sys` for the upstream files: they import only its `if_cfg_api_versions!`
//! macro, and the real crate needs libfdb_c's headers and library. `run.sh` builds this
//! file as a proc-macro crate named `foundationdb-sys`. The version it compares with is the
//! harness's, 730 (the `fdb-7_3` feature), or `FDB_COMPAT_UPSTREAM_API` when it was built.
//!
//! `if_cfg_api_versions!(min = A, max = B => tokens)` gives `{ tokens }` when A <= version
//! <= B, nothing otherwise; `=> { then } else { other }` gives one of the two blocks.

extern crate proc_macro;
use proc_macro::{Delimiter, Group, TokenStream, TokenTree};

fn version() -> i64 {
    option_env!("FDB_COMPAT_UPSTREAM_API")
        .and_then(|v| v.parse().ok())
        .unwrap_or(730)
}

#[proc_macro]
pub fn if_cfg_api_versions(input: TokenStream) -> TokenStream {
    let tokens: Vec<TokenTree> = input.into_iter().collect();
    let (mut min, mut max) = (i64::MIN, i64::MAX);
    let mut i = 0;
    // `key = value` pairs, comma separated, until `=>`.
    loop {
        match (&tokens[i], &tokens[i + 1]) {
            (TokenTree::Punct(a), TokenTree::Punct(b)) if a.as_char() == '=' && b.as_char() == '>' => {
                i += 2;
                break;
            }
            (TokenTree::Ident(k), TokenTree::Punct(eq)) if eq.as_char() == '=' => {
                let v = tokens[i + 2].to_string();
                match k.to_string().as_str() {
                    "min" => min = v.parse().expect("min is a number"),
                    "max" => max = v.parse().expect("max is a number"),
                    // A feature condition: the harness enables none of the others.
                    _ => {}
                }
                i += 3;
                if let TokenTree::Punct(c) = &tokens[i] {
                    if c.as_char() == ',' {
                        i += 1;
                    }
                }
            }
            _ => panic!("if_cfg_api_versions: unexpected input"),
        }
    }
    let rest = &tokens[i..];
    let yes = (min..=max).contains(&version());
    let block = |ts: TokenStream| TokenStream::from(TokenTree::Group(Group::new(Delimiter::Brace, ts)));
    match rest {
        [TokenTree::Group(then), TokenTree::Ident(e), TokenTree::Group(other)]
            if e.to_string() == "else" && then.delimiter() == Delimiter::Brace =>
        {
            block(if yes { then.stream() } else { other.stream() })
        }
        _ if yes => block(rest.iter().cloned().collect()),
        _ => TokenStream::new(),
    }
}
