//! `#[subscribe(durable = "...", transactional)]`: registers a fn taking a port's
//! transaction and an input as a transactional handler, bound to the `Photon`'s port when
//! the executor starts (a plain fn for SQLite, an `async fn` for PostgreSQL).

use proc_macro2::TokenStream;
use quote::{format_ident, quote};
use syn::{FnArg, ItemFn, Type};

use crate::args::Args;
use crate::subscribe::Declared;

/// Expands a transactional `#[subscribe]` on `function`.
pub(crate) fn expand(
    args: &Args,
    declared: &Declared<'_>,
    function: &ItemFn,
    item: TokenStream,
) -> syn::Result<TokenStream> {
    let signature = &function.sig;
    if let Some(group) = args.get("group") {
        return Err(syn::Error::new(
            group.span(),
            "a transactional handler cannot be a group member: remove `group`",
        ));
    }
    if !signature.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &signature.generics,
            "#[subscribe] handlers cannot be generic",
        ));
    }
    let arguments: Vec<&FnArg> = signature.inputs.iter().collect();
    let (transaction, input) = match arguments[..] {
        [FnArg::Typed(transaction), FnArg::Typed(input)] => (&transaction.ty, &input.ty),
        _ => {
            return Err(syn::Error::new_spanned(
                &signature.inputs,
                "a transactional handler takes two arguments: the transaction (`&SqliteTransaction<'_>`) and an `Event` or a `#[topic]` type",
            ))
        }
    };
    let Type::Reference(reference) = &**transaction else {
        return Err(syn::Error::new_spanned(
            transaction,
            "the first argument of a transactional handler is a reference to the port's transaction (`&SqliteTransaction<'_>`)",
        ));
    };
    let handle = &reference.elem;
    let name = &signature.ident;
    let call = format_ident!("__photon_transactional_call_{}", name);
    // The port's transaction type decides the form: SQLite runs a plain fn on its writer
    // thread, PostgreSQL awaits an async fn on a pooled connection.
    let asynchronous = match (signature.asyncness, transaction_name(handle).as_deref()) {
        (Some(asyncness), Some("SqliteTransaction")) => {
            return Err(syn::Error::new_spanned(
                asyncness,
                "a transactional handler is a plain `fn`: it runs inside the port's transaction, on its writer thread",
            ));
        }
        (None, Some("PostgresTransaction")) => {
            return Err(syn::Error::new_spanned(
                signature.fn_token,
                "a transactional handler on PostgreSQL is an `async fn`: it awaits the transaction's statements",
            ));
        }
        (asyncness, _) => asyncness.is_some(),
    };
    let function_value = if asynchronous {
        quote! {
            |transaction, event: ::photon::Event| {
                ::std::boxed::Box::pin(async move {
                    let input = <#input as ::photon::runtime::HandlerInput>::from_event(event)?;
                    ::photon::runtime::IntoHandlerResult::into_handler_result(
                        #name(transaction, input).await,
                    )
                })
            }
        }
    } else {
        quote! { #call }
    };
    let call_function = if asynchronous {
        TokenStream::new()
    } else {
        quote! {
            fn #call(transaction: #transaction, event: ::photon::Event) -> ::photon::core::Result<()> {
                let input = <#input as ::photon::runtime::HandlerInput>::from_event(event)?;
                ::photon::runtime::IntoHandlerResult::into_handler_result(#name(transaction, input))
            }
        }
    };
    let (durable, topic, key) = (declared.durable, &declared.topic, &declared.key);
    let policy = &declared.policy;
    let name_text = name.to_string();
    let bind = format_ident!("__photon_transactional_bind_{}", name);
    let unused = format_ident!("__photon_handler_{}", name);
    Ok(quote! {
        #item

        const _: () = {
            #call_function

            fn #bind(
                port: &::std::sync::Arc<dyn ::photon::core::StoragePort>,
                options: &::photon::runtime::HandlerOptions,
            ) -> ::photon::core::Result<::photon::runtime::TransactionalBinding> {
                ::photon::runtime::TransactionalBinding::declared::<
                    <#handle as ::photon::core::TransactionHandle>::Port,
                >(port, options, #function_value)
            }

            // The executor runs a transactional descriptor through its binding only.
            fn #unused() -> ::photon::runtime::BoxedHandler {
                ::photon::runtime::BoxedHandler::new(|_event: ::photon::Event| {
                    ::core::future::ready(::core::result::Result::<(), _>::Err(
                        ::photon::PhotonError::InvalidInput(::std::string::String::from(
                            "a transactional handler runs only through its binding",
                        )),
                    ))
                })
            }

            ::photon::core::inventory::submit! {
                ::photon::runtime::HandlerDescriptor {
                    name: ::core::concat!(::core::module_path!(), "::", #name_text),
                    topic: #topic,
                    input_topic: <#input as ::photon::runtime::HandlerInput>::TOPIC,
                    durable: #durable,
                    key: #key,
                    group: ::core::option::Option::None,
                    handler: #unused,
                    transactional: ::core::option::Option::Some(#bind),
                    policy: #policy,
                }
            }
        };
    })
}

/// The last path segment of the transaction type (`SqliteTransaction`, ...), if a path.
fn transaction_name(handle: &Type) -> Option<String> {
    match handle {
        Type::Path(path) => path.path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use quote::quote;

    use crate::subscribe::expand;
    use crate::subscribe::tests::error;

    #[test]
    fn a_transactional_handler_is_a_plain_fn_of_a_transaction_and_an_input() {
        let asynchronous = error(
            quote!(durable = "ledger", transactional),
            quote!(
                async fn record(tx: &SqliteTransaction<'_>, order: Order) {}
            ),
        );
        assert_eq!(
            asynchronous,
            "a transactional handler is a plain `fn`: it runs inside the port's transaction, on its writer thread"
        );
        let one = error(
            quote!(durable = "ledger", transactional),
            quote!(
                fn record(order: Order) {}
            ),
        );
        assert_eq!(
            one,
            "a transactional handler takes two arguments: the transaction (`&SqliteTransaction<'_>`) and an `Event` or a `#[topic]` type"
        );
        let owned = error(
            quote!(durable = "ledger", transactional),
            quote!(
                fn record(tx: SqliteTransaction<'static>, order: Order) {}
            ),
        );
        assert_eq!(
            owned,
            "the first argument of a transactional handler is a reference to the port's transaction (`&SqliteTransaction<'_>`)"
        );
    }

    #[test]
    fn a_transactional_handler_joins_no_group_and_takes_no_value() {
        let grouped = error(
            quote!(group = "ledger", transactional),
            quote!(
                fn record(tx: &SqliteTransaction<'_>, order: Order) {}
            ),
        );
        assert_eq!(
            grouped,
            "a transactional handler cannot be a group member: remove `group`"
        );
        let valued = error(
            quote!(durable = "ledger", transactional = "yes"),
            quote!(
                fn record(tx: &SqliteTransaction<'_>, order: Order) {}
            ),
        );
        assert_eq!(valued, "`transactional` takes no value");
        let twice = error(
            quote!(durable = "ledger", transactional, transactional),
            quote!(
                fn record(tx: &SqliteTransaction<'_>, order: Order) {}
            ),
        );
        assert_eq!(twice, "`transactional` given twice");
    }

    #[test]
    fn a_postgres_transactional_handler_is_async() {
        let plain = error(
            quote!(durable = "ledger", transactional),
            quote!(
                fn record(tx: &PostgresTransaction<'_>, order: Order) {}
            ),
        );
        assert_eq!(
            plain,
            "a transactional handler on PostgreSQL is an `async fn`: it awaits the transaction's statements"
        );
        let expanded = expand(
            quote!(durable = "ledger", transactional),
            quote!(
                async fn record(tx: &PostgresTransaction<'_>, order: Order) {}
            ),
        )
        .unwrap()
        .to_string();
        assert!(
            expanded.contains("record (transaction , input) . await"),
            "{expanded}"
        );
        assert!(
            expanded.contains(
                "< PostgresTransaction < '_ > as :: photon :: core :: TransactionHandle > :: Port"
            ),
            "{expanded}"
        );
        assert!(
            !expanded.contains("__photon_transactional_call_record"),
            "{expanded}"
        );
    }

    #[test]
    fn registers_a_binding() {
        let expanded = expand(
            quote!(durable = "ledger", transactional),
            quote!(
                fn record(tx: &SqliteTransaction<'_>, order: Order) {}
            ),
        )
        .unwrap()
        .to_string();
        assert!(
            expanded.contains(
                "transactional : :: core :: option :: Option :: Some (__photon_transactional_bind_record)"
            ),
            "{expanded}"
        );
        assert!(
            expanded.contains(
                "< SqliteTransaction < '_ > as :: photon :: core :: TransactionHandle > :: Port"
            ),
            "{expanded}"
        );
        assert!(expanded.contains("durable : \"ledger\""), "{expanded}");
    }
}
