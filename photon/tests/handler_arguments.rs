//! `#[subscribe]` handlers that take `State`, `Photon` and `Context` besides their event,
//! started by `Photon::start_executor`. The declared handlers are global to this test
//! binary: their topics (`checkout.*`) are used by no other test.

use std::sync::{Arc, Mutex};

use photon::prelude::*;
use serde::{Deserialize, Serialize};

#[topic(name = "checkout.carts", keyed_by = "cart_id")]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Cart {
    cart_id: String,
    total: u32,
}

#[topic(name = "checkout.invoices", keyed_by = "cart_id")]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Invoice {
    cart_id: String,
    cart_seq: i64,
    total: u32,
}

/// One handler call: `(handler, key, seq, attempt)`.
type Entry = (&'static str, Option<String>, i64, u32);

/// What the handlers record, per call.
#[derive(Clone, Default)]
struct Ledger(Arc<Mutex<Vec<Entry>>>);

impl Ledger {
    fn record(&self, handler: &'static str, context: &Context) {
        let key = context.key().map(str::to_owned);
        let entry = (handler, key, context.seq(), context.attempt());
        self.0.lock().unwrap().push(entry);
    }
}

/// Invoices a cart: the state, the event and the `Photon` in an order of its own.
#[subscribe(durable = "checkout-invoicing")]
async fn invoice(
    context: Context,
    State(ledger): State<Ledger>,
    cart: Cart,
    photon: Photon,
) -> Result<(), PhotonError> {
    ledger.record("invoice", &context);
    Invoice {
        cart_id: cart.cart_id,
        cart_seq: context.seq(),
        total: cart.total,
    }
    .publish_on(&photon)
    .await?;
    Ok(())
}

/// A raw event and a context named by its full path.
#[subscribe(topic = "checkout.invoices", durable = "checkout-audit")]
async fn audit(event: Event, ledger: State<Ledger>, context: photon::runtime::Context) {
    assert_eq!(event.seq, context.seq());
    // `State` dereferences to the value.
    ledger.record("audit", &context);
}

#[tokio::test]
async fn a_declared_handlers_state_must_be_registered() {
    let photon = Photon::builder().build().unwrap();
    let refused = photon.start_executor().unwrap_err();
    let text = refused.to_string();
    assert!(matches!(refused, PhotonError::Config { .. }), "{refused:?}");
    assert!(
        text.contains("handler handler_arguments::invoice takes State<handler_arguments::Ledger>")
            || text.contains(
                "handler handler_arguments::audit takes State<handler_arguments::Ledger>"
            ),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declared_handlers_take_state_photon_and_context() {
    let ledger = Ledger::default();
    let photon = Photon::builder().state(ledger.clone()).build().unwrap();
    let carts = [("c-1", 10), ("c-2", 25), ("c-1", 4)];
    let mut seqs = Vec::new();
    for (cart_id, total) in carts {
        let cart = Cart {
            cart_id: cart_id.into(),
            total,
        };
        seqs.push(cart.publish_on(&photon).await.unwrap().seq);
    }
    let executor = photon.start_executor().unwrap();
    let mut durables: Vec<String> = executor
        .handlers()
        .iter()
        .filter(|handler| handler.topic().starts_with("checkout."))
        .map(|handler| handler.durable().to_owned())
        .collect();
    durables.sort();
    assert_eq!(durables, ["checkout-audit", "checkout-invoicing"]);
    // Once the carts are invoiced, the invoices they published are audited.
    executor.wait_idle().await.unwrap();
    executor.wait_idle().await.unwrap();
    executor.shutdown().await.unwrap();

    let mut invoiced: Vec<_> = ledger
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|entry| entry.0 == "invoice")
        .cloned()
        .collect();
    invoiced.sort_by_key(|entry| entry.2);
    let expected: Vec<_> = carts
        .iter()
        .zip(&seqs)
        .map(|((cart_id, _), seq)| ("invoice", Some(cart_id.to_string()), *seq, 1))
        .collect();
    assert_eq!(invoiced, expected);

    let mut invoices = Invoice::subscribe_on(&photon, SubscribeOptions::from_beginning());
    let mut published = Vec::new();
    for _ in 0..carts.len() {
        let invoice = invoices.next().await.unwrap().unwrap();
        published.push((invoice.value, invoice.event.seq));
    }
    published.sort_by_key(|(invoice, _)| invoice.cart_seq);
    let totals: Vec<_> = published
        .iter()
        .map(|(invoice, _)| (invoice.cart_id.as_str(), invoice.cart_seq, invoice.total))
        .collect();
    assert_eq!(
        totals,
        [
            ("c-1", seqs[0], 10),
            ("c-2", seqs[1], 25),
            ("c-1", seqs[2], 4)
        ]
    );

    let mut audited: Vec<_> = ledger
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|entry| entry.0 == "audit")
        .map(|entry| (entry.1.clone().unwrap(), entry.2, entry.3))
        .collect();
    audited.sort_by_key(|entry| entry.1);
    let mut expected: Vec<_> = published
        .iter()
        .map(|(invoice, seq)| (invoice.cart_id.clone(), *seq, 1))
        .collect();
    expected.sort_by_key(|entry| entry.1);
    assert_eq!(audited, expected);
    assert_eq!(
        photon
            .checkpoint("checkout-invoicing", "checkout.carts", None)
            .await
            .unwrap(),
        Some(seqs[2])
    );
}
