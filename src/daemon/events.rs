//! The daemon's event stream: `flemma/event {name, uri?, data}` (harness.md §9) to every
//! subscriber. A slow or dead subscriber never blocks the publisher: each has a bounded queue
//! that drops its oldest events (and counts them) when full.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use serde::Serialize;

/// Events a subscriber may fall behind by before the oldest are dropped.
pub const QUEUE_CAPACITY: usize = 1024;

/// One event, as sent in `flemma/event` notifications and printed by `flemmad events`.
#[derive(Debug, Clone, Serialize)]
pub struct Event {
    pub name: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
    pub data: serde_json::Value,
}

impl Event {
    pub fn new(name: &'static str, data: serde_json::Value) -> Self {
        Self {
            name,
            uri: None,
            data,
        }
    }

    /// An event of one document.
    pub fn of_document(name: &'static str, uri: String, data: serde_json::Value) -> Self {
        Self {
            name,
            uri: Some(uri),
            data,
        }
    }
}

#[derive(Debug, Default)]
struct QueueState {
    events: VecDeque<Event>,
    dropped: u64,
    closed: bool,
    /// Closed and every queued event taken: the forwarder is done.
    drained: bool,
}

/// Which events a subscriber wants.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Only the events of this document (a `file://` URI); `None`: every event.
    pub uri: Option<String>,
    /// Also the streamed reply and thinking text ([`TEXT_EVENT`], [`THINKING_EVENT`]), which
    /// are left out otherwise.
    pub text: bool,
}

impl Filter {
    fn wants(&self, event: &Event) -> bool {
        (self.text || (event.name != TEXT_EVENT && event.name != THINKING_EVENT))
            && self
                .uri
                .as_ref()
                .is_none_or(|uri| event.uri.as_ref() == Some(uri))
    }
}

pub use crate::engine_host::{TEXT_EVENT, THINKING_EVENT};

/// One subscriber's queue.
#[derive(Debug, Default)]
pub struct Subscription {
    state: Mutex<QueueState>,
    ready: Condvar,
    filter: Mutex<Filter>,
}

impl Subscription {
    /// Changes which events this subscriber gets from now on.
    pub fn set_filter(&self, filter: Filter) {
        *self.filter.lock().unwrap_or_else(PoisonError::into_inner) = filter;
    }

    fn push(&self, event: Event) {
        if !self
            .filter
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .wants(&event)
        {
            return;
        }
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.events.len() >= QUEUE_CAPACITY {
            state.events.pop_front();
            state.dropped += 1;
        }
        state.events.push_back(event);
        self.ready.notify_one();
    }

    /// Waits for the next event; `None` once closed. The second value counts events dropped
    /// since the last call.
    pub fn next(&self) -> Option<(Event, u64)> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let mut state = self
            .ready
            .wait_while(state, |s| s.events.is_empty() && !s.closed)
            .unwrap_or_else(PoisonError::into_inner);
        let Some(event) = state.events.pop_front() else {
            state.drained = true;
            return None;
        };
        let dropped = std::mem::take(&mut state.dropped);
        Some((event, dropped))
    }

    /// Ends the subscription at once, dropping what is queued (the subscriber went away).
    pub fn close(&self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.closed = true;
        state.events.clear();
        self.ready.notify_all();
    }

    /// Ends the subscription once what is queued has been taken.
    fn finish(&self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.closed = true;
        self.ready.notify_all();
    }

    fn is_drained(&self) -> bool {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drained
    }
}

/// Every subscriber.
#[derive(Debug, Default)]
pub struct EventHub {
    subscribers: Mutex<Vec<Arc<Subscription>>>,
}

impl EventHub {
    #[cfg(test)]
    pub fn subscribe(&self) -> Arc<Subscription> {
        self.subscribe_with(Filter::default())
    }

    pub fn subscribe_with(&self, filter: Filter) -> Arc<Subscription> {
        let subscription = Arc::new(Subscription {
            filter: Mutex::new(filter),
            ..Subscription::default()
        });
        self.subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::clone(&subscription));
        subscription
    }

    pub fn unsubscribe(&self, subscription: &Arc<Subscription>) {
        subscription.close();
        self.subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|s| !Arc::ptr_eq(s, subscription));
    }

    pub fn subscriber_count(&self) -> usize {
        self.subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// At shutdown: lets every subscriber take what is queued, waiting up to `timeout`.
    pub fn drain(&self, timeout: std::time::Duration) {
        let subscribers = self
            .subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for subscriber in &subscribers {
            subscriber.finish();
        }
        let start = std::time::Instant::now();
        while start.elapsed() < timeout && !subscribers.iter().all(|s| s.is_drained()) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    pub fn publish(&self, event: Event) {
        for subscriber in self
            .subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            subscriber.push(event.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_drops_its_oldest_events_and_counts_them() {
        let hub = EventHub::default();
        let subscription = hub.subscribe();
        for n in 0..QUEUE_CAPACITY + 3 {
            hub.publish(Event::new("test", serde_json::json!(n)));
        }
        let (first, dropped) = subscription.next().expect("an event");
        assert_eq!(first.data, serde_json::json!(3));
        assert_eq!(dropped, 3);
        let (second, dropped) = subscription.next().expect("an event");
        assert_eq!(second.data, serde_json::json!(4));
        assert_eq!(dropped, 0);
    }

    #[test]
    fn a_drained_queue_hands_out_what_it_holds_then_ends() {
        let hub = EventHub::default();
        let subscription = hub.subscribe();
        hub.publish(Event::new("last", serde_json::Value::Null));
        let taker = {
            let subscription = Arc::clone(&subscription);
            std::thread::spawn(move || {
                let mut names = Vec::new();
                while let Some((event, _)) = subscription.next() {
                    names.push(event.name);
                }
                names
            })
        };
        hub.drain(std::time::Duration::from_secs(5));
        assert!(subscription.is_drained());
        assert_eq!(taker.join().expect("the taker"), ["last"]);
    }

    #[test]
    fn a_filtered_queue_gets_only_its_documents_events_and_text_when_asked() {
        let hub = EventHub::default();
        let all = hub.subscribe();
        let one = hub.subscribe();
        one.set_filter(Filter {
            uri: Some("file:///a.chat".into()),
            text: true,
        });
        let event = |name, uri: &str| Event::of_document(name, uri.into(), serde_json::json!({}));
        hub.publish(event("tool:executing", "file:///b.chat"));
        hub.publish(event(TEXT_EVENT, "file:///a.chat"));
        hub.publish(event("engine:stopped", "file:///a.chat"));
        hub.publish(Event::new("session:opened", serde_json::json!({})));
        hub.drain(std::time::Duration::ZERO);
        let names = |s: &Subscription| {
            std::iter::from_fn(|| s.next().map(|(e, _)| e.name)).collect::<Vec<_>>()
        };
        assert_eq!(names(&one), [TEXT_EVENT, "engine:stopped"]);
        assert_eq!(
            names(&all),
            ["tool:executing", "engine:stopped", "session:opened"]
        );
    }

    #[test]
    fn an_unsubscribed_queue_ends_and_gets_no_more_events() {
        let hub = EventHub::default();
        let subscription = hub.subscribe();
        hub.unsubscribe(&subscription);
        hub.publish(Event::new("test", serde_json::Value::Null));
        assert!(subscription.next().is_none());
    }
}
