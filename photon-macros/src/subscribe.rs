//! `#[subscribe]`: registers an async fn as a durable (or consumer-group) handler through
//! `inventory`.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::{FnArg, ItemFn};

use crate::args::{check_topic, Args};
use crate::transactional;

/// Expands `#[subscribe(topic = "...", durable = "...", key = "...", group = "...")]` on
/// `item`, with the policy arguments `max_attempts = 5`, `initial_backoff = "100ms"`,
/// `max_backoff = "10s"`, `timeout = "30s"`, `concurrency = 4` and the flag
/// `requeue_retries`. With `group` alone, the
/// group name is also the handler's durable name. With `batch_max = 100` and
/// `batch_wait = "50ms"` the function is a batch handler: its first argument is a
/// `Vec<Event>` or `Vec<TypedEvent<T>>`.
pub(crate) fn expand(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let args = Args::parse_all(
        attr,
        &[
            "topic",
            "durable",
            "key",
            "group",
            "initial_backoff",
            "max_backoff",
            "timeout",
            "batch_wait",
        ],
        &["max_attempts", "concurrency", "batch_max"],
        &["transactional", "requeue_retries"],
    )?;
    if args.has("requeue_retries") && (args.has("transactional") || batched(&args)) {
        return Err(syn::Error::new(
            proc_macro2::Span::call_site(),
            "`requeue_retries` requeues one event: a batch or transactional handler has none to requeue",
        ));
    }
    let policy = policy_tokens(&args)?;
    let group = args.get("group");
    let durable = match (args.get("durable"), group) {
        (Some(durable), _) => durable,
        (None, Some(group)) => group,
        (None, None) => args.require("durable", "subscribe")?,
    };
    if durable.value().is_empty() {
        return Err(syn::Error::new(
            durable.span(),
            "`durable` must not be empty",
        ));
    }
    if let Some(group) = group {
        if group.value().is_empty() {
            return Err(syn::Error::new(group.span(), "`group` must not be empty"));
        }
        if let Some(key) = args.get("key") {
            return Err(syn::Error::new(
                key.span(),
                "a group handler shares every key of its topic: remove `key`",
            ));
        }
    }
    let group = match group {
        Some(group) => quote!(::core::option::Option::Some(#group)),
        None => quote!(::core::option::Option::None),
    };
    let function: ItemFn = syn::parse2(item.clone())?;
    let signature = &function.sig;
    if args.has("transactional") {
        if batched(&args) {
            return Err(syn::Error::new(
                proc_macro2::Span::call_site(),
                "a transactional handler takes one event per transaction: remove `batch_max` and `batch_wait`",
            ));
        }
        let declared = Declared {
            durable,
            topic: topic_tokens(&args)?,
            key: key_tokens(&args),
            policy,
        };
        return transactional::expand(&args, &declared, &function, item);
    }
    if signature.asyncness.is_none() {
        return Err(syn::Error::new_spanned(
            signature.fn_token,
            "#[subscribe] needs an `async fn`",
        ));
    }
    if !signature.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &signature.generics,
            "#[subscribe] handlers cannot be generic",
        ));
    }
    let topic = topic_tokens(&args)?;
    let key = key_tokens(&args);
    let name = &signature.ident;
    let name_text = name.to_string();
    let wrapper = format_ident!("__photon_handler_{}", name);
    let (input_topic, boxed) = if batched(&args) {
        let item = batch_item(signature)?;
        (
            quote!(<#item as ::photon::runtime::BatchItem>::TOPIC),
            quote!(::photon::runtime::BoxedHandler::batch(#name)),
        )
    } else {
        let input = event_argument(signature)?;
        (
            quote!(<#input as ::photon::runtime::HandlerInput>::TOPIC),
            quote!(::photon::runtime::BoxedHandler::new(#name)),
        )
    };
    Ok(quote! {
        #item

        const _: () = {
            fn #wrapper() -> ::photon::runtime::BoxedHandler {
                #boxed
            }

            ::photon::core::inventory::submit! {
                ::photon::runtime::HandlerDescriptor {
                    name: ::core::concat!(::core::module_path!(), "::", #name_text),
                    topic: #topic,
                    input_topic: #input_topic,
                    durable: #durable,
                    key: #key,
                    group: #group,
                    handler: #wrapper,
                    transactional: ::core::option::Option::None,
                    policy: #policy,
                }
            }
        };
    })
}

/// Most arguments a handler takes (the arities `photon_runtime::Handler` is implemented
/// for).
const MAX_ARGUMENTS: usize = 4;

/// The type of the handler's event argument: the one argument that is not a `State<..>`,
/// `Photon` or `Context` (recognised by the last segment of their path, as written).
fn event_argument(signature: &syn::Signature) -> syn::Result<&syn::Type> {
    let mut events = Vec::new();
    for argument in &signature.inputs {
        match argument {
            FnArg::Receiver(receiver) => {
                return Err(syn::Error::new_spanned(
                    receiver,
                    "#[subscribe] handlers are free functions: they cannot take `self`",
                ))
            }
            FnArg::Typed(typed) if !is_extra_argument(&typed.ty) => events.push(&*typed.ty),
            FnArg::Typed(_) => {}
        }
    }
    if signature.inputs.len() > MAX_ARGUMENTS {
        return Err(syn::Error::new_spanned(
            &signature.inputs,
            "#[subscribe] handlers take at most four arguments: the event and any of `State<T>`, `Photon`, `Context`",
        ));
    }
    match events[..] {
        [event] => Ok(event),
        _ => Err(syn::Error::new_spanned(
            &signature.inputs,
            "#[subscribe] handlers take exactly one event argument (an `Event` or a `#[topic]` type), besides any of `State<T>`, `Photon`, `Context`",
        )),
    }
}

/// Whether `ty` is one of the arguments taken from the executor rather than the event.
fn is_extra_argument(ty: &syn::Type) -> bool {
    let syn::Type::Path(path) = ty else {
        return false;
    };
    path.qself.is_none()
        && path.path.segments.last().is_some_and(|last| {
            matches!(
                (last.ident.to_string().as_str(), &last.arguments),
                ("State", syn::PathArguments::AngleBracketed(_))
                    | ("Photon" | "Context", syn::PathArguments::None)
            )
        })
}

/// Whether the attribute declares a batch handler.
fn batched(args: &Args) -> bool {
    args.integer("batch_max").is_some() || args.get("batch_wait").is_some()
}

/// The item type `I` of a batch handler's first argument, `Vec<I>`; the other arguments
/// are `State<T>` or `Photon` (a batch has no single `Context`).
fn batch_item(signature: &syn::Signature) -> syn::Result<&syn::Type> {
    const FORM: &str = "a batch handler's first argument is the batch: a `Vec<Event>` or `Vec<TypedEvent<T>>`, followed by any of `State<T>`, `Photon`";
    let mut inputs = signature.inputs.iter();
    let first = match inputs.next() {
        Some(FnArg::Typed(first)) => &*first.ty,
        Some(FnArg::Receiver(receiver)) => {
            return Err(syn::Error::new_spanned(
                receiver,
                "#[subscribe] handlers are free functions: they cannot take `self`",
            ))
        }
        None => return Err(syn::Error::new_spanned(&signature.inputs, FORM)),
    };
    if signature.inputs.len() > MAX_ARGUMENTS {
        return Err(syn::Error::new_spanned(
            &signature.inputs,
            "#[subscribe] batch handlers take at most four arguments: the batch and any of `State<T>`, `Photon`",
        ));
    }
    for argument in inputs {
        let FnArg::Typed(typed) = argument else {
            return Err(syn::Error::new_spanned(argument, FORM));
        };
        if !is_extra_argument(&typed.ty) || last_segment_is(&typed.ty, "Context") {
            return Err(syn::Error::new_spanned(&typed.ty, FORM));
        }
    }
    vec_item(first).ok_or_else(|| syn::Error::new_spanned(first, FORM))
}

/// `I` of a type written `Vec<I>` (with any path before `Vec`).
fn vec_item(ty: &syn::Type) -> Option<&syn::Type> {
    let syn::Type::Path(path) = ty else {
        return None;
    };
    let last = path.path.segments.last()?;
    let syn::PathArguments::AngleBracketed(generics) = &last.arguments else {
        return None;
    };
    match (
        last.ident == "Vec",
        generics.args.first(),
        generics.args.len(),
    ) {
        (true, Some(syn::GenericArgument::Type(item)), 1) => Some(item),
        _ => None,
    }
}

fn last_segment_is(ty: &syn::Type, name: &str) -> bool {
    matches!(ty, syn::Type::Path(path) if path.path.segments.last().is_some_and(|last| last.ident == name))
}

/// What the attribute says beside the function, as tokens of the descriptor.
pub(crate) struct Declared<'a> {
    pub(crate) durable: &'a syn::LitStr,
    pub(crate) topic: TokenStream,
    pub(crate) key: TokenStream,
    /// The descriptor's `policy`: a `DeclaredPolicy`.
    pub(crate) policy: TokenStream,
}

/// The descriptor's `policy`: the retry, timeout and concurrency arguments, checked here
/// so that a bad value is a compile error naming it.
fn policy_tokens(args: &Args) -> syn::Result<TokenStream> {
    let max_attempts = match args.integer("max_attempts") {
        Some(literal) => {
            let attempts: u32 = positive(literal, "max_attempts")?;
            quote!(::core::option::Option::Some(#attempts))
        }
        None => quote!(::core::option::Option::None),
    };
    let concurrency = match args.integer("concurrency") {
        Some(literal) => {
            let concurrency: usize = positive(literal, "concurrency")?;
            quote!(::core::option::Option::Some(#concurrency))
        }
        None => quote!(::core::option::Option::None),
    };
    let initial_backoff = duration_tokens(args, "initial_backoff", false)?;
    let max_backoff = duration_tokens(args, "max_backoff", false)?;
    let timeout = duration_tokens(args, "timeout", true)?;
    let batch = batch_tokens(args)?;
    let requeue_retries = args.has("requeue_retries");
    Ok(quote! {
        ::photon::runtime::DeclaredPolicy {
            max_attempts: #max_attempts,
            initial_backoff: #initial_backoff,
            max_backoff: #max_backoff,
            timeout: #timeout,
            concurrency: #concurrency,
            batch: #batch,
            requeue_retries: #requeue_retries,
        }
    })
}

/// The descriptor's `batch`: `batch_max` and `batch_wait`, both or neither; a batch
/// handler has no `concurrency` (its batches run one at a time).
fn batch_tokens(args: &Args) -> syn::Result<TokenStream> {
    let max = match (args.integer("batch_max"), args.get("batch_wait")) {
        (None, None) => return Ok(quote!(::core::option::Option::None)),
        (Some(max), Some(_)) => max,
        (Some(max), None) => {
            return Err(syn::Error::new(
                max.span(),
                "`batch_max` needs `batch_wait = \"...\"`: how long a batch waits for more events after its first",
            ))
        }
        (None, Some(wait)) => {
            return Err(syn::Error::new(
                wait.span(),
                "`batch_wait` needs `batch_max = ...`: the most events of one batch",
            ))
        }
    };
    if let Some(concurrency) = args.integer("concurrency") {
        return Err(syn::Error::new(
            concurrency.span(),
            "a batch handler's batches run one at a time, in order: remove `concurrency`",
        ));
    }
    let max: usize = positive(max, "batch_max")?;
    let wait = duration(args, "batch_wait", true)?;
    Ok(quote!(::core::option::Option::Some(
        ::photon::runtime::BatchPolicy::new(#max, #wait)
    )))
}

/// An integer argument of at least 1 that fits `T`.
fn positive<T>(literal: &syn::LitInt, name: &str) -> syn::Result<T>
where
    T: std::str::FromStr + Default + PartialOrd,
    T::Err: std::fmt::Display,
{
    let value: T = literal.base10_parse()?;
    if value <= T::default() {
        return Err(syn::Error::new(
            literal.span(),
            format!("`{name}` must be at least 1"),
        ));
    }
    Ok(value)
}

/// A duration argument in Photon's configuration dialect (`250ms`, `30s`, `5m`), as a
/// `Duration` built at compile time; `nonzero` refuses `0`.
fn duration_tokens(args: &Args, name: &str, nonzero: bool) -> syn::Result<TokenStream> {
    Ok(match duration(args, name, nonzero)? {
        Some(duration) => quote!(::core::option::Option::Some(#duration)),
        None => quote!(::core::option::Option::None),
    })
}

/// A duration argument as a `Duration` built at compile time, if given.
fn duration(args: &Args, name: &str, nonzero: bool) -> syn::Result<Option<TokenStream>> {
    let Some(literal) = args.get(name) else {
        return Ok(None);
    };
    let text = literal.value();
    let duration = photon_core::config::parse_duration(name, &text).map_err(|_| {
        syn::Error::new(
            literal.span(),
            format!(
                "`{name}`: {text:?} is not a duration: expected {}",
                photon_core::config::DURATION_FORM
            ),
        )
    })?;
    if nonzero && duration.is_zero() {
        return Err(syn::Error::new(
            literal.span(),
            format!("`{name}` must be above zero"),
        ));
    }
    let (secs, nanos) = (duration.as_secs(), duration.subsec_nanos());
    Ok(Some(quote!(::core::time::Duration::new(#secs, #nanos))))
}

/// The descriptor's `topic`: the checked name, or `""` to take the typed argument's.
fn topic_tokens(args: &Args) -> syn::Result<TokenStream> {
    match args.get("topic") {
        Some(topic) => {
            check_topic(topic)?;
            Ok(quote!(#topic))
        }
        None => Ok(quote!("")),
    }
}

fn key_tokens(args: &Args) -> TokenStream {
    match args.get("key") {
        Some(key) => quote!(::core::option::Option::Some(#key)),
        None => quote!(::core::option::Option::None),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use quote::quote;

    use super::expand;

    /// The error of expanding `#[subscribe(attr)]` on `item` (the transactional tests too).
    /// The expansion of a plain durable handler, `bill(order: Order)` as `billing`.
    fn plain_billing() -> String {
        expand(
            quote!(durable = "billing"),
            quote!(
                async fn bill(order: Order) {}
            ),
        )
        .unwrap()
        .to_string()
    }

    pub(crate) fn error(attr: proc_macro2::TokenStream, item: proc_macro2::TokenStream) -> String {
        crate::expansion_error(expand(attr, item))
    }

    #[test]
    fn needs_a_durable_name() {
        let message = error(
            quote!(topic = "orders"),
            quote!(
                async fn bill(event: Event) {}
            ),
        );
        assert_eq!(message, "#[subscribe] needs `durable = \"...\"`");
    }

    #[test]
    fn needs_an_async_fn_with_one_event_argument() {
        let sync = error(
            quote!(durable = "billing"),
            quote!(
                fn bill(event: Event) {}
            ),
        );
        assert_eq!(sync, "#[subscribe] needs an `async fn`");
        let two = error(
            quote!(durable = "billing"),
            quote!(
                async fn bill(a: Event, b: Event) {}
            ),
        );
        assert_eq!(
            two,
            "#[subscribe] handlers take exactly one event argument (an `Event` or a `#[topic]` type), besides any of `State<T>`, `Photon`, `Context`"
        );
        let none = error(
            quote!(durable = "billing"),
            quote!(
                async fn bill(photon: Photon, context: photon::runtime::Context) {}
            ),
        );
        assert_eq!(none, two);
        let five = error(
            quote!(durable = "billing"),
            quote!(
                async fn bill(a: Event, b: Photon, c: Context, d: State<Db>, e: State<Cache>) {}
            ),
        );
        assert_eq!(
            five,
            "#[subscribe] handlers take at most four arguments: the event and any of `State<T>`, `Photon`, `Context`"
        );
    }

    #[test]
    fn finds_the_event_among_the_other_arguments() {
        let expanded = expand(
            quote!(durable = "billing"),
            quote!(
                async fn bill(
                    context: Context,
                    State(db): State<Db>,
                    order: shop::Order,
                    photon: ::photon::runtime::Photon,
                ) {
                }
            ),
        )
        .unwrap()
        .to_string();
        assert!(
            expanded.contains(
                "input_topic : < shop :: Order as :: photon :: runtime :: HandlerInput > :: TOPIC"
            ),
            "{expanded}"
        );
        assert!(
            expanded.contains(":: photon :: runtime :: BoxedHandler :: new (bill)"),
            "{expanded}"
        );
    }

    #[test]
    fn checks_the_topic_name() {
        let message = error(
            quote!(topic = "a b", durable = "x"),
            quote!(
                async fn bill(event: Event) {}
            ),
        );
        assert_eq!(
            message,
            "invalid topic name \"a b\": character ' ' is outside [a-z0-9._-]"
        );
    }

    #[test]
    fn registers_a_descriptor() {
        let expanded = expand(
            quote!(durable = "billing", key = "o-1"),
            quote!(
                async fn bill(order: Order) {}
            ),
        )
        .unwrap()
        .to_string();
        assert!(
            expanded.contains(":: photon :: runtime :: HandlerDescriptor"),
            "{expanded}"
        );
        assert!(expanded.contains("durable : \"billing\""), "{expanded}");
        assert!(
            expanded.contains("key : :: core :: option :: Option :: Some (\"o-1\")"),
            "{expanded}"
        );
    }

    #[test]
    fn registers_a_group_handler() {
        let expanded = expand(
            quote!(group = "packers"),
            quote!(
                async fn pack(order: Order) {}
            ),
        )
        .unwrap()
        .to_string();
        assert!(expanded.contains("durable : \"packers\""), "{expanded}");
        assert!(
            expanded.contains("group : :: core :: option :: Option :: Some (\"packers\")"),
            "{expanded}"
        );
    }

    #[test]
    fn declares_the_policy() {
        let expanded = expand(
            quote!(
                durable = "billing",
                max_attempts = 2,
                initial_backoff = "100ms",
                max_backoff = "10s",
                timeout = "1m 30s",
                concurrency = 4,
                requeue_retries
            ),
            quote!(
                async fn bill(order: Order) {}
            ),
        )
        .unwrap()
        .to_string();
        for expected in [
            "max_attempts : :: core :: option :: Option :: Some (2u32)",
            "initial_backoff : :: core :: option :: Option :: Some (:: core :: time :: Duration :: new (0u64 , 100000000u32))",
            "max_backoff : :: core :: option :: Option :: Some (:: core :: time :: Duration :: new (10u64 , 0u32))",
            "timeout : :: core :: option :: Option :: Some (:: core :: time :: Duration :: new (90u64 , 0u32))",
            "concurrency : :: core :: option :: Option :: Some (4usize)",
            "requeue_retries : true",
        ] {
            assert!(expanded.contains(expected), "{expected} in {expanded}");
        }
        let plain = plain_billing();
        assert!(
            plain.contains("timeout : :: core :: option :: Option :: None"),
            "{plain}"
        );
    }

    #[test]
    fn refuses_a_bad_policy_value_naming_it() {
        let item = quote!(
            async fn bill(order: Order) {}
        );
        let unitless = error(quote!(durable = "b", timeout = "30"), item.clone());
        assert!(
            unitless.starts_with(
                "`timeout`: \"30\" is not a duration: expected a duration with a unit"
            ),
            "{unitless}"
        );
        let zero = error(quote!(durable = "b", timeout = "0s"), item.clone());
        assert_eq!(zero, "`timeout` must be above zero");
        let garbage = error(quote!(durable = "b", max_backoff = "soon"), item.clone());
        assert!(garbage.starts_with("`max_backoff`: \"soon\""), "{garbage}");
        let no_attempt = error(quote!(durable = "b", max_attempts = 0), item.clone());
        assert_eq!(no_attempt, "`max_attempts` must be at least 1");
        let no_slot = error(quote!(durable = "b", concurrency = 0), item.clone());
        assert_eq!(no_slot, "`concurrency` must be at least 1");
        let text = error(quote!(durable = "b", concurrency = "4"), item.clone());
        assert_eq!(text, "`concurrency` takes an integer literal");
        let number = error(quote!(durable = "b", timeout = 30), item.clone());
        assert_eq!(number, "`timeout` takes a string literal");
        let batch = error(
            quote!(
                durable = "b",
                batch_max = 5,
                batch_wait = "5ms",
                requeue_retries
            ),
            item,
        );
        assert!(
            batch.starts_with("`requeue_retries` requeues one event"),
            "{batch}"
        );
    }

    #[test]
    fn a_group_handler_takes_every_key() {
        let message = error(
            quote!(group = "packers", key = "o-1"),
            quote!(
                async fn pack(order: Order) {}
            ),
        );
        assert_eq!(
            message,
            "a group handler shares every key of its topic: remove `key`"
        );
    }

    #[test]
    fn declares_a_batch_handler() {
        let expanded = expand(
            quote!(durable = "audit", batch_max = 100, batch_wait = "50ms"),
            quote!(
                async fn audit(
                    orders: Vec<TypedEvent<Order>>,
                    State(db): State<Db>,
                    photon: Photon,
                ) {
                }
            ),
        )
        .unwrap()
        .to_string();
        for expected in [
            ":: photon :: runtime :: BoxedHandler :: batch (audit)",
            "input_topic : < TypedEvent < Order > as :: photon :: runtime :: BatchItem > :: TOPIC",
            "batch : :: core :: option :: Option :: Some (:: photon :: runtime :: BatchPolicy :: new (100usize , :: core :: time :: Duration :: new (0u64 , 50000000u32)))",
        ] {
            assert!(expanded.contains(expected), "{expected} in {expanded}");
        }
        let single = plain_billing();
        assert!(
            single.contains("batch : :: core :: option :: Option :: None"),
            "{single}"
        );
    }

    #[test]
    fn refuses_a_bad_batch_declaration_naming_it() {
        let batch = quote!(
            async fn audit(orders: Vec<Event>) {}
        );
        let no_wait = error(quote!(durable = "a", batch_max = 10), batch.clone());
        assert!(
            no_wait.starts_with("`batch_max` needs `batch_wait"),
            "{no_wait}"
        );
        let no_max = error(quote!(durable = "a", batch_wait = "1s"), batch.clone());
        assert!(
            no_max.starts_with("`batch_wait` needs `batch_max"),
            "{no_max}"
        );
        let empty = error(
            quote!(durable = "a", batch_max = 0, batch_wait = "1s"),
            batch.clone(),
        );
        assert_eq!(empty, "`batch_max` must be at least 1");
        let instant = error(
            quote!(durable = "a", batch_max = 10, batch_wait = "0s"),
            batch.clone(),
        );
        assert_eq!(instant, "`batch_wait` must be above zero");
        let unitless = error(
            quote!(durable = "a", batch_max = 10, batch_wait = "50"),
            batch.clone(),
        );
        assert!(
            unitless.starts_with("`batch_wait`: \"50\" is not a duration"),
            "{unitless}"
        );
        let parallel = error(
            quote!(
                durable = "a",
                batch_max = 10,
                batch_wait = "1s",
                concurrency = 2
            ),
            batch,
        );
        assert_eq!(
            parallel,
            "a batch handler's batches run one at a time, in order: remove `concurrency`"
        );
        let form = "a batch handler's first argument is the batch: a `Vec<Event>` or `Vec<TypedEvent<T>>`, followed by any of `State<T>`, `Photon`";
        let single = error(
            quote!(durable = "a", batch_max = 10, batch_wait = "1s"),
            quote!(
                async fn audit(order: Order) {}
            ),
        );
        assert_eq!(single, form);
        let context = error(
            quote!(durable = "a", batch_max = 10, batch_wait = "1s"),
            quote!(
                async fn audit(orders: Vec<Event>, context: Context) {}
            ),
        );
        assert_eq!(context, form);
    }
}
