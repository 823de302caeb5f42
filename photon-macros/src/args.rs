//! Parsing of `key = "value"` attribute arguments.

use proc_macro2::Span;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{Expr, ExprLit, Lit, LitInt, LitStr, Meta, Token};

/// The `name = "value"` pairs and bare flags of an attribute, checked against the
/// accepted names.
pub(crate) struct Args {
    pairs: Vec<(String, LitStr)>,
    integers: Vec<(String, LitInt)>,
    flags: Vec<String>,
}

impl Args {
    /// Parses `tokens` as comma-separated `name = "string"` pairs, each name from `accepted`
    /// and given at most once.
    pub(crate) fn parse(tokens: proc_macro2::TokenStream, accepted: &[&str]) -> syn::Result<Self> {
        Self::parse_with_flags(tokens, accepted, &[])
    }

    /// As [`Args::parse`], also accepting the bare names in `flags` (`transactional`).
    pub(crate) fn parse_with_flags(
        tokens: proc_macro2::TokenStream,
        accepted: &[&str],
        flags: &[&str],
    ) -> syn::Result<Self> {
        Self::parse_all(tokens, accepted, &[], flags)
    }

    /// As [`Args::parse_with_flags`], also accepting `name = 42` for the names in
    /// `integers`.
    pub(crate) fn parse_all(
        tokens: proc_macro2::TokenStream,
        accepted: &[&str],
        integers: &[&str],
        flags: &[&str],
    ) -> syn::Result<Self> {
        let metas = Punctuated::<Meta, Token![,]>::parse_terminated.parse2(tokens)?;
        let mut args = Self {
            pairs: Vec::new(),
            integers: Vec::new(),
            flags: Vec::new(),
        };
        let expected = || {
            let mut names: Vec<&str> = accepted.to_vec();
            names.extend_from_slice(integers);
            names.extend_from_slice(flags);
            names.join("`, `")
        };
        for meta in metas {
            let path = meta.path();
            let name = path
                .get_ident()
                .map(ToString::to_string)
                .ok_or_else(|| syn::Error::new_spanned(path, "expected a plain name"))?;
            let given_twice = args.flags.contains(&name)
                || args.pairs.iter().any(|(seen, _)| *seen == name)
                || args.integers.iter().any(|(seen, _)| *seen == name);
            if given_twice {
                return Err(syn::Error::new_spanned(
                    path,
                    format!("`{name}` given twice"),
                ));
            }
            match meta {
                Meta::Path(_) if flags.contains(&name.as_str()) => args.flags.push(name),
                Meta::NameValue(meta) if integers.contains(&name.as_str()) => {
                    let value = match meta.value {
                        Expr::Lit(ExprLit {
                            lit: Lit::Int(value),
                            ..
                        }) => value,
                        other => {
                            return Err(syn::Error::new_spanned(
                                other,
                                format!("`{name}` takes an integer literal"),
                            ))
                        }
                    };
                    args.integers.push((name, value));
                }
                Meta::NameValue(meta) if accepted.contains(&name.as_str()) => {
                    let value = match meta.value {
                        Expr::Lit(ExprLit {
                            lit: Lit::Str(value),
                            ..
                        }) => value,
                        other => {
                            return Err(syn::Error::new_spanned(
                                other,
                                format!("`{name}` takes a string literal"),
                            ))
                        }
                    };
                    args.pairs.push((name, value));
                }
                other if flags.contains(&name.as_str()) => {
                    return Err(syn::Error::new_spanned(
                        other,
                        format!("`{name}` takes no value"),
                    ))
                }
                other if integers.contains(&name.as_str()) => {
                    return Err(syn::Error::new_spanned(
                        other,
                        format!("`{name}` takes an integer literal"),
                    ))
                }
                other if accepted.contains(&name.as_str()) => {
                    return Err(syn::Error::new_spanned(
                        other,
                        format!("`{name}` takes a string literal"),
                    ))
                }
                other => {
                    return Err(syn::Error::new_spanned(
                        other.path(),
                        format!("unknown argument `{name}`: expected `{}`", expected()),
                    ))
                }
            }
        }
        Ok(args)
    }

    /// Whether the bare flag `name` was given.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.flags.iter().any(|seen| seen == name)
    }

    /// The value of `name`, if given.
    pub(crate) fn get(&self, name: &str) -> Option<&LitStr> {
        self.pairs
            .iter()
            .find(|(seen, _)| seen == name)
            .map(|(_, value)| value)
    }

    /// The integer value of `name`, if given.
    pub(crate) fn integer(&self, name: &str) -> Option<&LitInt> {
        self.integers
            .iter()
            .find(|(seen, _)| seen == name)
            .map(|(_, value)| value)
    }

    /// The value of `name`, or an error pointing at the attribute.
    pub(crate) fn require(&self, name: &str, attribute: &str) -> syn::Result<&LitStr> {
        self.get(name).ok_or_else(|| {
            syn::Error::new(
                Span::call_site(),
                format!("#[{attribute}] needs `{name} = \"...\"`"),
            )
        })
    }
}

/// Checks a topic name with Photon's own rule, at compile time.
pub(crate) fn check_topic(topic: &LitStr) -> syn::Result<()> {
    photon_core::validate_topic_name(&topic.value())
        .map_err(|err| syn::Error::new(topic.span(), err.to_string()))
}
